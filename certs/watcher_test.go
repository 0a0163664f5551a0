package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandgate-dev/sandgate/certs"
)

const (
	timeout  = 30 * time.Second
	interval = 20 * time.Millisecond
)

func selfSigned(t *testing.T) *certs.Bundle {
	t.Helper()
	b, err := certs.SelfSigned([]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	if err != nil {
		t.Fatalf("making a self-signed bundle: %v", err)
	}
	return b
}

func parse(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatalf("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("parsing certificate: %v", err)
	}
	return c
}

// servedSerial dials addr, verifying the server against caPEM, and returns the serial number
// of the certificate it served.
func servedSerial(addr string, caPEM []byte) (string, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return "", errors.New("bad CA PEM")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// freePort returns a port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// eventually calls f every poll until it returns nil, and fails the test with f's last error
// once timeout has passed.
func eventually(t *testing.T, poll time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", timeout, err)
		}
		time.Sleep(poll)
	}
}

// startServer runs a webhook server on a free local port with w as its certificate source,
// and w itself, until the test ends; it returns the server's address.
func startServer(t *testing.T, w *certs.Watcher) (string, webhook.Server) {
	t.Helper()
	port := freePort(t)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){w.TLSOpt}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- srv.Start(ctx) }()
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stopping: %v", err)
			}
		}
	})
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), srv
}

func expectServes(t *testing.T, addr string, b *certs.Bundle, wantSerial string) {
	t.Helper()
	eventually(t, interval, func() error {
		serial, err := servedSerial(addr, b.CAPEM)
		if err != nil {
			return err
		}
		if serial != wantSerial {
			return fmt.Errorf("served certificate %s, want %s", serial, wantSerial)
		}
		return nil
	})
}

// A webhook server started before any certificate exists is not ready; it serves the first
// certificate written, and after the files are replaced under it (a renewal) it serves the
// new one, without a restart. Polling is off: file events alone drive the reloads.
func TestWatcherServesRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	w := certs.NewWatcher(dir).WithPollInterval(time.Hour)
	if w.Current() != nil {
		t.Fatalf("a certificate before any was written")
	}
	if w.Checker()(nil) == nil {
		t.Fatalf("ready without a certificate")
	}
	addr, srv := startServer(t, w)

	first := selfSigned(t)
	wantFirst := parse(t, first.CertPEM).SerialNumber.String()
	// The watch is set up asynchronously: rewrite until an event is seen.
	eventually(t, 100*time.Millisecond, func() error {
		if err := first.Write(dir); err != nil {
			return err
		}
		if w.Current() == nil {
			return errors.New("no certificate loaded yet")
		}
		return nil
	})
	expectServes(t, addr, first, wantFirst)
	if err := w.Checker()(nil); err != nil {
		t.Fatalf("not ready with a certificate: %v", err)
	}
	eventually(t, interval, func() error { return srv.StartedChecker()(nil) })

	second := selfSigned(t)
	wantSecond := parse(t, second.CertPEM).SerialNumber.String()
	if wantSecond == wantFirst {
		t.Fatalf("two self-signed bundles share serial %s", wantFirst)
	}
	if err := second.Write(dir); err != nil {
		t.Fatal(err)
	}
	expectServes(t, addr, second, wantSecond)
	if got := w.Loads(); got != 2 {
		t.Errorf("loads = %d, want 2: one load per certificate", got)
	}
}

// A certificate directory that appears only after the server started (a Secret mounted late)
// is found by polling.
func TestWatcherFindsLateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	w := certs.NewWatcher(dir).WithPollInterval(50 * time.Millisecond)
	addr, _ := startServer(t, w)

	b := selfSigned(t)
	if err := b.Write(dir); err != nil {
		t.Fatal(err)
	}
	expectServes(t, addr, b, parse(t, b.CertPEM).SerialNumber.String())
}

// A key that does not match the certificate (files caught between two writes) is not loaded;
// the previous pair keeps being served.
func TestWatcherKeepsLastGoodPair(t *testing.T) {
	dir := t.TempDir()
	first, second := selfSigned(t), selfSigned(t)
	if err := first.Write(dir); err != nil {
		t.Fatal(err)
	}
	w := certs.NewWatcher(dir)
	if w.Current() == nil {
		t.Fatalf("no certificate loaded from %s", dir)
	}

	if err := os.WriteFile(filepath.Join(dir, certs.CertFile), second.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(); err == nil {
		t.Errorf("Reload of a certificate with another pair's key: want an error")
	}
	if got, want := w.Current().SerialNumber.String(), parse(t, first.CertPEM).SerialNumber.String(); got != want {
		t.Errorf("serving %s after a bad reload, want the last good pair's %s", got, want)
	}
	if err := w.Checker()(nil); err != nil {
		t.Errorf("not ready after a bad reload: %v", err)
	}
}

// The self-signed bundle verifies against its CA for the names it was made for, and for no
// others.
func TestSelfSignedVerifies(t *testing.T) {
	b, err := certs.SelfSigned([]string{"svc.ns.svc"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	if err != nil {
		t.Fatalf("SelfSigned: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CAPEM)
	leaf := parse(t, b.CertPEM)
	for _, tc := range []struct {
		name    string
		host    string
		wantErr bool
	}{
		{name: "dns name", host: "svc.ns.svc"},
		{name: "ip", host: "127.0.0.1"},
		{name: "other name", host: "other.ns.svc", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool})
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("Verify(%s) error = %v, want error %v", tc.host, err, tc.wantErr)
			}
		})
	}
	if _, err := certs.SelfSigned(nil, nil, time.Hour); err == nil {
		t.Errorf("SelfSigned without names: want an error")
	}
}

// A CA keeps its key: every certificate it issues is new and verifies against the one CA
// certificate a client was given first, as a cert-manager CA Issuer's renewals do.
func TestCAIssuesRenewalsUnderTheSameCA(t *testing.T) {
	ca, err := certs.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	first, err := ca.Issue([]string{"localhost"}, nil, time.Hour)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	renewed, err := ca.Issue([]string{"localhost"}, nil, time.Hour)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if string(first.CAPEM) != string(renewed.CAPEM) {
		t.Errorf("the renewal carries another CA certificate")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(first.CAPEM)
	for name, b := range map[string]*certs.Bundle{"first": first, "renewed": renewed} {
		if _, err := parse(t, b.CertPEM).Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool}); err != nil {
			t.Errorf("%s certificate does not verify against the first CA: %v", name, err)
		}
	}
	if parse(t, first.CertPEM).SerialNumber.Cmp(parse(t, renewed.CertPEM).SerialNumber) == 0 {
		t.Errorf("the renewal has the first certificate's serial number")
	}
	if _, err := ca.Issue(nil, nil, time.Hour); err == nil {
		t.Errorf("Issue without names: want an error")
	}
}
