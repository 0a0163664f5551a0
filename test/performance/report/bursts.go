package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// BurstP99RatioTarget bounds every burst's p99 ÷ the first burst's in a run of back-to-back
// bursts (issue 35): a pool that cannot keep up must not turn a later burst into a cliff.
const BurstP99RatioTarget = 2

// Bursts is what a run of several bursts measured burst by burst: the public project's
// rapid-burst recipe (dev/load-test/test-recipes/rapid-burst-test.yaml of agent-sandbox),
// where each burst's claims are kept and waited on until Ready before the next is sent.
type Bursts struct {
	// PauseSeconds is how long the run waited after each burst's last Ready before the next
	// burst (the public recipe pauses 20 s; 0 sends them back to back).
	PauseSeconds float64 `json:"pauseSeconds"`
	Bursts       []Burst `json:"bursts"`
	// Timeline is the pool and the operator sampled through the run (TimelineInterval apart).
	Timeline []TimelinePoint `json:"timeline,omitempty"`
}

// Burst is one burst of a run: its claims' client latencies, how they were served, and the
// pool and the operator as the burst found and left them.
type Burst struct {
	// Index counts from 1.
	Index int `json:"index"`
	// Latency is the client view (create call → watch Ready) of the burst's Ready claims.
	Latency stats.Summary `json:"latency"`
	// NeverReady counts the burst's claims not Ready within the run's timeout.
	NeverReady int `json:"neverReady,omitempty"`
	// Warm counts the Ready claims whose Sandbox says agents.x-k8s.io/launch-type=warm; the
	// others were not served from the pool.
	Warm int `json:"warm"`
	// WarmNotReady counts, of the claims the operator served warm during the burst, those
	// bound to a member that was not Ready yet (agent_sandbox_claim_creation_total with
	// pod_condition not_ready): a member already starting, taken instead of a cold start.
	// -1 when the operator does not export it.
	WarmNotReady int `json:"warmNotReady"`
	// Seconds is from the burst's first create call to its last claim's Ready.
	Seconds float64 `json:"seconds"`
	// PoolReadyAtStart and PoolMembersAtStart are the pool's status.readyReplicas and
	// status.replicas when the burst's first claim was sent.
	PoolReadyAtStart   int32 `json:"poolReadyAtStart"`
	PoolMembersAtStart int32 `json:"poolMembersAtStart"`
	// During is what the operator and the API server counted from the burst's first create to
	// its last Ready; nil when not measured.
	During *BurstWindow `json:"during,omitempty"`
}

// BurstWindow is what the operator and the API server counted over one burst.
type BurstWindow struct {
	// SandboxCreates counts POST sandboxes the API server answered 201 (every client):
	// the pool's members and the claims' cold starts together; PodCreates POST pods 201.
	SandboxCreates float64 `json:"sandboxCreates"`
	PodCreates     float64 `json:"podCreates"`
	// Mutating are the API server's mutating requests over the burst (every client), and
	// Requests the most frequent of them by "verb resource code".
	Mutating float64        `json:"mutating"`
	Requests []scrape.Count `json:"requests,omitempty"`
	// QueueWaitMs is the mean time an item waited in each controller's queue
	// (workqueue_queue_duration_seconds), by controller.
	QueueWaitMs map[string]float64 `json:"queueWaitMs,omitempty"`
	// WorkMs is the mean time of one reconcile (workqueue_work_duration_seconds), by
	// controller: with the queue wait, whether a controller's workers or its queue's order
	// held its items up.
	WorkMs map[string]float64 `json:"workMs,omitempty"`
	// Reconciles counts each controller's reconciles (controller_runtime_reconcile_total).
	Reconciles map[string]float64 `json:"reconciles,omitempty"`
	// Phases are sandgate_claim_phase_seconds over the burst.
	Phases []Phase `json:"phases,omitempty"`
}

// TimelinePoint is the pool and the operator at one moment of a burst run.
type TimelinePoint struct {
	AtSeconds float64 `json:"at"`
	// Burst is the burst under way (its claims sent, not all Ready); 0 between bursts.
	Burst       int   `json:"burst"`
	PoolReady   int32 `json:"poolReady"`
	PoolMembers int32 `json:"poolMembers"`
	// ClaimsReady counts the run's claims Ready so far.
	ClaimsReady int `json:"claimsReady"`
	// QueueDepth is each controller's queue depth (workqueue_depth), by controller.
	QueueDepth map[string]float64 `json:"queueDepth,omitempty"`
	// WarmHits and ColdStarts are the operator's counters so far
	// (sandgate_claim_warm_hits_total, sandgate_claim_cold_starts_total).
	WarmHits   float64 `json:"warmHits"`
	ColdStarts float64 `json:"coldStarts"`
}

