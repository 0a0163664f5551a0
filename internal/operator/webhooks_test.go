package operator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/sandgate-dev/sandgate/certs"
)

// SelfSignedCerts writes a certificate the webhook server then serves, verifiable with the
// ca.crt written next to it for the names a local webhook configuration uses.
func TestSelfSignedWebhookServing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	opts := Options{WebhookHost: "127.0.0.1", WebhookPort: port, WebhookCertDir: filepath.Join(t.TempDir(), "certs"), SelfSignedCerts: true}
	srv, watcher, err := webhookServer(opts, logr.Discard())
	if err != nil {
		t.Fatalf("webhookServer: %v", err)
	}
	if err := watcher.Checker()(nil); err != nil {
		t.Errorf("certificate not loaded after writing it: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	}()

	caPEM, err := os.ReadFile(filepath.Join(opts.WebhookCertDir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
		if lastErr = err; err == nil {
			_ = conn.Close()
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("TLS handshake with the self-signed certificate: %v", lastErr)
	}
	if err := srv.StartedChecker()(nil); err != nil {
		t.Errorf("webhook server readiness: %v", err)
	}
}
