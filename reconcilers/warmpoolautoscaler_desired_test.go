package reconcilers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

var wpaT0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// The recommendation is targetSpare plus the claims expected during one start-up, within
// the floor (minReplicas or an open schedule's higher minimum) and maxReplicas; the reason
// says which decided.
func TestAutoscalerRecommendation(t *testing.T) {
	rules := autoscalerRulesOf(&builders.MakeAutoscaler("a", "ns", "pool").Min(3).Max(40).TargetSpare(2).Obj().Spec)
	type want struct {
		n      int32
		reason string
	}
	cases := map[string]struct {
		expected    int
		scheduleMin int32
		want        want
	}{
		"no demand: minReplicas":                  {0, 0, want{3, autoscalingv1alpha1.ReasonMinReplicas}},
		"spare plus demand":                       {5, 0, want{7, autoscalingv1alpha1.ReasonDemandDriven}},
		"exactly the floor is demand-driven":      {1, 0, want{3, autoscalingv1alpha1.ReasonDemandDriven}},
		"an open schedule's minimum":              {5, 20, want{20, autoscalingv1alpha1.ReasonScheduleMinimum}},
		"a schedule below minReplicas is no rule": {0, 2, want{3, autoscalingv1alpha1.ReasonMinReplicas}},
		"demand above the schedule":               {30, 20, want{32, autoscalingv1alpha1.ReasonDemandDriven}},
		"maxReplicas":                             {100, 0, want{40, autoscalingv1alpha1.ReasonMaxReplicas}},
		"a huge expectation does not overflow":    {1 << 31, 0, want{40, autoscalingv1alpha1.ReasonMaxReplicas}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, reason := autoscalerRecommendation(rules, tc.expected, tc.scheduleMin)
			if diff := cmp.Diff(tc.want, want{n, reason}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The defaults apply to a spec admitted without them (an object from before a default).
func TestAutoscalerRulesDefaults(t *testing.T) {
	got := autoscalerRulesOf(&autoscalingv1alpha1.WarmPoolAutoscalerSpec{MaxReplicas: 10})
	want := autoscalerRules{min: 1, max: 10, spare: 2,
		up:   autoscalerStepRules{},
		down: autoscalerStepRules{window: 300 * time.Second, period: 30 * time.Second, maxStep: 25, percent: true}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(autoscalerRules{}, autoscalerStepRules{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAutoscalerStep(t *testing.T) {
	up := autoscalerStepRules{maxStep: 4, period: 10 * time.Second}
	pct := autoscalerStepRules{maxStep: 25, percent: true, period: 30 * time.Second}
	cases := map[string]struct {
		current, target int32
		rules           autoscalerStepRules
		lastStep        time.Time
		want            int32
		wantNext        time.Time
	}{
		"no limit":                          {3, 50, autoscalerStepRules{}, time.Time{}, 50, time.Time{}},
		"limited to maxStep":                {3, 50, up, time.Time{}, 7, wpaT0.Add(10 * time.Second)},
		"within maxStep":                    {3, 5, up, time.Time{}, 5, time.Time{}},
		"within the period: held":           {3, 50, up, wpaT0.Add(-5 * time.Second), 3, wpaT0.Add(5 * time.Second)},
		"period over":                       {3, 50, up, wpaT0.Add(-10 * time.Second), 7, wpaT0.Add(10 * time.Second)},
		"percent down, rounded up":          {10, 0, pct, time.Time{}, 7, wpaT0.Add(30 * time.Second)},
		"percent of few is one":             {2, 0, pct, time.Time{}, 1, wpaT0.Add(30 * time.Second)},
		"no move":                           {5, 5, pct, wpaT0, 5, time.Time{}},
		"limited without period: a second":  {3, 50, autoscalerStepRules{maxStep: 4}, time.Time{}, 7, wpaT0.Add(time.Second)},
		"unlimited without period: at once": {3, 50, autoscalerStepRules{}, wpaT0.Add(-time.Second), 50, time.Time{}},
		"coalesced: a quarter second apart": {3, 50, autoscalerStepRules{}, wpaT0.Add(-100 * time.Millisecond), 3, wpaT0.Add(150 * time.Millisecond)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, next := autoscalerStep(tc.current, tc.target, tc.rules, tc.lastStep, wpaT0)
			if got != tc.want || !next.Equal(tc.wantNext) {
				t.Errorf("got %d next %s, want %d next %s", got, next, tc.want, tc.wantNext)
			}
		})
	}
}

// decideScenario runs decideReplicas over a timeline, as reconciles would, and returns the
// replicas after each.
type decideStep struct {
	after    time.Duration // since the previous step
	expected int           // the estimate's expected claims
	open     int32         // an open schedule's minimum
	want     int32
}

func runDecisions(t *testing.T, rules autoscalerRules, current int32, steps []decideStep) {
	t.Helper()
	var h autoscalerHistory
	var lastUp, lastDown time.Time
	now := wpaT0
	for i, s := range steps {
		now = now.Add(s.after)
		d := decideReplicas(rules, current, demand.Estimate{Expected: s.expected}, policy.OpenWindows{Minimum: s.open}, &h, lastUp, lastDown, now)
		if d.replicas > current {
			lastUp = now
		} else if d.replicas < current {
			lastDown = now
		}
		current = d.replicas
		if current != s.want {
			t.Fatalf("step %d (t+%s, expected %d, schedule %d): replicas %d, want %d", i, now.Sub(wpaT0), s.expected, s.open, current, s.want)
		}
	}
}

// Scale-up follows demand at once; scale-down waits for the stabilization window (the highest
// recommendation of the window holds), then goes by maxStep per period.
func TestDecideScalesUpAtOnceAndDownSlowly(t *testing.T) {
	spec := builders.MakeAutoscaler("a", "ns", "pool").Min(2).Max(100).TargetSpare(2).ScaleDown(60, "50%", 10).Obj().Spec
	runDecisions(t, autoscalerRulesOf(&spec), 2, []decideStep{
		{after: 0, expected: 0, want: 2},
		{after: time.Second, expected: 30, want: 32},              // a burst: at once, no step limit up
		{after: time.Second, expected: 0, want: 32},               // demand gone: 32 stood until now, held by the window
		{after: 59 * time.Second, expected: 0, want: 32},          // 59 s after 32 was last in force: still held
		{after: 2 * time.Second, expected: 0, want: 16},           // past the window: 50% of 32
		{after: 5 * time.Second, expected: 0, want: 16},           // within the period
		{after: 5 * time.Second, expected: 0, want: 8},            // next step
		{after: 10 * time.Second, expected: 0, want: 4},           // and the next
		{after: 10 * time.Second, expected: 0, want: 2},           // down to minReplicas
		{after: 10 * time.Second, expected: 5, want: 7},           // demand again: up at once
		{after: 0, expected: 40, want: 7},                         // more demand at the same moment: coalesced
		{after: 300 * time.Millisecond, expected: 40, want: 42},   // a quarter second later
		{after: 300 * time.Millisecond, expected: 200, want: 100}, // maxReplicas
	})
}

// A schedule's minimum applies at once, whatever the pacing, and the window it closes holds
// as a recommendation for the scale-down window.
func TestDecideHoldsTheScheduleMinimum(t *testing.T) {
	spec := builders.MakeAutoscaler("a", "ns", "pool").Min(1).Max(50).TargetSpare(1).ScaleUp(0, "2", 60).ScaleDown(30, "100%", 0).Obj().Spec
	runDecisions(t, autoscalerRulesOf(&spec), 1, []decideStep{
		{after: 0, expected: 0, want: 1},
		{after: time.Second, open: 20, want: 20}, // the window opens: the floor, unpaced
		{after: time.Second, open: 20, expected: 5, want: 20},
		{after: time.Second, expected: 0, want: 20},     // the window closed: held by scale-down's window
		{after: 31 * time.Second, expected: 0, want: 1}, // 100% per step
		{after: 30 * time.Second, expected: 9, want: 3}, // up by maxStep 2, a period after the last step up
		{after: time.Second, expected: 9, want: 3},      // within the period
		{after: 60 * time.Second, expected: 9, want: 5}, // the next step
	})
}

// A new leader starts its history with the pool's replicas: it does not scale down before a
// scale-down window has passed, though its demand estimate says less.
func TestDecideSeedsTheHistoryWithTheCurrentReplicas(t *testing.T) {
	spec := builders.MakeAutoscaler("a", "ns", "pool").Min(1).Max(50).ScaleDown(120, "100%", 0).Obj().Spec
	runDecisions(t, autoscalerRulesOf(&spec), 30, []decideStep{
		{after: 0, expected: 0, want: 30},
		{after: 119 * time.Second, expected: 0, want: 30},
		{after: 2 * time.Second, expected: 0, want: 2},
	})
}

// Bounds apply at once: a lowered maxReplicas is not paced by the scale-down behavior.
func TestDecideAppliesALoweredMaxAtOnce(t *testing.T) {
	a := builders.MakeAutoscaler("a", "ns", "pool").Min(1).Max(50).Obj()
	var h autoscalerHistory
	d := decideReplicas(autoscalerRulesOf(&a.Spec), 40, demand.Estimate{Expected: 38}, policy.OpenWindows{}, &h, time.Time{}, time.Time{}, wpaT0)
	if d.replicas != 40 {
		t.Fatalf("replicas %d, want 40", d.replicas)
	}
	a.Spec.MaxReplicas = 10
	d = decideReplicas(autoscalerRulesOf(&a.Spec), 40, demand.Estimate{Expected: 38}, policy.OpenWindows{}, &h, time.Time{}, time.Time{}, wpaT0.Add(time.Second))
	if d.replicas != 10 || d.reason != autoscalingv1alpha1.ReasonMaxReplicas {
		t.Errorf("after maxReplicas 10: %d (%s), want 10 (MaxReplicas)", d.replicas, d.reason)
	}
}

// The decision says when it can change with no event: the end of the scale-down hold, the
// end of a step's period, a schedule's next boundary.
func TestDecideSaysWhenToLookAgain(t *testing.T) {
	spec := builders.MakeAutoscaler("a", "ns", "pool").Min(1).Max(50).TargetSpare(0).ScaleDown(60, "100%", 0).Obj().Spec
	rules := autoscalerRulesOf(&spec)
	var h autoscalerHistory
	d := decideReplicas(rules, 1, demand.Estimate{Expected: 10}, policy.OpenWindows{}, &h, time.Time{}, time.Time{}, wpaT0)
	if d.replicas != 10 || !d.recheck.IsZero() {
		t.Fatalf("up: %d recheck %s, want 10 and nothing to wait for", d.replicas, d.recheck)
	}
	later := wpaT0.Add(5 * time.Second)
	boundary := wpaT0.Add(time.Hour)
	d = decideReplicas(rules, 10, demand.Estimate{}, policy.OpenWindows{Next: boundary}, &h, wpaT0, time.Time{}, later)
	// 10 stood until now (5 s): held until its second has left the 60 s window.
	if want := later.Add(61 * time.Second); d.replicas != 10 || !d.recheck.Equal(want) {
		t.Errorf("held: %d recheck %s, want 10 until %s", d.replicas, d.recheck, want)
	}
}