// TimelineInterval is how often a burst run samples its timeline.
const TimelineInterval = 500 * time.Millisecond

// BurstLatencies fills in each burst's latency and launch counts from samples (their Burst
// field), for bursts counted 1..n.
func BurstLatencies(samples []Sample, bursts []Burst) {
	byBurst := map[int][]Sample{}
	for _, s := range samples {
		byBurst[s.Burst] = append(byBurst[s.Burst], s)
	}
	for i := range bursts {
		b := &bursts[i]
		in := byBurst[b.Index]
		b.Latency = summarize(latencies(in))
		b.Warm = 0
		for _, s := range in {
			if s.Warm {
				b.Warm++
			}
		}
	}
}

// WarmShare is the share of the burst's Ready claims served warm.
func (b Burst) WarmShare() float64 {
	if b.Latency.Count == 0 {
		return 0
	}
	return float64(b.Warm) / float64(b.Latency.Count)
}

// WorstP99Ratio is the largest p99 of a later burst ÷ the first burst's; 0 with fewer than
// two bursts or no first p99.
func (b *Bursts) WorstP99Ratio() float64 {
	if b == nil || len(b.Bursts) < 2 || b.Bursts[0].Latency.P99 <= 0 {
		return 0
	}
	worst := 0.0
	for _, x := range b.Bursts[1:] {
		worst = max(worst, x.Latency.P99/b.Bursts[0].Latency.P99)
	}
	return worst
}

// FillRate is how many members a second the run's pool started while nothing else ran (its
// fill before the first burst); 0 when not measured.
func FillRate(r *Result) float64 {
	if r.PoolFillSeconds <= 0 || r.Parameters.WarmPoolSize <= 0 || r.Parameters.Autoscaler != "" {
		// An autoscaled pool fills to its minimum, too few members to say a rate.
		return 0
	}
	return float64(r.Parameters.WarmPoolSize) / r.PoolFillSeconds
}

// WorkSeconds is what a burst's work takes on the run's machine done one after the other:
// the first burst's seconds (its claims) plus the burst's extra Sandbox creates at the pool's
// own fill rate (FillRate). Back-to-back bursts that consume a pool's worth of members must
// start as many again, warm or cold, and on a small control plane the claims and the starts
// load the same API server: a burst that overlaps them well comes in under this, one that
// queues them behind each other at about this. 0 when not measured.
func WorkSeconds(r *Result, b Burst) float64 {
	rate := FillRate(r)
	first := r.Bursts.Bursts[0]
	if rate <= 0 || b.During == nil || first.During == nil {
		return 0
	}
	return first.Seconds + max(0, b.During.SandboxCreates-first.During.SandboxCreates)/rate
}

func workSeconds(r *Result, b Burst) string {
	if s := WorkSeconds(r, b); s > 0 {
		return fmt.Sprintf("%.1f", s)
	}
	return "-"
}

