package trace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// step is one sync of the emulated HPA: at seconds after the first, the metric it reads
// (ok false: none yet) and, when status is set, the target's status.replicas (else its
// spec.replicas, which is always what the previous step decided).
type step struct {
	at       float64
	metric   float64
	noMetric bool
	status   *int32
}

func ptr(v int32) *int32 { return &v }

// The emulated HPA against the documented algorithm of autoscaling/v2 with its default
// behavior: min 2, max 100, a target of one claim a second per member.
func TestHPAFollowsTheDocumentedAlgorithm(t *testing.T) {
	cases := map[string]struct {
		start int32
		steps []step
		want  []int32
	}{
		"within the 10% tolerance the size is kept": {
			start: 10,
			steps: []step{{at: 0, metric: 10.9}, {at: 15, metric: 9.1}},
			want:  []int32{10, 10},
		},
		"beyond the tolerance it proposes ceil(metric / target)": {
			start: 10,
			steps: []step{{at: 0, metric: 11.5}},
			want:  []int32{12},
		},
		"within the tolerance of status.replicas it proposes status.replicas": {
			start: 10,
			steps: []step{{at: 0, metric: 5.2, status: ptr(5)}},
			want:  []int32{5},
		},
		"scale-up adds the larger of 100% and 4 members per 15 s": {
			start: 2,
			steps: []step{{at: 0, metric: 50}, {at: 15, metric: 50}, {at: 30, metric: 50}, {at: 45, metric: 50}, {at: 60, metric: 50}},
			// 50 claims a second is within 10% of 48 members: the last step keeps 48.
			want: []int32{6, 12, 24, 48, 48},
		},
		"a second scale-up within the period counts from the period's start": {
			start: 2,
			steps: []step{{at: 0, metric: 50}, {at: 5, metric: 50}, {at: 15, metric: 50}},
			want:  []int32{6, 6, 12},
		},
		"scale-up stops at maxReplicas": {
			start: 90,
			steps: []step{{at: 0, metric: 500}},
			want:  []int32{100},
		},
		"scale-down waits for the highest recommendation of the last 300 s": {
			start: 20,
			steps: []step{{at: 0, metric: 20}, {at: 15, metric: 5}, {at: 150, metric: 5}, {at: 299, metric: 5}, {at: 300, metric: 5}},
			want:  []int32{20, 20, 20, 20, 5},
		},
		"a new HPA has no history: its first scale-down is immediate, to minReplicas at most": {
			start: 10,
			steps: []step{{at: 0, metric: 0}},
			want:  []int32{2},
		},
		"a recommendation in between holds the scale-down at its level": {
			start: 20,
			steps: []step{{at: 0, metric: 20}, {at: 100, metric: 12}, {at: 300, metric: 3}, {at: 400, metric: 3}},
			want:  []int32{20, 20, 12, 3},
		},
		"no metric, no change": {
			start: 10,
			steps: []step{{at: 0, noMetric: true}},
			want:  []int32{10},
		},
		"a target below minReplicas is raised at once, metric or not": {
			start: 1,
			steps: []step{{at: 0, noMetric: true}},
			want:  []int32{2},
		},
		"a target above maxReplicas is lowered at once": {
			start: 150,
			steps: []step{{at: 0, metric: 1}},
			want:  []int32{100},
		},
		"a target at zero replicas is not scaled": {
			start: 0,
			steps: []step{{at: 0, metric: 50}},
			want:  []int32{0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewHPA(DefaultHPA(2, 100, 1))
			t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
			current := tc.start
			var got []int32
			for _, s := range tc.steps {
				status := current
				if s.status != nil {
					status = *s.status
				}
				d := h.Sync(t0.Add(time.Duration(s.at*float64(time.Second))), current, status, s.metric, !s.noMetric)
				current = d.Desired
				got = append(got, current)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replicas after each sync (-want +got):\n%s", diff)
			}
		})
	}
}

// The recipe's metric is late: a change in the claim rate reaches the HPA between Delay and
// Delay + one scrape interval after it happened, and not before two scrapes exist.
func TestRateMetricIsSeenLate(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	cfg := DefaultHPA(1, 10, 1)
	m := &RateMetric{Delay: cfg.Delay, Window: cfg.Window}
	// The counter stays at 0 until 60 s, then claims arrive at 3 a second; scraped every 15 s.
	counter := func(at float64) float64 { return 3 * max(at-60, 0) }
	for at := 0.0; at <= 300; at += cfg.Scrape.Seconds() {
		m.Observe(t0.Add(time.Duration(at*float64(time.Second))), counter(at))
	}
	read := func(at float64) (float64, bool) { return m.At(t0.Add(time.Duration(at * float64(time.Second)))) }
	if _, ok := read(30); ok {
		t.Error("a rate 30 s in, from one scrape old enough: want none")
	}
	cases := []struct {
		at   float64
		want float64
	}{
		{at: 45, want: 0},  // the scrapes at 0 and 15
		{at: 90, want: 0},  // 45 and 60: the step at 60 is not in yet
		{at: 104, want: 0}, // still 45 and 60
		{at: 105, want: 3}, // 60 and 75: 45 s after the step, Delay plus a scrape interval
		{at: 200, want: 3},
	}
	for _, c := range cases {
		got, ok := read(c.at)
		if !ok || got != c.want {
			t.Errorf("rate read at %g s = %g (%v), want %g", c.at, got, ok, c.want)
		}
	}
}

// An operator restart resets the counter: the increase is counted from zero, not negative.
func TestRateMetricCountsFromZeroAfterAReset(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	m := &RateMetric{Window: 15 * time.Second}
	for i, total := range []float64{100, 130, 15} {
		m.Observe(t0.Add(time.Duration(i)*15*time.Second), total)
	}
	if got, ok := m.At(t0.Add(30 * time.Second)); !ok || got != 1 {
		t.Errorf("rate across the reset = %g (%v), want 15 claims in 15 s = 1", got, ok)
	}
}

func TestHPAConfigValidate(t *testing.T) {
	if err := DefaultHPA(2, 10, 0.1).Validate(); err != nil {
		t.Errorf("the default recipe: %v", err)
	}
	for name, c := range map[string]HPAConfig{
		"min above max": DefaultHPA(5, 4, 0.1),
		"min of zero":   DefaultHPA(0, 4, 0.1),
		"no target":     DefaultHPA(1, 4, 0),
	} {
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
