package operator

import (
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
