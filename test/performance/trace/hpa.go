package trace

// The public project's recipe for demand-following warm pools: a HorizontalPodAutoscaler on
// the pool's /scale subresource, fed the claim creation rate (rate of
// agent_sandbox_claim_creation_total) through Prometheus and a metrics adapter. Emulated here
// from the documented algorithm of autoscaling/v2 (kubernetes.io, "Horizontal Pod Autoscaling",
// and kube-controller-manager's podautoscaler as of v1.37, read for its facts), so that the
// bench measures the recipe on a local control plane without Prometheus, an adapter or a
// kube-controller-manager running the HPA controller:
//
//   - the metric is an External metric with an AverageValue target (claims a second per pool
//     member): proposal = ceil(metric / target), which is the documented
//     ceil(current × currentMetricValue / desiredMetricValue) with the metric averaged over the
//     current members; kept at the current size while metric / (target × status.replicas) is
//     within the tolerance (0.1) of 1;
//   - a sync every 15 s (--horizontal-pod-autoscaler-sync-period);
//   - the autoscaling/v2 default behavior: scale up with no stabilization, by the larger of
//     100% and 4 members per 15 s; scale down with a 300 s stabilization window (the highest
//     recommendation of the window wins), by up to 100% per 15 s; within min and max;
//   - the metric late: the counter scraped every 15 s, and what the HPA reads at t is its rate
//     over Window ending Delay before t (by default the 15 s of one scrape interval, 30 s
//     back: a scrape interval plus the adapter's window).
//
// Not emulated: Prometheus's extrapolation of rate() to the window's edges, the adapter's own
// relist period and caching, the HPA's "scaling disabled at zero replicas" beyond refusing to
// move, and several metrics at once (one metric here).

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy types and selections of autoscaling/v2.
const (
	PolicyPods    = "Pods"
	PolicyPercent = "Percent"
	SelectMax     = "Max"
	SelectMin     = "Min"
	SelectOff     = "Disabled"
)

// ScalingPolicy is one HPAScalingPolicy: at most Value members (Pods) or Value percent of the
// replicas at the start of the period (Percent) per Period.
type ScalingPolicy struct {
	Type   string
	Value  int32
	Period time.Duration
}

// ScalingRules are one direction's HPAScalingRules.
type ScalingRules struct {
	Stabilization time.Duration
	Policies      []ScalingPolicy
	Select        string
}

// HPAConfig is the HorizontalPodAutoscaler of the recipe and how its metric reaches it.
type HPAConfig struct {
	MinReplicas, MaxReplicas int32
	// Target is the AverageValue target: claims a second per pool member.
	Target float64
	// Tolerance is the cluster's --horizontal-pod-autoscaler-tolerance.
	Tolerance float64
	// Sync is the HPA controller's sync period.
	Sync time.Duration
	// Scrape is how often Prometheus scrapes the operator's counter; the HPA reads at t its
	// rate over Window ending Delay before t.
	Scrape, Delay, Window time.Duration
	ScaleUp, ScaleDown    ScalingRules
}

// DefaultHPA returns the recipe with autoscaling/v2's defaults between min and max, at target
// claims a second per member.
func DefaultHPA(minReplicas, maxReplicas int32, target float64) HPAConfig {
	return HPAConfig{
		MinReplicas: minReplicas, MaxReplicas: maxReplicas, Target: target,
		Tolerance: 0.1, Sync: 15 * time.Second,
		Scrape: 15 * time.Second, Delay: 30 * time.Second, Window: 15 * time.Second,
		ScaleUp: ScalingRules{Select: SelectMax, Policies: []ScalingPolicy{
			{Type: PolicyPercent, Value: 100, Period: 15 * time.Second},
			{Type: PolicyPods, Value: 4, Period: 15 * time.Second},
		}},
		ScaleDown: ScalingRules{Stabilization: 300 * time.Second, Select: SelectMax, Policies: []ScalingPolicy{
			{Type: PolicyPercent, Value: 100, Period: 15 * time.Second},
		}},
	}
}

