package reconcilers

import (
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/demand"
)

// What the warm pool autoscaler decides, as pure functions of its spec, the demand estimate,
// the open schedules, its own recent recommendations and the clock:
//
//  1. the recommendation: targetSpare + the claims expected during one member start-up,
//     within minReplicas (or the open schedules' highest minimum) and maxReplicas
//     (autoscalerRecommendation);
//  2. stabilized as a HorizontalPodAutoscaler's behavior does: never above the lowest
//     recommendation of the scale-up window, never below the highest of the scale-down
//     window (autoscalerHistory.stabilize);
//  3. paced: at most maxStep members per step, one step per period in each direction
//     (autoscalerStep);
//  4. the bounds again, at once: a schedule's minimum or a lowered maxReplicas is not paced.

// autoscalerRules is an autoscaler's spec with every default applied (an object admitted
// before a default existed has the field unset) and its steps parsed.
type autoscalerRules struct {
	min, max, spare int32
	up, down        autoscalerStepRules
	schedules       []autoscalingv1alpha1.Schedule
}

// autoscalerStepRules are the rules of one direction.
type autoscalerStepRules struct {
	window, period time.Duration
	// maxStep is the most members of one step (a percentage of the current replicas with
	// percent); 0 is no limit.
	maxStep int32
	percent bool
}

func autoscalerRulesOf(spec *autoscalingv1alpha1.WarmPoolAutoscalerSpec) autoscalerRules {
	r := autoscalerRules{
		min:       autoscalingv1alpha1.DefaultMinReplicas,
		max:       spec.MaxReplicas,
		spare:     autoscalingv1alpha1.DefaultTargetSpare,
		schedules: spec.Schedules,
		up: autoscalerStepRules{window: seconds(autoscalingv1alpha1.DefaultScaleUpStabilizationWindowSeconds),
			period: seconds(autoscalingv1alpha1.DefaultScaleUpPeriodSeconds)},
		down: autoscalerStepRules{window: seconds(autoscalingv1alpha1.DefaultScaleDownStabilizationWindowSeconds),
			period: seconds(autoscalingv1alpha1.DefaultScaleDownPeriodSeconds)},
	}
	if n, pct, err := policy.ParseMaxStep(intstr.FromString(autoscalingv1alpha1.DefaultScaleDownMaxStep)); err == nil {
		r.down.maxStep, r.down.percent = n, pct
	}
	if spec.MinReplicas != nil {
		r.min = *spec.MinReplicas
	}
	if spec.TargetSpare != nil {
		r.spare = *spec.TargetSpare
	}
	if b := spec.Behavior; b != nil {
		r.up.apply(b.ScaleUp)
		r.down.apply(b.ScaleDown)
	}
	r.min = min(r.min, r.max)
	return r
}

// apply overrides the defaults with what the spec sets. A step that does not parse
// (admission refuses it) is no limit.
func (s *autoscalerStepRules) apply(rules *autoscalingv1alpha1.ScalingRules) {
	if rules == nil {
		return
	}
	if rules.StabilizationWindowSeconds != nil {
		s.window = seconds(*rules.StabilizationWindowSeconds)
	}
	if rules.PeriodSeconds != nil {
		s.period = seconds(*rules.PeriodSeconds)
	}
	if rules.MaxStep != nil {
		s.maxStep, s.percent = 0, false
		if n, pct, err := policy.ParseMaxStep(*rules.MaxStep); err == nil {
			s.maxStep, s.percent = n, pct
		}
	}
}

func seconds(n int32) time.Duration { return time.Duration(max(n, 0)) * time.Second }