// WriteBurstsText prints the per-burst table of a burst run after its WriteText table; nothing
// for a run without Bursts.
func WriteBurstsText(w io.Writer, r *Result) error {
	if r.Bursts == nil || len(r.Bursts.Bursts) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	pf := func(format string, args ...any) { _, _ = fmt.Fprintf(tw, format, args...) }
	pf("\nburst\tclaims\tp50 (ms)\tp90 (ms)\tp99 (ms)\tmax (ms)\t÷ first p99\twarm\tof which starting\tpool ready / members at start\tseconds\twork seconds\t\n")
	first := r.Bursts.Bursts[0].Latency.P99
	for _, b := range r.Bursts.Bursts {
		pf("%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%.0f%%\t%s\t%d / %d\t%.1f\t%s\t\n", b.Index, b.Latency.Count, b.Latency.P50, b.Latency.P90,
			b.Latency.P99, b.Latency.Max, p99Ratio(b.Latency.P99, first), 100*b.WarmShare(), starting(b), b.PoolReadyAtStart, b.PoolMembersAtStart, b.Seconds,
			workSeconds(r, b))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rate := FillRate(r); rate > 0 {
		_, _ = fmt.Fprintf(w, "work seconds: the first burst's seconds plus the burst's extra Sandbox creates at the pool's fill rate, %.1f members/s, one after the other\n", rate)
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	pf = func(format string, args ...any) { _, _ = fmt.Fprintf(tw, format, args...) }
	pf("\nburst\tSandbox / pod creates\tqueue wait, mean ms by controller\treconciles by controller\treconcile, mean ms by controller\tclaim phases, mean ms\n")
	for _, b := range r.Bursts.Bursts {
		d := b.During
		if d == nil {
			pf("%d\tnot measured\t\t\t\t\n", b.Index)
			continue
		}
		pf("%d\t%.0f / %.0f\t%s\t%s\t%s\t%s\n", b.Index, d.SandboxCreates, d.PodCreates, msMap(d.QueueWaitMs), counts(d.Reconciles), msMap(d.WorkMs), phaseMeans(d.Phases))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range r.Bursts.Bursts {
		if d := b.During; d != nil && len(d.Requests) > 0 {
			_, _ = fmt.Fprintf(w, "burst %d: %.0f mutating requests: %s\n", b.Index, d.Mutating, keys(d.Requests))
		}
	}
	return nil
}

// writeBursts writes the section of the burst runs among results: one table per run.
func writeBursts(p func(string, ...any), results []*Result) {
	p(sectionBursts)
	p("")
	p("The public project's rapid-burst recipe (its `dev/load-test/test-recipes/rapid-burst-test.yaml`):")
	p("bursts of claims at a rate into one pool, every claim kept, each burst waited on until all its")
	p("claims are Ready before the next is sent, more claims in all than the pool has members. Warm is")
	p("what the claim's Sandbox says (`agents.x-k8s.io/launch-type`); of those, *starting* were bound")
	p("to a member that was not Ready yet (the operator's `agent_sandbox_claim_creation_total`,")
	p("`pod_condition=\"not_ready\"`). Pool at start: its `status.readyReplicas` / `status.replicas`")
	p("when the burst's first claim was sent. *Work seconds*: the first burst's seconds plus the burst's")
	p("Sandbox creates beyond the first's at the rate the same run's pool filled before the first burst,")
	p("the burst's work done one after the other (claims and starts load the same API server).")
	p("Target: every burst's p99 ≤ %g × the first burst's.", float64(BurstP99RatioTarget))
	for _, r := range results {
		b := r.Bursts
		p("")
		pool := fmt.Sprintf("a pool of %d", r.Parameters.WarmPoolSize)
		if a := r.Parameters.Autoscaler; a != "" {
			pool = "a pool a WarmPoolAutoscaler sizes (" + a + ")"
		}
		p("**%s**: %d bursts of %d claims at %g/s into %s, pod profile %s, %s between bursts; %s.", r.Scenario,
			r.Parameters.TotalBursts, r.Parameters.BurstSize, r.Parameters.QPS, pool, orDash(r.Parameters.Profile), pause(b.PauseSeconds), measuredAt(r))
		p("")
		p("| burst | claims | p50 (ms) | p90 (ms) | p99 (ms) | p99 ÷ first | warm | of which starting | pool at start | seconds | work seconds |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		first := b.Bursts[0].Latency.P99
		for _, x := range b.Bursts {
			ratio := "-"
			if x.Index > 1 {
				ratio = p99Ratio(x.Latency.P99, first)
			}
			p("| %d | %d | %.0f | %.0f | %.0f | %s | %.0f%% | %s | %d / %d | %.1f | %s |", x.Index, x.Latency.Count, x.Latency.P50, x.Latency.P90,
				x.Latency.P99, ratio, 100*x.WarmShare(), starting(x), x.PoolReadyAtStart, x.PoolMembersAtStart, x.Seconds, workSeconds(r, x))
		}
	}
	p("")
}

func p99Ratio(p99, first float64) string {
	if first <= 0 {
		return "-"
	}
	return ratioMark(p99/first, BurstP99RatioTarget)
}

func starting(b Burst) string {
	if b.WarmNotReady < 0 {
		return "-"
	}
	return fmt.Sprintf("%d", b.WarmNotReady)
}

func pause(seconds float64) string {
	if seconds <= 0 {
		return "no pause"
	}
	return fmt.Sprintf("a pause of %g s", seconds)
}

func msMap(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	return keys(scrape.Sorted(m))
}

func counts(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	return keys(scrape.Sorted(m))
}

func phaseMeans(phases []Phase) string {
	if len(phases) == 0 {
		return "-"
	}
	counts := make([]scrape.Count, len(phases))
	for i, ph := range phases {
		counts[i] = scrape.Count{Key: ph.Name, Count: ph.MeanMs}
	}
	return keys(counts)
}

// measuredAt says which commit a result measured, when, and how loaded the machine was: a
// section spliced into a report measured before (SpliceSections) carries its own.
func measuredAt(r *Result) string {
	at := fmt.Sprintf("commit %s, %s", orDash(r.Parameters.Commit), r.StartedAt.UTC().Format("2006-01-02 15:04 UTC"))
	if r.LoadAverage > 0 { // a run of several clusters (the trace's arms) says each arm's
		at += fmt.Sprintf(", load average %.1f at the start", r.LoadAverage)
	}
	return at
}
