package load

import (
	"context"
	"sync"
	"time"

	"github.com/sandgate-dev/sandgate/cmd/internal/bench/scrape"
)

// cpuWindow measures kube-apiserver's CPU from just before the first claim's create call to
// the watch event of the last claim's Ready: the cost of the claims themselves, whatever the
// operator does after them (refill). With Probes.APIServerCPU the end is read in the watch's
// own goroutine at each Ready event, so the window closes at the last one and not at the
// next poll; without it, process_cpu_seconds_total is scraped once the run saw every claim
// Ready (a cluster the load generator did not start).
type cpuWindow struct {
	r     *runner
	w     *ClaimWatcher
	start float64
	ok    bool

	mu     sync.Mutex
	last   float64
	lastOK bool
}

func (r *runner) startCPUWindow(ctx context.Context, w *ClaimWatcher) *cpuWindow {
	cw := &cpuWindow{r: r, w: w}
	if read := r.probes.APIServerCPU; read != nil {
		if v, err := read(); err == nil {
			cw.start, cw.ok = v, true
		}
		w.OnReady(func(time.Time) {
			if v, err := read(); err == nil {
				cw.mu.Lock()
				cw.last, cw.lastOK = v, true
				cw.mu.Unlock()
			}
		})
		return cw
	}
	if snap, err := scrape.FromAPIServer(ctx, r.rest); err == nil {
		cw.start, cw.ok = snap.Sum("process_cpu_seconds_total", nil), true
	}
	return cw
}

// end closes the window and returns its CPU seconds, -1 when they could not be read.
func (cw *cpuWindow) end(ctx context.Context) float64 {
	if read := cw.r.probes.APIServerCPU; read != nil {
		cw.w.OnReady(nil)
		cw.mu.Lock()
		last, ok := cw.last, cw.lastOK
		cw.mu.Unlock()
		if !ok {
			v, err := read()
			last, ok = v, err == nil
		}
		if !cw.ok || !ok {
			return -1
		}
		return round2(last - cw.start)
	}
	snap, err := scrape.FromAPIServer(ctx, cw.r.rest)
	if err != nil || !cw.ok {
		return -1
	}
	return round2(snap.Sum("process_cpu_seconds_total", nil) - cw.start)
}
