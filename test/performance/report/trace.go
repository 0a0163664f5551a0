package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The figures of the trace scenario: one seeded day of demand (compressed to minutes, Poisson
// arrivals at the day's rate, bursts, each claim held a random lifetime) replayed against
// several pool policies, each on a fresh cluster. Per policy: the share of claims served warm,
// their latency, and the idle member-seconds, what the warm capacity cost.

// Policies of the trace scenario.
const (
	PolicyStatic     = "static"
	PolicyHPA        = "hpa"
	PolicyAutoscaler = "autoscaler"
)

// Trace is what the trace scenario measured.
type Trace struct {
	// Summary is the trace in one line (its seed, claims, rates, bursts, lifetimes); CSV the
	// file of its arrivals, one a line, in the results directory.
	Summary         string  `json:"summary"`
	CSV             string  `json:"csv,omitempty"`
	Seed            uint64  `json:"seed"`
	DurationSeconds float64 `json:"durationSeconds"`
	Claims          int     `json:"claims"`
	// Demand is the trace's arrivals per DemandBinSeconds from its start, in claims a second.
	Demand           []float64 `json:"demand"`
	DemandBinSeconds float64   `json:"demandBinSeconds"`
	// StartupSeconds is the member start-up time the pools were sized with, PeakWindowClaims
	// the most claims that arrive within it, Headroom the static pool's margin above them.
	StartupSeconds   float64    `json:"startupSeconds"`
	PeakWindowClaims int        `json:"peakWindowClaims"`
	Headroom         float64    `json:"headroom"`
	Arms             []TraceArm `json:"arms"`
}

// TraceArm is one policy's run of the trace.
type TraceArm struct {
	Policy string `json:"policy"`
	// Settings says how the policy was set up ("a pool of 242", the HPA's bounds and target,
	// the autoscaler's spec).
	Settings string `json:"settings"`
	// Result is the run: claims, latency, samples, the API server's and the operator's figures;
	// nil when the arm failed, and Error says why.
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	// WarmShare is the share of the Ready claims bound to a pool member that was ready when the
	// claim was served: the Sandbox's launch-type label says warm, less WarmStarting.
	WarmShare float64 `json:"warmShare"`
	// WarmStarting counts the claims bound to a member that was still starting (the
	// operator's agent_sandbox_claim_creation_total, pod_condition="not_ready"): warm by the
	// label, but the claim waited for the member's start-up. -1 when the operator does not say.
	WarmStarting int `json:"warmStarting"`
	// IdleMemberSeconds is the integral over the trace of the pool's ready, unbound members:
	// what the warm capacity cost. ReplicaSeconds is the same of the pool's spec.replicas.
	IdleMemberSeconds float64 `json:"idleMemberSeconds"`
	ReplicaSeconds    float64 `json:"replicaSeconds"`
	// MinReady is the fewest ready unbound members seen during the trace, DrySeconds how many
	// of its one-second samples saw none.
	MinReady   int32 `json:"minReady"`
	DrySeconds int   `json:"drySeconds"`
	// Timeline is the pool sampled every second from the trace's start.
	Timeline []TracePoint `json:"timeline"`
	// Scales are the scales of the pool the policy made, as the load generator saw them: every
	// sync of the emulated HPA that wrote, or each change of spec.replicas by the autoscaler.
	Scales []PoolScale `json:"scales,omitempty"`
	// Notes are what else the arm reported (the autoscaler's status at the end).
	Notes []string `json:"notes,omitempty"`
}

// TracePoint is the pool at one moment of a trace arm.
type TracePoint struct {
	AtSeconds float64 `json:"at"`
	// Replicas is the pool's spec.replicas; Members its unbound members, Ready the ready ones.
	Replicas int32 `json:"replicas"`
	Members  int32 `json:"members"`
	Ready    int32 `json:"ready"`
}

// PoolScale is one change of the pool's replicas.
type PoolScale struct {
	AtSeconds float64 `json:"at"`
	From      int32   `json:"from"`
	To        int32   `json:"to"`
	// Metric is the claim rate the emulated HPA read (hpa arm).
	Metric float64 `json:"metric,omitempty"`
	Reason string  `json:"reason,omitempty"`
}

// IdleMemberSeconds integrates the ready unbound members of points over [from, to] seconds:
// each sample's count holds until the next sample (the last one's until to, the first one's
// from from). Points are in time order.
func IdleMemberSeconds(points []TracePoint, from, to float64) float64 {
	return integrate(points, from, to, func(p TracePoint) int32 { return p.Ready })
}

// ReplicaSeconds integrates the pool's spec.replicas the same way.
func ReplicaSeconds(points []TracePoint, from, to float64) float64 {
	return integrate(points, from, to, func(p TracePoint) int32 { return p.Replicas })
}

func integrate(points []TracePoint, from, to float64, value func(TracePoint) int32) float64 {
	sum := 0.0
	for i, p := range points {
		start := p.AtSeconds
		if i == 0 {
			start = min(start, from)
		}
		end := to
		if i+1 < len(points) {
			end = points[i+1].AtSeconds
		}
		if lo, hi := max(start, from), min(end, to); hi > lo {
			sum += float64(value(p)) * (hi - lo)
		}
	}
	return sum
}

// DryOf returns the fewest ready members in points within [from, to] seconds and how many
// samples there saw none.
func DryOf(points []TracePoint, from, to float64) (minReady int32, dry int) {
	pool := make([]PoolPoint, len(points))
	for i, p := range points {
		pool[i] = PoolPoint{AtSeconds: p.AtSeconds, Ready: p.Ready, Members: p.Members}
	}
	_, minReady, dry = RefillKeptUp(pool, from, to)
	return minReady, dry
}

// arm returns the arm of policy, nil when it was not run.
func (t *Trace) arm(policy string) *TraceArm {
	for i := range t.Arms {
		if t.Arms[i].Policy == policy {
			return &t.Arms[i]
		}
	}
	return nil
}

// costRatio is an arm's idle member-seconds ÷ the static pool's, "-" without both.
func (t *Trace) costRatio(a *TraceArm) string {
	s := t.arm(PolicyStatic)
	if s == nil || s.Result == nil || s.IdleMemberSeconds <= 0 || a.Result == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", a.IdleMemberSeconds/s.IdleMemberSeconds)
}

// WriteTraceText prints the trace scenario's figures, one line per policy.
func WriteTraceText(w io.Writer, r *Result) error {
	t := r.Trace
	if t == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== scenario %s: trace %s\n", r.Scenario, t.Summary)
	fmt.Fprintf(&b, "   sized with a member start-up time of %g s: at most %d claims within one; headroom %.0f%%\n",
		t.StartupSeconds, t.PeakWindowClaims, 100*t.Headroom)
	for i := range t.Arms {
		a := &t.Arms[i]
		if a.Result == nil {
			fmt.Fprintf(&b, "  %-10s %s: failed: %s\n", a.Policy, a.Settings, a.Error)
			continue
		}
		c, l := a.Result.Claims, a.Result.Latency.Client
		fmt.Fprintf(&b, "  %-10s %s\n", a.Policy, a.Settings)
		fmt.Fprintf(&b, "  %-10s %d/%d Ready, %.2f%% warm (%s from starting members, %d cold), p50 %.1f ms, p99 %.1f ms; idle member-seconds %.0f (%s × static), replica-seconds %.0f; fewest ready %d, %d s dry; %d scales\n",
			"", c.Ready, c.Created, 100*a.WarmShare, warmStarting(a), c.ColdStarts, l.P50, l.P99, a.IdleMemberSeconds, t.costRatio(a), a.ReplicaSeconds, a.MinReady, a.DrySeconds, len(a.Scales))
		for _, n := range a.Notes {
			fmt.Fprintf(&b, "  %-10s %s\n", "", n)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("printing the trace figures: %w", err)
	}
	return nil
}

// writeTraces writes the section of the trace scenario's results, with their pictures found
// in dir ("" for none).
func writeTraces(p func(string, ...any), results []*Result, dir string) {
	if len(results) == 0 {
		return
	}
	p(sectionTrace)
	p("")
	p("One seeded day of demand compressed to minutes (night, a morning ramp, a noisy plateau, an")
	p("evening decline; Poisson arrivals at the instantaneous rate; sudden bursts), each claim held")
	p("a random lifetime once Ready and then deleted, replayed against each pool policy on a fresh")
	p("cluster. **static**: a pool sized for the trace's peak, the most claims arriving within one")
	p("member start-up time plus headroom. **hpa**: the public project's recipe, an HPA on the claim")
	p("creation rate, emulated by the load generator (autoscaling/v2's algorithm and default")
	p("behavior, 15 s sync, the rate seen 30 s late; docs/measuring.md says what is emulated).")
	p("**autoscaler**: a WarmPoolAutoscaler on the pool. Warm: the claim's Sandbox carries")
	p("launch-type warm and its member was Ready when the claim took it; *from starting*: warm by the")
	p("label, but bound to a member still starting, so the claim waited for its start-up (the")
	p("operator's `agent_sandbox_claim_creation_total`, `pod_condition=\"not_ready\"`). Idle member-seconds: the integral over the trace of the pool's ready,")
	p("unbound members, the cost of the warm capacity; ÷ static compares it with the peak-sized pool.")
	p("")
	for _, r := range results {
		t := r.Trace
		p("**%s** (pod profile %s; %s): trace %s; CSV `%s`. Sized with a member start-up time of %g s:", r.Scenario,
			orDash(r.Parameters.Profile), measuredAt(r), t.Summary, orDash(t.CSV), t.StartupSeconds)
		p("at most %d claims arrive within one.", t.PeakWindowClaims)
		p("")
		p("| policy | settings | claims Ready | warm | from starting | cold | p50 (ms) | p99 (ms) | idle member-seconds | ÷ static | replica-seconds | fewest ready | dry (s) | scales |")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for i := range t.Arms {
			a := &t.Arms[i]
			if a.Result == nil {
				p("| %s | %s | failed: %s | | | | | | | | | | | |", a.Policy, a.Settings, a.Error)
				continue
			}
			c, l := a.Result.Claims, a.Result.Latency.Client
			p("| %s | %s | %d of %d | %.2f%% | %s | %d | %.1f | %.1f | %.0f | %s | %.0f | %d | %d | %d |", a.Policy, a.Settings,
				c.Ready, c.Created, 100*a.WarmShare, warmStarting(a), c.ColdStarts, l.P50, l.P99, a.IdleMemberSeconds, t.costRatio(a),
				a.ReplicaSeconds, a.MinReady, a.DrySeconds, len(a.Scales))
		}
		for i := range t.Arms {
			for _, n := range t.Arms[i].Notes {
				p("")
				p("%s: %s", t.Arms[i].Policy, n)
			}
		}
		if dir != "" {
			for _, name := range tracePlotNames(r) {
				if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
					p("")
					p("![%s: demand, pool replicas and ready members over time](%s/%s)", r.Scenario, plotDirName, name)
				}
			}
		}
		p("")
	}
}

// splitTraces separates the trace scenario's results from the others; the fair-share and
// overload scenarios' are in neither (their own sections, writeFairShares, writeOverloads).
func splitTraces(all []*Result) (others, traces []*Result) {
	for _, r := range all {
		switch {
		case r.FairShare != nil, r.Overload != nil:
		case r.Trace != nil:
			traces = append(traces, r)
		default:
			others = append(others, r)
		}
	}
	return others, traces
}

func warmStarting(a *TraceArm) string {
	if a.WarmStarting < 0 {
		return "-"
	}
	return fmt.Sprintf("%d", a.WarmStarting)
}
