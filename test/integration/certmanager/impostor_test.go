//go:build integration

package certmanager_test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/certs"
)

// impostor is a TLS server for the webhook Service's names with a certificate from a CA the
// install does not know.
type impostor struct {
	addr     string
	hellos   atomic.Int32 // TLS handshakes begun
	requests atomic.Int32 // HTTP requests received: a handshake that completed
}

func startImpostor(t *testing.T, b *certs.Bundle) *impostor {
	t.Helper()
	pair, err := tls.X509KeyPair(b.CertPEM, b.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	imp := &impostor{addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			imp.requests.Add(1)
			http.Error(w, "impostor", http.StatusInternalServerError)
		}),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			imp.hellos.Add(1)
			return &pair, nil
		}},
		ErrorLog:          log.New(io.Discard, "", 0), // the refused handshakes
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return imp
}
