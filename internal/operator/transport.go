package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// The API server caps the concurrent requests of one HTTP/2 connection (its
// --http2-max-streams-per-connection, 100 by default), so one connection caps the
// manager's concurrency whatever its workers and QPS. The public controller's
// --api-connections and --separate-watch-connection lift that cap and keep watch events
// off connections busy with writes; these give sandgate the same two knobs.

// clientConfig is the manager's copy of cfg: opts' QPS and Burst, and no gzip. Like
// kube-controller-manager and kube-scheduler, the operator asks for no compression: the API
// server would compress every watch event for this client alone (an informer's stream stays
// compressed after its initial list), which costs it more CPU than the bytes cost a cluster's
// network. Measured in sustained-10 (10 claims/s on two cores): 2.4% of the API server's CPU
// went to gzip of watch events, and 4% of the operator's to reading them back.
func clientConfig(cfg *rest.Config, opts Options) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = opts.QPS, opts.Burst
	c.DisableCompression = true
	return c
}

// newDialer returns a dialer of its own. client-go shares one transport (and so one
// connection) between configs that are alike, but never between configs with a Dial
// function: setting one is how each shard gets a connection of its own.
func newDialer() func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext
}

// shardAPIConnections makes every request through cfg go round-robin over n connections
// of their own. n <= 1 leaves cfg alone.
func shardAPIConnections(cfg *rest.Config, n int) error {
	if n <= 1 {
		return nil
	}
	if cfg.Dial != nil || cfg.Transport != nil || cfg.WrapTransport != nil {
		return errors.New("more than one API connection needs a rest.Config without its own Dial, Transport or WrapTransport")
	}
	shards := make([]http.RoundTripper, n)
	for i := range shards {
		c := rest.CopyConfig(cfg)
		c.Dial = newDialer()
		rt, err := rest.TransportFor(c)
		if err != nil {
			return fmt.Errorf("building API connection %d of %d: %w", i+1, n, err)
		}
		shards[i] = rt
	}
	rr := &roundRobin{shards: shards}
	cfg.WrapTransport = func(http.RoundTripper) http.RoundTripper { return rr }
	return nil
}

// separateHTTPClient is an HTTP client for cfg on a connection of its own; call it before
// shardAPIConnections changes cfg.
func separateHTTPClient(cfg *rest.Config) (*http.Client, error) {
	c := rest.CopyConfig(cfg)
	c.Dial = newDialer()
	return rest.HTTPClientFor(c)
}

type roundRobin struct {
	shards []http.RoundTripper
	next   atomic.Uint64
}

func (r *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.shards[r.next.Add(1)%uint64(len(r.shards))].RoundTrip(req)
}