// Validate reports the settings the emulation cannot run.
func (c HPAConfig) Validate() error {
	var errs []error
	if c.MinReplicas < 1 || c.MaxReplicas < c.MinReplicas {
		errs = append(errs, fmt.Errorf("HPA bounds: want 1 ≤ min (%d) ≤ max (%d)", c.MinReplicas, c.MaxReplicas))
	}
	if c.Target <= 0 || c.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("HPA target %g and tolerance %g: want a positive target, a tolerance ≥ 0", c.Target, c.Tolerance))
	}
	if c.Sync <= 0 || c.Scrape <= 0 || c.Window <= 0 || c.Delay < 0 {
		errs = append(errs, errors.New("HPA sync, scrape interval and window must be positive, the delay not negative"))
	}
	return errors.Join(errs...)
}

// Decision is what one sync decided.
type Decision struct {
	At time.Time
	// Metric is the rate the HPA read; MetricOK is false when it had none yet.
	Metric   float64
	MetricOK bool
	// Current is the target's spec.replicas, Status its status.replicas.
	Current, Status int32
	// Proposed is the metric's proposal; Desired what the HPA sets after bounds, stabilization
	// and rate limits.
	Proposed, Desired int32
	Reason            string
}

type recommendation struct {
	at       time.Time
	replicas int32
}

type scaleEvent struct {
	at     time.Time
	change int32
}

// HPA is the emulated controller's state for one target: its recent recommendations and
// scale events, which stabilization and the rate limits read.
type HPA struct {
	cfg   HPAConfig
	recs  []recommendation
	ups   []scaleEvent
	downs []scaleEvent
}

// NewHPA returns the controller of cfg with no history.
func NewHPA(cfg HPAConfig) *HPA { return &HPA{cfg: cfg} }

// Sync decides at now, the target at current (spec) and status replicas, from the metric
// read (ok false when there is none): what the HPA controller's reconcile does, with a clock
// passed in. A decision whose Desired differs from Current is a scale the caller writes.
func (h *HPA) Sync(now time.Time, current, status int32, metric float64, ok bool) Decision {
	c := h.cfg
	d := Decision{At: now, Metric: metric, MetricOK: ok, Current: current, Status: status, Desired: current}
	switch {
	case current == 0:
		d.Reason = "ScalingDisabled: the target has zero replicas"
		return d
	case current > c.MaxReplicas:
		d.Desired, d.Reason = c.MaxReplicas, "above maxReplicas"
	case current < c.MinReplicas:
		d.Desired, d.Reason = c.MinReplicas, "below minReplicas"
	case !ok:
		d.Reason = "FailedGetExternalMetric: no rate yet"
		return d
	default:
		d.Proposed = h.propose(status, metric)
		stabilized := h.stabilize(now, current, d.Proposed)
		d.Desired, d.Reason = h.limit(now, current, stabilized)
	}
	if d.Desired != current {
		h.record(now, current, d.Desired)
	}
	return d
}

// propose is the metric's replica count: ceil(metric / target), or status while the usage
// ratio is within the tolerance.
func (h *HPA) propose(status int32, metric float64) int32 {
	want := int32(min(math.Ceil(metric/h.cfg.Target), math.MaxInt32))
	if status == 0 {
		return want
	}
	ratio := metric / (h.cfg.Target * float64(status))
	if 1-h.cfg.Tolerance <= ratio && ratio <= 1+h.cfg.Tolerance {
		return status
	}
	return want
}

// stabilize keeps current unless every recommendation of the scale-up window is above it
// (then the lowest of them) or every one of the scale-down window below it (then the highest),
// and records proposed.
func (h *HPA) stabilize(now time.Time, current, proposed int32) int32 {
	up, down := proposed, proposed
	upCutoff, downCutoff := now.Add(-h.cfg.ScaleUp.Stabilization), now.Add(-h.cfg.ScaleDown.Stabilization)
	kept := h.recs[:0]
	for _, r := range h.recs {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
		if r.at.After(upCutoff) || r.at.After(downCutoff) {
			kept = append(kept, r)
		}
	}
	h.recs = append(kept, recommendation{at: now, replicas: proposed})
	rec := current
	if rec < up {
		rec = up
	}
	if rec > down {
		rec = down
	}
	return rec
}

