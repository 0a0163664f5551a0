package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Backend is one server behind a LoadBalancer.
type Backend struct {
	// Name identifies the backend in Stats and log lines; default Addr.
	Name string
	// Addr is the backend's TCP address, 127.0.0.1:<port>.
	Addr string
	// HealthURL is an http:// URL whose GET answers 2xx while the backend is healthy (an
	// operator replica's /readyz); "" checks that Addr accepts a TCP connection, which a
	// frozen process still does.
	HealthURL string
}

// LoadBalancerOptions tune the health checks. Zero values take the defaults.
type LoadBalancerOptions struct {
	// HealthInterval is the time between the starts of two checks of a backend; default
	// 250 ms. A check that takes longer delays the next.
	HealthInterval time.Duration
	// HealthTimeout bounds one check; default 500 ms.
	HealthTimeout time.Duration
	// FailThreshold is how many failed checks in a row take a healthy backend down;
	// default 3.
	FailThreshold int
	// RiseThreshold is how many passed checks in a row bring a down backend up; default 1.
	RiseThreshold int
	// DialTimeout bounds connecting to a backend; default 1 s. A backend that cannot be
	// dialled is skipped for the next healthy one.
	DialTimeout time.Duration
	// Log receives a line whenever a backend goes down or up, or unreachable mode changes;
	// nil means none.
	Log io.Writer
}

