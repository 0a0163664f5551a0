package demand

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	poolA = types.NamespacedName{Namespace: "ns", Name: "a"}
	poolB = types.NamespacedName{Namespace: "ns", Name: "b"}
	t0    = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
)

func newTestRecorder() (*Recorder, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(t0)
	return NewRecorder(clk), clk
}

func counts(r *Recorder, pool types.NamespacedName) [2]int {
	e := r.Estimate(pool)
	return [2]int{e.ShortWindowClaims, e.LongWindowClaims}
}

// An admitted claim counts at once, before the informer shows it, and wakes the pool's
// autoscalers.
func TestAdmittedCountsAtOnceAndWakesThePool(t *testing.T) {
	r, clk := newTestRecorder()
	var woken []types.NamespacedName
	r.SetNotify(func(nn types.NamespacedName) { woken = append(woken, nn) })
	r.Admitted(poolA, clk.Now())
	r.Admitted(poolA, clk.Now())
	r.Admitted(poolB, clk.Now())
	if diff := cmp.Diff([2]int{2, 2}, counts(r, poolA)); diff != "" {
		t.Errorf("pool a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]types.NamespacedName{poolA, poolA, poolB}, woken); diff != "" {
		t.Errorf("woken (-want +got):\n%s", diff)
	}
}

// The merge rule: the informer's create of a claim this process admitted (same admission
// time) confirms the arrival, it does not count it again; a create of a claim another
// replica admitted counts as a new arrival.
func TestCreatedConfirmsOwnAdmissionsAndCountsOthers(t *testing.T) {
	r, clk := newTestRecorder()
	mine := []time.Time{clk.Now(), clk.Now().Add(time.Millisecond), clk.Now().Add(2 * time.Millisecond)}
	clk.Step(10 * time.Millisecond)
	for _, at := range mine {
		r.Admitted(poolA, at)
	}
	theirs := clk.Now().Add(-time.Millisecond)
	for _, at := range mine {
		if r.Created(poolA, at) {
			t.Errorf("create at %s counted again: admitted here", at)
		}
	}
	if !r.Created(poolA, theirs) {
		t.Error("a claim another replica admitted was not counted")
	}
	if diff := cmp.Diff([2]int{4, 4}, counts(r, poolA)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Confirmed arrivals do not expire.
	clk.Step(PendingTTL + time.Second)
	if got := r.Estimate(poolA).LongWindowClaims; got != 4 {
		t.Errorf("after the pending TTL: %d claims in the long window, want 4", got)
	}
}

// An admitted claim the informer never shows (the create failed after admission, or the
// webhook was called again for it) stops counting after PendingTTL.
func TestUnconfirmedAdmissionsExpire(t *testing.T) {
	r, clk := newTestRecorder()
	r.Admitted(poolA, clk.Now())
	r.Admitted(poolA, clk.Now().Add(time.Millisecond))
	r.Created(poolA, clk.Now().Add(time.Millisecond))
	clk.Step(PendingTTL - time.Millisecond)
	if got := r.Estimate(poolA).LongWindowClaims; got != 2 {
		t.Fatalf("within the TTL: %d claims, want 2", got)
	}
	clk.Step(2 * time.Millisecond)
	if got := r.Estimate(poolA).LongWindowClaims; got != 1 {
		t.Errorf("past the TTL: %d claims, want the confirmed one", got)
	}
	// A create arriving after its pending arrival expired counts as new.
	if !r.Created(poolA, t0) {
		t.Error("a late create was not counted")
	}
}

// A new leader rebuilds the arrivals from the creates its informer delivers for the claims in
// its cache, in any order: those of the last LongWindow count at their admission times,
// older ones not at all.
func TestCreatesRebuildTheHistoryAfterAFailover(t *testing.T) {
	r, clk := newTestRecorder()
	clk.Step(LongWindow)
	now := clk.Now()
	ages := []time.Duration{LongWindow + time.Second, 5 * time.Second, time.Hour, 90 * time.Second, time.Second, 30 * time.Second, 9 * time.Second}
	for _, age := range ages {
		r.Created(poolA, now.Add(-age))
	}
	if diff := cmp.Diff([2]int{3, 5}, counts(r, poolA)); diff != "" {
		t.Errorf("short and long window (-want +got):\n%s", diff)
	}
}

// The rate planned with is the higher of the short and long windows' rates: a burst raises it
// at once, and it stays up for the long window after.
func TestRateFollowsTheFasterWindow(t *testing.T) {
	r, clk := newTestRecorder()
	r.startupFor(poolA, 2*time.Second)
	for i := range 50 {
		r.Admitted(poolA, clk.Now().Add(time.Duration(i)*time.Millisecond))
	}
	clk.Step(time.Second)
	e := r.Estimate(poolA)
	if e.Rate != 5 || e.Expected != 50 || e.StartupWindowClaims != 50 {
		t.Errorf("during the burst: rate %v, expected %d (%d in the last start-up), want 5/s (50 in 10 s) and the 50 that arrived within one 2 s start-up",
			e.Rate, e.Expected, e.StartupWindowClaims)
	}
	clk.Step(2 * time.Second)
	e = r.Estimate(poolA)
	if e.Rate != 5 || e.Expected != 10 || e.StartupWindowClaims != 0 {
		t.Errorf("a start-up after the burst: rate %v, expected %d (%d in the last start-up), want 5/s and 10 in 2 s", e.Rate, e.Expected, e.StartupWindowClaims)
	}
	clk.Step(ShortWindow)
	e = r.Estimate(poolA)
	if want := 50 / LongWindow.Seconds(); e.Rate != want || e.ShortWindowClaims != 0 {
		t.Errorf("after the short window: rate %v (%d in the short window), want the long window's %v", e.Rate, e.ShortWindowClaims, want)
	}
	clk.Step(LongWindow)
	if e := r.Estimate(poolA); e.Rate != 0 || e.Expected != 0 {
		t.Errorf("after the long window: %+v, want no demand", e)
	}
}

// startupFor gives pool one measured start-up time d.
func (r *Recorder) startupFor(pool types.NamespacedName, d time.Duration) {
	r.MemberReady(pool, "m", t0.Add(-d), t0)
}

func TestExpectedDuring(t *testing.T) {
	cases := map[string]struct {
		rate float64
		d    time.Duration
		want int
	}{
		"no demand":                        {0, 5 * time.Second, 0},
		"a tenth of a claim rounds down":   {0.02, 5 * time.Second, 0},
		"past a tenth rounds up":           {0.05, 5 * time.Second, 1},
		"whole":                            {3, 2 * time.Second, 6},
		"just past whole rounds down":      {3.04, 2 * time.Second, 6},
		"beyond the slack rounds up":       {3.1, 2 * time.Second, 7},
		"huge rates are bounded, not lost": {1e12, time.Hour, 2147483647},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ExpectedDuring(tc.rate, tc.d); got != tc.want {
				t.Errorf("ExpectedDuring(%v, %s) = %d, want %d", tc.rate, tc.d, got, tc.want)
			}
		})
	}
}

