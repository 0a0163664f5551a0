package operator

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// connCounter is an API server stand-in that counts the connections requests arrive on.
func connCounter(t *testing.T) (*httptest.Server, func() int) {
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

func get(t *testing.T, c *http.Client, url string, n int) {
	t.Helper()
	for range n {
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

func TestAPIConnectionsSpreadRequests(t *testing.T) {
	for name, tc := range map[string]struct{ connections, wantConns int }{
		"one is client-go's single connection": {1, 1},
		"three connections":                    {3, 3},
	} {
		t.Run(name, func(t *testing.T) {
			srv, conns := connCounter(t)
			cfg := &rest.Config{Host: srv.URL}
			if err := shardAPIConnections(cfg, tc.connections); err != nil {
				t.Fatal(err)
			}
			c, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			get(t, c, srv.URL, 9)
			if got := conns(); got != tc.wantConns {
				t.Errorf("requests arrived on %d connections, want %d", got, tc.wantConns)
			}
		})
	}
}

func TestSeparateWatchConnection(t *testing.T) {
	srv, conns := connCounter(t)
	cfg := &rest.Config{Host: srv.URL}
	watch, err := separateHTTPClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	main, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get(t, main, srv.URL, 2)
	get(t, watch, srv.URL, 2)
	if got := conns(); got != 2 {
		t.Errorf("requests arrived on %d connections, want 2 (the shared one and the watch one)", got)
	}
}

// TestClientConfigAsksForNoCompression checks that the operator's requests, on one connection
// or several, do not ask the API server to gzip its answers (and its watch events), while
// client-go's default would.
func TestClientConfigAsksForNoCompression(t *testing.T) {
	var mu sync.Mutex
	var accepted []string
	// TLS, as an API server serves: client-go gives a plain-HTTP config Go's default
	// transport, which ignores the setting.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepted = append(accepted, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	asked := func(cfg *rest.Config) []string {
		t.Helper()
		mu.Lock()
		accepted = nil
		mu.Unlock()
		c, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		get(t, c, srv.URL, 2)
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), accepted...)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	if got := asked(base); got[0] != "gzip" {
		t.Fatalf("client-go's default asked for %q, want gzip: the test would prove nothing", got[0])
	}
	for name, connections := range map[string]int{"one connection": 1, "three connections": 3} {
		t.Run(name, func(t *testing.T) {
			cfg := clientConfig(base, Options{QPS: 5, Burst: 10})
			if err := shardAPIConnections(cfg, connections); err != nil {
				t.Fatal(err)
			}
			for i, enc := range asked(cfg) {
				if enc != "" {
					t.Errorf("request %d sent Accept-Encoding %q, want none", i, enc)
				}
			}
			if cfg.QPS != 5 || cfg.Burst != 10 {
				t.Errorf("QPS/Burst = %v/%d, want 5/10 from the options", cfg.QPS, cfg.Burst)
			}
		})
	}
	if base.DisableCompression {
		t.Error("clientConfig changed the config it was given")
	}
}