// autoscalerRecommendation is targetSpare plus the expected claims, within the floor
// (minReplicas, or the open schedules' highest minimum) and maxReplicas, with the reason of
// the ScalingActive condition: which of them decided.
func autoscalerRecommendation(r autoscalerRules, expected int, scheduleMin int32) (int32, string) {
	want := int64(r.spare) + int64(max(expected, 0))
	floor, floorReason := r.min, autoscalingv1alpha1.ReasonMinReplicas
	if scheduleMin > floor {
		floor, floorReason = scheduleMin, autoscalingv1alpha1.ReasonScheduleMinimum
	}
	switch {
	case want >= int64(r.max):
		return r.max, autoscalingv1alpha1.ReasonMaxReplicas
	case want < int64(floor):
		return min(floor, r.max), floorReason
	default:
		return int32(want), autoscalingv1alpha1.ReasonDemandDriven
	}
}

// autoscalerHistory is an autoscaler's recent recommendations, the lowest and highest of
// each second, as far back as the longer stabilization window. A recommendation stands until
// the next one: reconciles come with events, not on a period, so the one before a change is
// recorded again at the moment of the change (observe), and a window counts from when it was
// last in force, not from when it was last computed. It lives in memory: a new leader starts
// it with the pool's current replicas (seed), so that the scale-down window holds them as if
// it had recommended them, rather than scaling down at once.
type autoscalerHistory struct {
	seconds []historySecond
	last    int32
}

type historySecond struct {
	at        int64 // Unix seconds
	low, high int32
}

// seed starts an empty history with current at now.
func (h *autoscalerHistory) seed(now time.Time, current int32) {
	if len(h.seconds) == 0 {
		h.add(now, current)
		h.last = current
	}
}

// observe records recommendation n at now, the previous one standing until now.
func (h *autoscalerHistory) observe(now time.Time, n int32) {
	h.add(now, h.last)
	h.add(now, n)
	h.last = n
}

// add records recommendation n at now.
func (h *autoscalerHistory) add(now time.Time, n int32) {
	sec := now.Unix()
	if last := len(h.seconds) - 1; last >= 0 && h.seconds[last].at == sec {
		h.seconds[last].low = min(h.seconds[last].low, n)
		h.seconds[last].high = max(h.seconds[last].high, n)
		return
	}
	h.seconds = append(h.seconds, historySecond{at: sec, low: n, high: n})
}

// prune drops the seconds that left the window keep.
func (h *autoscalerHistory) prune(now time.Time, keep time.Duration) {
	cutoff := now.Add(-keep).Unix()
	i := 0
	for i < len(h.seconds) && h.seconds[i].at < cutoff {
		i++
	}
	h.seconds = h.seconds[i:]
}

// stabilize is HorizontalPodAutoscaler's rule on the history (which holds rec, the newest
// recommendation): from current, up to no more than the lowest recommendation of the up
// window, down to no less than the highest of the down window. A window of 0 is rec alone.
// It also says when the down window's hold can next change (zero when nothing is held).
func (h *autoscalerHistory) stabilize(now time.Time, current, rec int32, up, down time.Duration) (int32, time.Time) {
	upRec, downRec := rec, rec
	var heldUntil time.Time
	for _, s := range h.seconds {
		at := time.Unix(s.at, 0)
		// A second is in a window while any part of it is.
		if up > 0 && at.Add(time.Second).After(now.Add(-up)) {
			upRec = min(upRec, s.low)
		}
		if down > 0 && at.Add(time.Second).After(now.Add(-down)) && s.high >= downRec && s.high > rec {
			downRec = s.high
			heldUntil = at.Add(time.Second + down)
		}
	}
	out := current
	if out < upRec {
		out = upRec
	}
	if out > downRec {
		out = downRec
	}
	if out <= rec {
		heldUntil = time.Time{} // not held above the recommendation
	}
	return out, heldUntil
}

// minLimitedStepPeriod is the least time between two limited steps: with a maxStep and no
// period, a step per reconcile would be no limit at all (reconciles come with every claim).
const minLimitedStepPeriod = time.Second

// minStepPeriod is the least time between two steps in one direction, whatever the rules: a
// burst's arrivals each raise the estimate a little, and a write of the pool's replicas per
// claim would cost the API server a write, and wake the pool, as often as claims arrive.
// Coalesced to four writes a second, a scale-up is late by at most this, against a member
// start-up of seconds.
const minStepPeriod = 250 * time.Millisecond

