//go:build integration

package certmanager_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// egressProxy is where kube-apiserver sends its traffic to the cluster network: the API
// server runs with an egress selector whose "cluster" egress is HTTP CONNECT over this Unix
// socket, so every call it makes to a Service (a webhook's clientConfig.service) asks the
// proxy for a tunnel to <ClusterIP>:<port>. The local control plane has no cluster network:
// the proxy maps exactly the targets routed to a loopback address and refuses every other, so
// nothing the API server is told to call is ever dialled but the test's own servers.
type egressProxy struct {
	socket string
	ln     net.Listener

	mu      sync.Mutex
	routes  map[string]string // CONNECT target → 127.0.0.1:port
	seen    []string          // every CONNECT target asked for, in order
	refused []string
	tunnels map[net.Conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

// startEgressProxy listens on dir/egress.sock until the test ends.
func startEgressProxy(t *testing.T, dir string) *egressProxy {
	t.Helper()
	socket := filepath.Join(dir, "egress.sock")
	if len(socket) >= 108 {
		t.Fatalf("socket path %s is too long for a Unix socket: set a shorter TMPDIR", socket)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("listening on %s: %v", socket, err)
	}
	p := &egressProxy{socket: socket, ln: ln, routes: map[string]string{}, tunnels: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// route sends tunnels to target (host:port, as the API server asks) to upstream, a loopback
// address; it replaces an earlier route of target.
func (p *egressProxy) route(t *testing.T, target, upstream string) {
	t.Helper()
	host, _, err := net.SplitHostPort(upstream)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Fatalf("route %s → %s: the upstream must be a loopback address", target, upstream)
	}
	p.mu.Lock()
	p.routes[target] = upstream
	p.mu.Unlock()
}

// closeTunnels ends every open tunnel: the API server keeps webhook connections alive, and
// only a new connection shows it a new certificate or a new upstream.
func (p *egressProxy) closeTunnels() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.tunnels {
		_ = c.Close()
	}
}

// targets returns the CONNECT targets asked for so far, and those refused.
func (p *egressProxy) targets() (seen, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...), append([]string(nil), p.refused...)
}

func (p *egressProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.closeTunnels()
	p.wg.Wait()
	_ = os.Remove(p.socket)
}

func (p *egressProxy) serve() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.tunnel(conn) })
	}
}

// tunnel answers one CONNECT request on conn and, for a routed target, copies bytes both
// ways until either side closes.
func (p *egressProxy) tunnel(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
		return
	}
	target := req.Host
	p.mu.Lock()
	p.seen = append(p.seen, target)
	upstream, ok := p.routes[target]
	if !ok {
		p.refused = append(p.refused, target)
	}
	p.mu.Unlock()
	if !ok {
		_, _ = io.WriteString(conn, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
		return
	}
	defer up.Close()
	if !p.track(conn, up) {
		return
	}
	defer p.untrack(conn, up)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// Either side closing ends the tunnel: TLS has its own close notification.
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
	_ = conn.Close()
	_ = up.Close()
	<-done
}

// track records an open tunnel; false once the proxy is closing.
func (p *egressProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *egressProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
	}
}
