package netfault_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// health modes of a test backend.
const (
	healthOK     int32 = iota
	healthFail         // 503
	healthFrozen       // never answers, as a SIGSTOPped process
)

// testBackend is a TCP server that greets every connection with its name and a newline and
// then echoes, with an HTTP health endpoint whose answer the test sets.
type testBackend struct {
	name     string
	ln       net.Listener
	health   *httptest.Server
	mode     atomic.Int32
	accepted atomic.Int64
	release  chan struct{} // closed at cleanup: frozen health handlers return

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// startBackend starts a backend, healthy, and stops it at the end of the test.
func startBackend(t *testing.T, name string) *testBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &testBackend{name: name, ln: ln, release: make(chan struct{})}
	b.health = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch b.mode.Load() {
		case healthFail:
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		case healthFrozen:
			select {
			case <-b.release:
			case <-r.Context().Done():
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(b.stop)
	return b
}

func (b *testBackend) serve() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		b.mu.Lock()
		b.conns = append(b.conns, conn)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer conn.Close()
			if _, err := io.WriteString(conn, b.name+"\n"); err != nil {
				return
			}
			_, _ = io.Copy(conn, conn)
		}()
	}
}

func (b *testBackend) stop() {
	close(b.release)
	b.health.Close()
	_ = b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *testBackend) addr() string      { return b.ln.Addr().String() }
func (b *testBackend) healthURL() string { return b.health.URL + "/readyz" }

// clientConn is a test client's connection through a load balancer.
type clientConn struct {
	net.Conn
	r *bufio.Reader
}

// dial connects to addr.
func dial(t *testing.T, addr string) *clientConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &clientConn{Conn: conn, r: bufio.NewReader(conn)}
}

// reach connects to addr and reads the greeting: the name of the backend reached, or the
// error that ended the connection (a reset may already fail the dial).
func reach(t *testing.T, addr string) (string, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &clientConn{Conn: conn, r: bufio.NewReader(conn)}
	return c.greeting()
}

// greeting reads the backend's name line, or returns the error that ended the connection.
func (c *clientConn) greeting() (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// echo sends msg and reads it back.
func (c *clientConn) echo(msg string) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c.r, buf)
	return err
}

// closedWithin reports whether the connection ends (EOF or reset) within d; data that
// arrives meanwhile is skipped.
func (c *clientConn) closedWithin(d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// packageGoroutines returns the stacks of the goroutines running code of package netfault
// (not of its tests).
func packageGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var ours []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "/test/soak/netfault.") {
			ours = append(ours, g)
		}
	}
	return ours
}