// autoscalerStep paces a move from current to target: at most maxStep members, and none
// within period (at least minStepPeriod, and minLimitedStepPeriod with a maxStep) of the last
// step in that direction. It returns where to go now and when the
// pacing lets the next step go (zero when it held nothing back).
func autoscalerStep(current, target int32, rules autoscalerStepRules, lastStep, now time.Time) (int32, time.Time) {
	if target == current {
		return current, time.Time{}
	}
	period := max(rules.period, minStepPeriod)
	if rules.maxStep > 0 {
		period = max(period, minLimitedStepPeriod)
	}
	if period > 0 && !lastStep.IsZero() && now.Before(lastStep.Add(period)) {
		return current, lastStep.Add(period)
	}
	var limit int64 = math.MaxInt32
	if rules.maxStep > 0 {
		limit = int64(rules.maxStep)
		if rules.percent {
			limit = max((int64(current)*int64(rules.maxStep)+99)/100, 1)
		}
	}
	diff := int64(target) - int64(current)
	var next time.Time
	if diff > limit || -diff > limit {
		next = now.Add(period)
	}
	diff = max(min(diff, limit), -limit)
	return int32(int64(current) + diff), next
}

// autoscalerDecision is what one reconcile decides.
type autoscalerDecision struct {
	// replicas is what the pool gets now; recommendation what demand and bounds ask for
	// (before behavior); reason the ScalingActive reason of the recommendation.
	replicas, recommendation int32
	reason                   string
	// recheck is when the decision can change with no event to say so (zero: never).
	recheck time.Time
}

// decideReplicas runs the four steps for a pool whose spec.replicas is current, adding the
// recommendation to h. lastUp and lastDown are the times of the last steps each way.
func decideReplicas(r autoscalerRules, current int32, est demand.Estimate, open policy.OpenWindows, h *autoscalerHistory,
	lastUp, lastDown, now time.Time) autoscalerDecision {
	rec, reason := autoscalerRecommendation(r, est.Expected, open.Minimum)
	h.seed(now, current)
	h.observe(now, rec)
	h.prune(now, max(r.up.window, r.down.window)+time.Second)
	stable, heldUntil := h.stabilize(now, current, rec, r.up.window, r.down.window)
	d := autoscalerDecision{recommendation: rec, reason: reason}
	var paced time.Time
	switch {
	case stable > current:
		d.replicas, paced = autoscalerStep(current, stable, r.up, lastUp, now)
	case stable < current:
		d.replicas, paced = autoscalerStep(current, stable, r.down, lastDown, now)
	default:
		d.replicas = current
	}
	floor := min(max(r.min, open.Minimum), r.max)
	d.replicas = min(max(d.replicas, floor), r.max)
	d.recheck = earliest(heldUntil, paced, open.Next)
	return d
}

// earliest is the earliest non-zero time of ts (zero when all are).
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// describeScale is the message of a scale event and of status.lastScaleReason.
func describeScale(from, to int32, d autoscalerDecision, est demand.Estimate, open policy.OpenWindows) string {
	why := fmt.Sprintf("%d claims expected during a %s member start-up (%.2f claims/s)", est.Expected,
		est.Startup.Round(time.Millisecond), est.Rate)
	switch d.reason {
	case autoscalingv1alpha1.ReasonMaxReplicas:
		why += "; held at maxReplicas"
	case autoscalingv1alpha1.ReasonMinReplicas:
		why += "; held at minReplicas"
	case autoscalingv1alpha1.ReasonScheduleMinimum:
		why += fmt.Sprintf("; held at the minimum of schedule %v", open.Names)
	}
	if d.replicas != d.recommendation {
		why += fmt.Sprintf("; recommendation %d, paced by the behavior", d.recommendation)
	}
	return fmt.Sprintf("%d -> %d: %s", from, to, why)
}
