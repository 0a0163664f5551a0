package load

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// A run of several bursts of several claims (the public project's rapid-burst recipe) is
// measured burst by burst: what each burst found in the pool, how its claims were served, and
// what the operator and the API server did meanwhile, so that a burst that falls off can be
// told apart from the others and explained. Every figure is read from what the pool, the
// operator and the API server report, never guessed from latency.

// perBurst reports whether cfg's run is measured burst by burst.
func perBurst(cfg Config) bool { return cfg.TotalBursts > 1 && cfg.BurstSize > 1 }

// burstProbe gathers the per-burst figures of one run.
type burstProbe struct {
	r     *runner
	start time.Time
	// snapshots are taken at each burst boundary: [0] before the first burst's first claim,
	// [b] right after burst b's last Ready. They are taken concurrently with the next burst,
	// so that measuring adds nothing between two bursts (a gap there is a pause for the
	// pool's refill, which the recipe does not give it).
	mu        sync.Mutex
	snapshots map[int]*burstSnapshot
	pending   sync.WaitGroup
	bursts    []report.Burst
	// timeline is sampled by sample until stop is closed.
	timeline []report.TimelinePoint
	current  int
	stop     chan struct{}
	done     chan struct{}
}

type burstSnapshot struct {
	api, operator scrape.Snapshot
}