func (o *LoadBalancerOptions) defaults() {
	if o.HealthInterval <= 0 {
		o.HealthInterval = 250 * time.Millisecond
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 500 * time.Millisecond
	}
	if o.FailThreshold <= 0 {
		o.FailThreshold = 3
	}
	if o.RiseThreshold <= 0 {
		o.RiseThreshold = 1
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
}

// LoadBalancer is a TCP load balancer on loopback. New connections go round robin to the
// healthy backends; a backend is down from the start until its first passed check (so a
// replica gets connections only once it is ready). When a backend goes down its open
// connections are cut: a frozen process would keep them open, and the API server would
// wait on them until its webhook timeout. The bytes pass through untouched, TLS included.
type LoadBalancer struct {
	ln     *net.TCPListener
	opts   LoadBalancerOptions
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	backends    []*backendState
	next        int // round-robin position
	unreachable bool
	closed      bool
	// counters of LoadBalancerStats
	refused, refusedUnreachable, noBackend, dropped int64
}

// backendState is a backend with its health and connections; guarded by LoadBalancer.mu.
type backendState struct {
	Backend
	healthy        bool
	since          time.Time
	passes, fails  int // consecutive
	lastErr        error
	downs          int64
	links          links
	connections    int64
	dialFailures   int64
	cutOnUnhealthy int64
}

// BackendStats describe one backend of a LoadBalancer.
type BackendStats struct {
	Name, Addr string
	// Healthy is its current state, Since when it began; Downs counts the times it went
	// down, LastCheckError is the error of the last failed check.
	Healthy        bool
	Since          time.Time
	Downs          int64
	LastCheckError string
	// Connections counts the connections forwarded to it, Open the ones open now.
	Connections int64
	Open        int
	// DialFailures counts connections it was picked for but refused or timed out.
	DialFailures int64
	// Cut counts its connections closed because it went down.
	Cut int64
}

// LoadBalancerStats are a LoadBalancer's counters.
type LoadBalancerStats struct {
	Backends []BackendStats
	// Refused counts the connections closed at once: in unreachable mode (Unreachable of
	// them), with no healthy backend or when no healthy backend could be dialled (NoBackend).
	Refused, Unreachable, NoBackend int64
	// Dropped counts the open connections closed by SetUnreachable.
	Dropped int64
}

// NewLoadBalancer listens on listen (a loopback address; "" means 127.0.0.1:0) and starts
// checking the backends. Close it when done.
func NewLoadBalancer(listen string, backends []Backend, opts LoadBalancerOptions) (*LoadBalancer, error) {
	if len(backends) == 0 {
		return nil, errors.New("new load balancer: no backends")
	}
	opts.defaults()
	lb := &LoadBalancer{opts: opts}
	for _, b := range backends {
		if b.Addr == "" {
			return nil, fmt.Errorf("new load balancer: backend %q has no address", b.Name)
		}
		if b.Name == "" {
			b.Name = b.Addr
		}
		lb.backends = append(lb.backends, &backendState{Backend: b, since: time.Now(), links: links{}})
	}
	ln, err := listenLoopback(listen)
	if err != nil {
		return nil, fmt.Errorf("new load balancer: %w", err)
	}
	lb.ln = ln
	// A fresh connection per check: a frozen process must fail the check even if it
	// answered the one before on a kept-alive connection. No proxy from the environment.
	lb.client = &http.Client{
		Timeout:   opts.HealthTimeout,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
	ctx, cancel := context.WithCancel(context.Background())
	lb.cancel = cancel
	for _, b := range lb.backends {
		lb.wg.Add(1)
		go lb.checkLoop(ctx, b)
	}
	lb.wg.Add(1)
	go lb.acceptLoop()
	return lb, nil
}

// Addr is the address the load balancer listens on.
func (lb *LoadBalancer) Addr() string { return lb.ln.Addr().String() }

// SetUnreachable turns unreachable mode on or off. While on, every open connection is
// reset and new ones are reset as soon as they are accepted, as if the webhook's address
// dropped off the network; health checks go on, so when it is turned off the healthy
// backends take new connections at once.
func (lb *LoadBalancer) SetUnreachable(on bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.unreachable == on {
		return
	}
	lb.unreachable = on
	if !on {
		lb.logf("reachable again")
		return
	}
	dropped := 0
	for _, b := range lb.backends {
		dropped += b.links.closeAll()
	}
	lb.dropped += int64(dropped)
	lb.logf("unreachable: dropped %d open connections", dropped)
}

// Stats returns the load balancer's counters.
func (lb *LoadBalancer) Stats() LoadBalancerStats {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	st := LoadBalancerStats{
		Refused:     lb.refused,
		Unreachable: lb.refusedUnreachable,
		NoBackend:   lb.noBackend,
		Dropped:     lb.dropped,
	}
	for _, b := range lb.backends {
		bs := BackendStats{
			Name: b.Name, Addr: b.Addr,
			Healthy: b.healthy, Since: b.since, Downs: b.downs,
			Connections: b.connections, Open: len(b.links),
			DialFailures: b.dialFailures, Cut: b.cutOnUnhealthy,
		}
		if b.lastErr != nil {
			bs.LastCheckError = b.lastErr.Error()
		}
		st.Backends = append(st.Backends, bs)
	}
	return st
}

// Close stops listening and checking, closes every connection and waits for all of the
// load balancer's goroutines.
func (lb *LoadBalancer) Close() {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		lb.wg.Wait()
		return
	}
	lb.closed = true
	_ = lb.ln.Close()
	lb.cancel()
	for _, b := range lb.backends {
		b.links.closeAll()
	}
	lb.mu.Unlock()
	lb.wg.Wait()
	lb.client.CloseIdleConnections()
}

// logf writes a line to the log, if any.
func (lb *LoadBalancer) logf(format string, args ...any) {
	if lb.opts.Log != nil {
		fmt.Fprintf(lb.opts.Log, "netfault: load balancer %s: "+format+"\n", append([]any{lb.ln.Addr()}, args...)...)
	}
}

// acceptLoop hands every accepted connection to a goroutine of its own: dialling a frozen
// backend may take the whole dial timeout.
func (lb *LoadBalancer) acceptLoop() {
	defer lb.wg.Done()
	for {
		conn, err := lb.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		lb.mu.Lock()
		if lb.closed {
			lb.mu.Unlock()
			_ = conn.Close()
			return
		}
		lb.wg.Add(1)
		lb.mu.Unlock()
		go func() {
			defer lb.wg.Done()
			lb.handle(conn)
		}()
	}
}

// handle forwards one client connection to a healthy backend, or resets it.
func (lb *LoadBalancer) handle(client *net.TCPConn) {
	tried := map[*backendState]bool{}
	for {
		b, refuse := lb.pick(tried)
		if b == nil {
			lb.mu.Lock()
			switch refuse {
			case refuseUnreachable:
				lb.refused++
				lb.refusedUnreachable++
			case refuseNoBackend:
				lb.refused++
				lb.noBackend++
			}
			lb.mu.Unlock()
			_ = client.SetLinger(0)
			_ = client.Close()
			return
		}
		tried[b] = true
		conn, err := net.DialTimeout("tcp", b.Addr, lb.opts.DialTimeout)
		if err != nil {
			lb.mu.Lock()
			b.dialFailures++
			lb.mu.Unlock()
			continue
		}
		l := newLink(client, conn.(*net.TCPConn))
		// Registered under the lock, with the state checked again: a backend that went down,
		// or unreachable mode that began, while dialling must cut this link too.
		lb.mu.Lock()
		if lb.closed || lb.unreachable || !b.healthy {
			lb.mu.Unlock()
			_ = conn.Close()
			continue // pick again, which refuses or finds another backend
		}
		b.links[l] = struct{}{}
		b.connections++
		lb.mu.Unlock()
		l.serve(&lb.wg, nil, nil)
		lb.mu.Lock()
		delete(b.links, l)
		lb.mu.Unlock()
		return
	}
}

// refusal says why pick found no backend.
type refusal int

const (
	refuseNone refusal = iota
	refuseUnreachable
	refuseNoBackend
	refuseClosed
)

// pick returns the next healthy backend round robin, skipping those in tried, or why
// there is none.
func (lb *LoadBalancer) pick(tried map[*backendState]bool) (*backendState, refusal) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	switch {
	case lb.closed:
		return nil, refuseClosed
	case lb.unreachable:
		return nil, refuseUnreachable
	}
	for range lb.backends {
		b := lb.backends[lb.next%len(lb.backends)]
		lb.next++
		if b.healthy && !tried[b] {
			return b, refuseNone
		}
	}
	return nil, refuseNoBackend
}