// limit bounds desired by min and max and by the policies' rates, from the scale events of
// their periods.
func (h *HPA) limit(now time.Time, current, desired int32) (int32, string) {
	c := h.cfg
	switch {
	case desired > current:
		bound := max(h.upLimit(now, current), current)
		reason := "ScaleUpLimit"
		if c.MaxReplicas <= bound {
			bound, reason = c.MaxReplicas, "TooManyReplicas"
		}
		if desired > bound {
			return bound, reason
		}
	case desired < current:
		bound := min(h.downLimit(now, current), current)
		reason := "ScaleDownLimit"
		if c.MinReplicas >= bound {
			bound, reason = c.MinReplicas, "TooFewReplicas"
		}
		if desired < bound {
			return bound, reason
		}
	}
	return desired, "DesiredWithinRange"
}

// upLimit is the most replicas the scale-up policies allow now.
func (h *HPA) upLimit(now time.Time, current int32) int32 {
	r := h.cfg.ScaleUp
	if r.Select == SelectOff {
		return current
	}
	result := int32(math.MinInt32)
	pick := func(a, b int32) int32 { return max(a, b) }
	if r.Select == SelectMin {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changes(now, p.Period, h.ups) + changes(now, p.Period, h.downs)
		proposed := start + p.Value
		if p.Type == PolicyPercent {
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// downLimit is the fewest replicas the scale-down policies allow now.
func (h *HPA) downLimit(now time.Time, current int32) int32 {
	r := h.cfg.ScaleDown
	if r.Select == SelectOff {
		return current
	}
	result := int32(math.MaxInt32)
	pick := func(a, b int32) int32 { return min(a, b) }
	if r.Select == SelectMin {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changes(now, p.Period, h.ups) + changes(now, p.Period, h.downs)
		proposed := start - p.Value
		if p.Type == PolicyPercent {
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// changes sums the replica changes of events within period before now.
func changes(now time.Time, period time.Duration, events []scaleEvent) int32 {
	var sum int32
	cutoff := now.Add(-period)
	for _, e := range events {
		if e.at.After(cutoff) {
			sum += e.change
		}
	}
	return sum
}

// record keeps a scale from current to desired, dropping events older than every policy's
// period.
func (h *HPA) record(now time.Time, current, desired int32) {
	longest := func(r ScalingRules) time.Duration {
		var l time.Duration
		for _, p := range r.Policies {
			l = max(l, p.Period)
		}
		return l
	}
	prune := func(events []scaleEvent, keep time.Duration) []scaleEvent {
		out := events[:0]
		for _, e := range events {
			if e.at.After(now.Add(-keep)) {
				out = append(out, e)
			}
		}
		return out
	}
	if desired > current {
		h.ups = append(prune(h.ups, longest(h.cfg.ScaleUp)), scaleEvent{at: now, change: desired - current})
	} else {
		h.downs = append(prune(h.downs, longest(h.cfg.ScaleDown)), scaleEvent{at: now, change: current - desired})
	}
}

// RateMetric is a counter as scraped, read as a rate the way the recipe's HPA reads it: over
// Window, ending Delay before the read.
type RateMetric struct {
	Delay, Window time.Duration
	samples       []counterSample
}

type counterSample struct {
	at    time.Time
	total float64
}

// Observe records a scrape of the counter at at; scrapes come in time order.
func (m *RateMetric) Observe(at time.Time, total float64) {
	m.samples = append(m.samples, counterSample{at: at, total: total})
}

// At returns the rate the HPA reads at now: the counter's increase between the last scrapes
// at or before now − Delay − Window and now − Delay, per second between them; false until two
// such scrapes exist. A counter that went down (the operator restarted) counts from zero.
func (m *RateMetric) At(now time.Time) (float64, bool) {
	end := now.Add(-m.Delay)
	start := end.Add(-m.Window)
	a, b := -1, -1
	for i, s := range m.samples {
		if !s.at.After(start) {
			a = i
		}
		if !s.at.After(end) {
			b = i
		}
	}
	if a < 0 || b <= a {
		return 0, false
	}
	inc := m.samples[b].total - m.samples[a].total
	if inc < 0 {
		inc = m.samples[b].total
	}
	return inc / m.samples[b].at.Sub(m.samples[a].at).Seconds(), true
}
