// Package netfault puts TCP middlemen between the fault soak's processes, to inject network
// faults the processes cannot tell from real ones:
//
//   - LoadBalancer spreads the API server's webhook connections over the operator replicas
//     (TLS passes through untouched), takes a replica out while its health check fails — a
//     crashed or frozen replica is no single point of failure — and on SetUnreachable drops
//     every connection, the "webhook unreachable" fault.
//   - LatencyProxy forwards the replicas' API connections to kube-apiserver and holds every
//     chunk back by a settable delay, the "slow API" fault; DropConnections cuts them all.
//
// Everything listens on loopback only.
package netfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// chunkSize is the largest piece a direction reads (and, with a delay, holds back) at once.
const chunkSize = 32 << 10

// maxHeldChunks bounds the chunks a delayed direction holds: when full, reading stops and
// TCP flow control slows the sender.
const maxHeldChunks = 64

// listenLoopback listens on addr ("" means 127.0.0.1:0), which must be a loopback address.
func listenLoopback(addr string) (*net.TCPListener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if tcpAddr.IP == nil || !tcpAddr.IP.IsLoopback() {
		return nil, fmt.Errorf("listen on %s: not a loopback address", addr)
	}
	ln, err := net.ListenTCP("tcp", tcpAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// link is one forwarded connection: a client's and the one to its upstream.
type link struct {
	client, upstream *net.TCPConn
	done             chan struct{} // closed by close
	once             sync.Once
}

func newLink(client, upstream *net.TCPConn) *link {
	return &link{client: client, upstream: upstream, done: make(chan struct{})}
}

// close closes both connections. With reset the client gets a RST instead of a FIN: it sees
// "connection reset by peer" at once, as when a middlebox or a dead host drops it.
func (l *link) close(reset bool) {
	l.once.Do(func() {
		if reset {
			_ = l.client.SetLinger(0)
		}
		close(l.done)
		_ = l.client.Close()
		_ = l.upstream.Close()
	})
}

// serve forwards both ways until both directions have ended or the link is closed, then
// closes it. up and down give the delay of each chunk read from the client and from the
// upstream (nil: none). Every goroutine it starts is counted in wg.
func (l *link) serve(wg *sync.WaitGroup, up, down func() time.Duration) {
	var dirs sync.WaitGroup
	dirs.Add(2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer dirs.Done()
		l.forward(wg, l.upstream, l.client, up)
	}()
	go func() {
		defer wg.Done()
		defer dirs.Done()
		l.forward(wg, l.client, l.upstream, down)
	}()
	dirs.Wait()
	l.close(false)
}

// forward copies src to dst until src ends, then half-closes dst so that the other side sees
// the end too (TLS close_notify and HTTP bodies delimited by the close need it). An error on
// either side ends the whole link.
func (l *link) forward(wg *sync.WaitGroup, dst, src *net.TCPConn, delay func() time.Duration) {
	var err error
	if delay == nil {
		_, err = io.Copy(dst, src)
	} else {
		err = l.forwardDelayed(wg, dst, src, delay)
	}
	if err != nil {
		l.close(true)
		return
	}
	_ = dst.CloseWrite()
}

// chunk is data read at one time, due to be written at another.
type chunk struct {
	data []byte
	due  time.Time
}

// forwardDelayed is forward with each chunk written delay() after it was read, the delay
// taken when it is read. Chunks keep their order: one read after a delay was lowered waits
// for those before it.
func (l *link) forwardDelayed(wg *sync.WaitGroup, dst, src *net.TCPConn, delay func() time.Duration) error {
	chunks := make(chan chunk, maxHeldChunks)
	readErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(chunks)
		for {
			buf := make([]byte, chunkSize)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{data: buf[:n], due: time.Now().Add(delay())}:
				case <-l.done:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr <- err
				}
				return
			}
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return net.ErrClosed
			}
		}
		if _, err := dst.Write(c.data); err != nil {
			return err
		}
	}
	select {
	case err := <-readErr:
		return err
	default:
		return nil
	}
}

// links is a set of open links.
type links map[*link]struct{}

// closeAll closes every link of the set with a reset, empties it and returns how many there
// were.
func (s links) closeAll() int {
	n := len(s)
	for l := range s {
		l.close(true)
		delete(s, l)
	}
	return n
}