// checkLoop checks backend b every HealthInterval until ctx ends.
func (lb *LoadBalancer) checkLoop(ctx context.Context, b *backendState) {
	defer lb.wg.Done()
	ticker := time.NewTicker(lb.opts.HealthInterval)
	defer ticker.Stop()
	for {
		err := lb.check(ctx, b.Backend)
		if ctx.Err() != nil {
			return
		}
		lb.observe(b, err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// check runs one health check of b.
func (lb *LoadBalancer) check(ctx context.Context, b Backend) error {
	ctx, cancel := context.WithTimeout(ctx, lb.opts.HealthTimeout)
	defer cancel()
	if b.HealthURL == "" {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", b.Addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.HealthURL, nil)
	if err != nil {
		return err
	}
	resp, err := lb.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", b.HealthURL, resp.Status)
	}
	return nil
}

// observe records a check's result and moves b up or down when a threshold is reached.
func (lb *LoadBalancer) observe(b *backendState, err error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if err == nil {
		b.fails = 0
		b.passes++
		if !b.healthy && b.passes >= lb.opts.RiseThreshold {
			b.healthy, b.since = true, time.Now()
			lb.logf("backend %s up", b.Name)
		}
		return
	}
	b.lastErr = err
	b.passes = 0
	b.fails++
	if b.healthy && b.fails >= lb.opts.FailThreshold {
		b.healthy, b.since = false, time.Now()
		b.downs++
		cut := b.links.closeAll()
		b.cutOnUnhealthy += int64(cut)
		lb.logf("backend %s down after %d failed checks (%v): cut %d open connections", b.Name, b.fails, err, cut)
	}
}