func newBurstProbe(r *runner) *burstProbe {
	return &burstProbe{r: r, start: time.Now(), snapshots: map[int]*burstSnapshot{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// begin records the pool as burst b (from 0) finds it; call it before the burst's first claim.
func (p *burstProbe) begin(ctx context.Context, b int) {
	ready, members := p.pool(ctx)
	p.mu.Lock()
	p.bursts = append(p.bursts, report.Burst{Index: b + 1, PoolReadyAtStart: ready, PoolMembersAtStart: members, WarmNotReady: -1})
	p.current = b + 1
	p.mu.Unlock()
	if b == 0 {
		p.snapshot(ctx, 0, false)
	}
}

// end records burst b's end: its last Ready (lastReady, from firstCreate), and the snapshot
// that closes its window, taken in the background.
func (p *burstProbe) end(ctx context.Context, b int, firstCreate, lastReady time.Time) {
	p.mu.Lock()
	if !lastReady.IsZero() && !firstCreate.IsZero() {
		p.bursts[b].Seconds = round3(lastReady.Sub(firstCreate).Seconds())
	}
	p.current = 0
	p.mu.Unlock()
	p.snapshot(ctx, b+1, true)
}

// snapshot scrapes the operator and the API server as boundary i, in the background when
// async is set.
func (p *burstProbe) snapshot(ctx context.Context, i int, async bool) {
	take := func() {
		s := &burstSnapshot{}
		s.api, _ = scrape.FromAPIServer(ctx, p.r.rest) // a failed scrape leaves the window unmeasured
		if p.r.probes.OperatorMetrics != nil {
			s.operator, _ = p.r.probes.OperatorMetrics(ctx)
		}
		p.mu.Lock()
		p.snapshots[i] = s
		p.mu.Unlock()
	}
	if !async {
		take()
		return
	}
	p.pending.Add(1)
	go func() {
		defer p.pending.Done()
		take()
	}()
}

// pool reads the pool's ready members and members; zero when it cannot be read.
func (p *burstProbe) pool(ctx context.Context) (ready, members int32) {
	var pool extv1beta1.SandboxWarmPool
	if err := p.r.c.Get(ctx, client.ObjectKey{Namespace: p.r.cfg.Namespace, Name: poolName}, &pool); err != nil {
		return 0, 0
	}
	return pool.Status.ReadyReplicas, pool.Status.Replicas
}

// sample records the timeline every report.TimelineInterval until stopTimeline.
func (p *burstProbe) sample(ctx context.Context, w *ClaimWatcher) {
	defer close(p.done)
	tick := time.NewTicker(report.TimelineInterval)
	defer tick.Stop()
	for {
		pt := report.TimelinePoint{AtSeconds: round3(time.Since(p.start).Seconds()), ClaimsReady: w.ReadyCount()}
		pt.PoolReady, pt.PoolMembers = p.pool(ctx)
		if p.r.probes.OperatorMetrics != nil {
			if s, err := p.r.probes.OperatorMetrics(ctx); err == nil {
				pt.QueueDepth = s.GroupBy("workqueue_depth", nil, "name")
				pt.WarmHits = s.Sum("sandgate_claim_warm_hits_total", nil)
				pt.ColdStarts = s.Sum("sandgate_claim_cold_starts_total", nil)
			}
		}
		p.mu.Lock()
		pt.Burst = p.current
		p.timeline = append(p.timeline, pt)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-tick.C:
		}
	}
}

func (p *burstProbe) stopTimeline() {
	close(p.stop)
	<-p.done
}

// result returns the run's per-burst figures, latencies from samples (their Burst field).
func (p *burstProbe) result(samples []report.Sample) *report.Bursts {
	p.pending.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &report.Bursts{PauseSeconds: p.r.cfg.BurstPause.Seconds(), Bursts: p.bursts, Timeline: p.timeline}
	report.BurstLatencies(samples, out.Bursts)
	for i := range out.Bursts {
		before, after := p.snapshots[i], p.snapshots[i+1]
		if before == nil || after == nil {
			continue
		}
		out.Bursts[i].WarmNotReady, out.Bursts[i].During = burstWindow(before, after)
	}
	return out
}

// burstWindow is what the operator and the API server counted between two boundaries, and
// how many claims the operator served warm from a member not Ready yet (-1 when it does
// not say).
func burstWindow(before, after *burstSnapshot) (warmNotReady int, w *report.BurstWindow) {
	w = &report.BurstWindow{}
	warmNotReady = -1
	if before.api != nil && after.api != nil {
		d := scrape.Delta(before.api, after.api)
		w.SandboxCreates = d.Sum("apiserver_request_total", map[string]string{"verb": "POST", "resource": "sandboxes", "code": "201"})
		w.PodCreates = d.Sum("apiserver_request_total", map[string]string{"verb": "POST", "resource": "pods", "subresource": "", "code": "201"})
		api := apiRequests(d, 0)
		w.Mutating = api.Mutating
		w.Requests = api.ByVerbResourceCode[:min(len(api.ByVerbResourceCode), 10)]
	}
	if before.operator != nil && after.operator != nil {
		d := scrape.Delta(before.operator, after.operator)
		w.QueueWaitMs = means(d, "workqueue_queue_duration_seconds", "name")
		w.WorkMs = means(d, "workqueue_work_duration_seconds", "name")
		w.Reconciles = d.GroupBy("controller_runtime_reconcile_total", nil, "controller")
		w.Phases = operatorFigures(d, 0).Phases
		warmNotReady = servedStarting(before.operator, after.operator)
	}
	return warmNotReady, w
}

// servedStarting is how many claims the operator served warm from a member not Ready yet
// between two scrapes of it (agent_sandbox_claim_creation_total with pod_condition
// not_ready); -1 when either scrape is missing or the operator does not export it.
func servedStarting(before, after scrape.Snapshot) int {
	const created = "agent_sandbox_claim_creation_total"
	if before == nil || after == nil || !slices.ContainsFunc(slices.Collect(maps.Values(after)), func(s scrape.Series) bool { return s.Name == created }) {
		return -1
	}
	return int(scrape.Delta(before, after).Sum(created, map[string]string{"launch_type": "warm", "pod_condition": "not_ready"}))
}

// means is the mean of histogram name over a delta, in milliseconds, by label.
func means(d scrape.Snapshot, name, label string) map[string]float64 {
	counts := d.GroupBy(name+"_count", nil, label)
	out := map[string]float64{}
	for k, n := range counts {
		out[k] = round2(d.Sum(name+"_sum", map[string]string{label: k}) / n * 1000)
	}
	return out
}