// Forget drops a pool's arrivals.
func TestForget(t *testing.T) {
	r, clk := newTestRecorder()
	r.Admitted(poolA, clk.Now())
	r.Forget(poolA)
	if got := r.Estimate(poolA).LongWindowClaims; got != 0 {
		t.Errorf("after Forget: %d claims", got)
	}
}

// A claim may name any pool: what the recorder holds of a pool that had no arrival in the long
// window, has nothing pending and no member measured is dropped, so tenants' claims naming
// pools that do not exist leave nothing behind. A measured pool stays until it is forgotten.
func TestPoolsWithNothingRecentAreDropped(t *testing.T) {
	r, clk := newTestRecorder()
	for i := range 1000 {
		r.Admitted(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("made-up-", i)}, clk.Now())
	}
	r.MemberReady(poolB, "m", clk.Now().Add(-time.Second), clk.Now())
	if got := len(r.pools); got != 1001 {
		t.Fatalf("%d pools held, want 1001", got)
	}
	clk.Step(sweepEvery + time.Second)
	r.Admitted(poolA, clk.Now())
	if got := len(r.pools); got != 2 {
		t.Errorf("%d pools held after a sweep, want the measured pool and the one that just had a claim", got)
	}
	r.Forget(poolB)
	if _, held := r.pools[poolB]; held {
		t.Error("a forgotten pool is still held")
	}
}

// Arrivals out of time order (another replica's, a new leader's listing) land in their
// buckets, and an unconfirmed one is uncounted from its own.
func TestArrivalsOutOfOrder(t *testing.T) {
	r, clk := newTestRecorder()
	clk.Step(time.Minute)
	now := clk.Now()
	for _, age := range []time.Duration{time.Second, 50 * time.Second, 20 * time.Second, 50 * time.Second, 5 * time.Second} {
		r.Created(poolA, now.Add(-age))
	}
	r.Admitted(poolA, now.Add(-15*time.Second))
	if diff := cmp.Diff([2]int{2, 6}, counts(r, poolA)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	clk.Step(PendingTTL)
	if diff := cmp.Diff([2]int{0, 5}, counts(r, poolA)); diff != "" {
		t.Errorf("after the unconfirmed arrival expired (-want +got):\n%s", diff)
	}
}
