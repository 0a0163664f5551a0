package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/test/controlplane"
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

func freePort(t *testing.T) int {
	t.Helper()
	port, err := controlplane.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
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

func expectServes(g *WithT, addr string, b *certs.Bundle, wantSerial string) {
	g.Eventually(func(g Gomega) {
		serial, err := servedSerial(addr, b.CAPEM)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(serial).To(Equal(wantSerial))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
}

// A webhook server started before any certificate exists is not ready; it serves the first
// certificate written, and after the files are replaced under it (a renewal) it serves the
// new one, without a restart. Polling is off: file events alone drive the reloads.
func TestWatcherServesRotatedCertificate(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	w := certs.NewWatcher(dir).WithPollInterval(time.Hour)
	g.Expect(w.Current()).To(BeNil())
	g.Expect(w.Checker()(nil)).To(HaveOccurred(), "ready without a certificate")
	addr, srv := startServer(t, w)

	first := selfSigned(t)
	wantFirst := parse(t, first.CertPEM).SerialNumber.String()
	// The watch is set up asynchronously: rewrite until an event is seen.
	g.Eventually(func(g Gomega) {
		g.Expect(first.Write(dir)).To(Succeed())
		g.Expect(w.Current()).NotTo(BeNil())
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	expectServes(g, addr, first, wantFirst)
	g.Expect(w.Checker()(nil)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(srv.StartedChecker()(nil)).To(Succeed())
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	second := selfSigned(t)
	wantSecond := parse(t, second.CertPEM).SerialNumber.String()
	g.Expect(wantSecond).NotTo(Equal(wantFirst))
	g.Expect(second.Write(dir)).To(Succeed())
	expectServes(g, addr, second, wantSecond)
	g.Expect(w.Loads()).To(Equal(2), "one load per certificate")
}

// A certificate directory that appears only after the server started (a Secret mounted late)
// is found by polling.
func TestWatcherFindsLateDirectory(t *testing.T) {
	g := NewWithT(t)
	dir := filepath.Join(t.TempDir(), "not-yet")
	w := certs.NewWatcher(dir).WithPollInterval(50 * time.Millisecond)
	addr, _ := startServer(t, w)

	b := selfSigned(t)
	g.Expect(b.Write(dir)).To(Succeed())
	expectServes(g, addr, b, parse(t, b.CertPEM).SerialNumber.String())
}

// A key that does not match the certificate (files caught between two writes) is not loaded;
// the previous pair keeps being served.
func TestWatcherKeepsLastGoodPair(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	first, second := selfSigned(t), selfSigned(t)
	g.Expect(first.Write(dir)).To(Succeed())
	w := certs.NewWatcher(dir)
	g.Expect(w.Current()).NotTo(BeNil())

	g.Expect(os.WriteFile(filepath.Join(dir, certs.CertFile), second.CertPEM, 0o600)).To(Succeed())
	g.Expect(w.Reload()).To(HaveOccurred())
	g.Expect(w.Current().SerialNumber.String()).To(Equal(parse(t, first.CertPEM).SerialNumber.String()))
	g.Expect(w.Checker()(nil)).To(Succeed())
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
