package netfault

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxyDialTimeout bounds connecting to a LatencyProxy's target.
const proxyDialTimeout = 5 * time.Second

// LatencyProxy forwards every connection it accepts on loopback to one target, such as
// kube-apiserver's secure address (TLS passes through: point a kubeconfig's server at Addr
// and keep its CA, the API server's certificate names 127.0.0.1), holding the data back by
// settable delays. The delay of a chunk is the one set when it is read; chunks keep their
// order. An HTTP request of a client is one chunk or a few read together, so each request
// is slowed by about the delay.
type LatencyProxy struct {
	ln     *net.TCPListener
	target string
	// requestDelay and responseDelay are time.Durations.
	requestDelay, responseDelay atomic.Int64
	wg                          sync.WaitGroup

	mu                             sync.Mutex
	links                          links
	closed                         bool
	connections, dropped, failures int64
}

// LatencyProxyStats are a LatencyProxy's counters.
type LatencyProxyStats struct {
	// Connections counts the connections forwarded, Open the ones open now, Dropped those
	// closed by DropConnections, DialFailures those closed because the target refused them
	// (while the API server restarts, say).
	Connections  int64
	Open         int
	Dropped      int64
	DialFailures int64
}

// NewLatencyProxy listens on listen (a loopback address; "" means 127.0.0.1:0) and forwards
// to target, without delay until SetDelay. Close it when done.
func NewLatencyProxy(listen, target string) (*LatencyProxy, error) {
	if target == "" {
		return nil, errors.New("new latency proxy: no target")
	}
	ln, err := listenLoopback(listen)
	if err != nil {
		return nil, fmt.Errorf("new latency proxy: %w", err)
	}
	p := &LatencyProxy{ln: ln, target: target, links: links{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *LatencyProxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the delay of the data from the clients to the target (the requests), for
// the chunks read from now on; 0 ends it.
func (p *LatencyProxy) SetDelay(d time.Duration) { p.requestDelay.Store(int64(max(d, 0))) }

// SetResponseDelay sets the delay of the data from the target to the clients (responses,
// watch events); 0 ends it.
func (p *LatencyProxy) SetResponseDelay(d time.Duration) { p.responseDelay.Store(int64(max(d, 0))) }

// DropConnections resets every open connection (the clients see "connection reset by
// peer" and dial again) and returns how many there were.
func (p *LatencyProxy) DropConnections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.links.closeAll()
	p.dropped += int64(n)
	return n
}

// Stats returns the proxy's counters.
func (p *LatencyProxy) Stats() LatencyProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return LatencyProxyStats{Connections: p.connections, Open: len(p.links), Dropped: p.dropped, DialFailures: p.failures}
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *LatencyProxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		p.links.closeAll()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *LatencyProxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(conn)
		}()
	}
}

// handle forwards one client connection to the target.
func (p *LatencyProxy) handle(client *net.TCPConn) {
	conn, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		p.mu.Lock()
		p.failures++
		p.mu.Unlock()
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	l := newLink(client, conn.(*net.TCPConn))
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close(true)
		return
	}
	p.links[l] = struct{}{}
	p.connections++
	p.mu.Unlock()
	l.serve(&p.wg, loadDelay(&p.requestDelay), loadDelay(&p.responseDelay))
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// loadDelay returns a function reading the delay d.
func loadDelay(d *atomic.Int64) func() time.Duration {
	return func() time.Duration { return time.Duration(d.Load()) }
}
