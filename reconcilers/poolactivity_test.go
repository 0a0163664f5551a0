package reconcilers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A pool's waiting claims always have one watcher while any waits: a watcher that stops
// waiting without having seen the pause (its bound came, it was deleted) hands the watch to
// a claim it wakes; one that saw the pause wakes them all.
func TestPauseWatcherHandsOver(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ns", Name: "pool"}
	c1, c2, c3 := types.NamespacedName{Namespace: "ns", Name: "c1"}, types.NamespacedName{Namespace: "ns", Name: "c2"}, types.NamespacedName{Namespace: "ns", Name: "c3"}
	a := newPoolActivity()

	if !a.awaitPause(pool, c1) || a.awaitPause(pool, c2) || a.awaitPause(pool, c3) {
		t.Fatalf("want c1 the watcher and c2, c3 asleep")
	}
	woken := a.stopWaiting(pool, c1, false) // c1's bound came first
	if len(woken) != 1 || (woken[0] != c2 && woken[0] != c3) {
		t.Fatalf("the watcher stopped without the pause: woke %v, want one of c2, c3", woken)
	}
	next := woken[0]
	if !a.awaitPause(pool, next) {
		t.Errorf("the woken claim %s does not watch", next)
	}
	other := c2
	if next == c2 {
		other = c3
	}
	if got := a.claimGone(other); got != nil {
		t.Errorf("a sleeping claim deleted: woke %v, want no one", got)
	}
	if got := a.claimGone(next); got != nil {
		t.Errorf("the last waiting claim deleted: woke %v, want no one", got)
	}

	a.awaitPause(pool, c1)
	a.awaitPause(pool, c2)
	a.awaitPause(pool, c3)
	woken = a.stopWaiting(pool, c1, true)
	if got := sets.New(woken...); len(woken) != 2 || !got.Equal(sets.New(c2, c3)) {
		t.Errorf("the watcher saw the pause: woke %v, want c2 and c3", woken)
	}
	if !a.awaitPause(pool, c2) {
		t.Errorf("after the pause the next claim to wait watches")
	}
}

// The claims waiting for a member of a pool are counted per pool, each once, until served,
// gone or waiting on another pool; the pool is woken when a claim starts waiting, not again
// while it waits, and a deleted pool forgets its waiting claims.
func TestClaimsWaitingForAMember(t *testing.T) {
	p1, p2 := types.NamespacedName{Namespace: "ns", Name: "p1"}, types.NamespacedName{Namespace: "ns", Name: "p2"}
	c1, c2 := types.NamespacedName{Namespace: "ns", Name: "c1"}, types.NamespacedName{Namespace: "ns", Name: "c2"}
	a := newPoolActivity()
	wakes := func() []string {
		var got []string
		for {
			select {
			case e := <-a.wakePool:
				got = append(got, e.Object.GetName())
			default:
				return got
			}
		}
	}

	a.claimWaits(p1, c1)
	a.claimWaits(p1, c1) // again: still one
	a.claimWaits(p1, c2)
	if n := a.waitingClaims(p1); n != 2 {
		t.Errorf("waiting claims of p1 = %d, want 2", n)
	}
	if diff := cmp.Diff([]string{"p1", "p1"}, wakes()); diff != "" {
		t.Errorf("pool wake-ups, one per claim that starts waiting (-want +got):\n%s", diff)
	}
	a.claimWaits(p2, c2) // c2 now waits on p2
	if a.waitingClaims(p1) != 1 || a.waitingClaims(p2) != 1 {
		t.Errorf("after c2 moved: p1 %d, p2 %d; want 1, 1", a.waitingClaims(p1), a.waitingClaims(p2))
	}
	a.claimDone(c1)
	a.claimDone(c1) // again: nothing
	if n := a.waitingClaims(p1); n != 0 {
		t.Errorf("waiting claims of p1 after c1 was served = %d, want 0", n)
	}
	a.claimWaits(p1, c1)
	if diff := cmp.Diff([]string{"p2", "p1"}, wakes()); diff != "" {
		t.Errorf("pool wake-ups after c2 moved and c1 waits again (-want +got):\n%s", diff)
	}
	a.forget(p1)
	if n := a.waitingClaims(p1); n != 0 {
		t.Errorf("a deleted pool counts %d waiting claims, want 0", n)
	}
	var nilActivity *poolActivity
	nilActivity.claimWaits(p1, c1) // no claim controller: nothing to record
	if n := nilActivity.waitingClaims(p1); n != 0 {
		t.Errorf("without a claim controller, %d waiting claims", n)
	}
}

// A claim served but not Ready yet counts as a claim arriving: its pool has no pause while it
// starts, however long ago it asked, until it is Ready, gone, or served longer ago than
// maxInFlight.
func TestClaimsStillStartingAreNoPause(t *testing.T) {
	p1, p2 := types.NamespacedName{Namespace: "ns", Name: "p1"}, types.NamespacedName{Namespace: "ns", Name: "p2"}
	c1 := types.NamespacedName{Namespace: "ns", Name: "c1"}
	a := newPoolActivity()
	asked := planNow.Add(-5 * time.Second)
	a.touch(p1, asked)
	a.touch(p2, asked)
	a.claimServed(p1, c1, asked, false)

	if last, _ := a.lastClaim(p1, planNow); !last.Equal(planNow) {
		t.Errorf("p1 with a claim starting: last claim at %s, want now", last)
	}
	if last, _ := a.lastClaim(p2, planNow); !last.Equal(asked) {
		t.Errorf("p2, no claim starting: last claim at %s, want when it asked", last)
	}
	if quiet, _ := a.quietFor(planNow); quiet != 0 {
		t.Errorf("a claim starting: quiet for %s, want 0", quiet)
	}
	if last, _ := a.lastClaim(p1, asked.Add(maxInFlight)); !last.Equal(asked) {
		t.Errorf("a claim starting for maxInFlight: last claim at %s, want when it asked", last)
	}
	a.claimReady(c1)
	if last, _ := a.lastClaim(p1, planNow); !last.Equal(asked) {
		t.Errorf("its claim Ready: last claim at %s, want when it asked", last)
	}
	if quiet, _ := a.quietFor(planNow); quiet != 5*time.Second {
		t.Errorf("no claim starting: quiet for %s, want 5s", quiet)
	}
}

// A claim that waited for a member and then took one starting is short once, not twice.
func TestShortfallCountsAClaimOnce(t *testing.T) {
	p1 := types.NamespacedName{Namespace: "ns", Name: "p1"}
	c1, c2 := types.NamespacedName{Namespace: "ns", Name: "c1"}, types.NamespacedName{Namespace: "ns", Name: "c2"}
	a := newPoolActivity()
	a.claimWaits(p1, c1)
	a.claimWaits(p1, c2)
	if n := a.shortfall(p1, planNow); n != 2 {
		t.Errorf("two claims waiting: shortfall %d, want 2", n)
	}
	a.claimServed(p1, c1, planNow, true) // took a starting member; its wait ends later (claimDone)
	if n := a.shortfall(p1, planNow); n != 2 {
		t.Errorf("one waiting, one served from a starting member: shortfall %d, want 2", n)
	}
	if n := a.waitingClaims(p1); n != 1 {
		t.Errorf("a served claim still waits: %d waiting, want 1", n)
	}
	a.claimDone(c1)
	a.claimServed(p1, c2, planNow, false)
	if n := a.shortfall(p1, planNow); n != 1 {
		t.Errorf("c1 starting, c2 served ready: shortfall %d, want 1", n)
	}
	if n := (*poolActivity)(nil).shortfall(p1, planNow); n != 0 {
		t.Errorf("no activity: shortfall %d, want 0", n)
	}
}

// The claims a pool fell short of count while they start: not once Ready, not once served
// longer ago than maxInFlight, not in another pool, not once the pool is gone.
func TestUnmetClaimsCountWhileTheyStart(t *testing.T) {
	p1, p2 := types.NamespacedName{Namespace: "ns", Name: "p1"}, types.NamespacedName{Namespace: "ns", Name: "p2"}
	c1, c2, c3 := types.NamespacedName{Namespace: "ns", Name: "c1"}, types.NamespacedName{Namespace: "ns", Name: "c2"}, types.NamespacedName{Namespace: "ns", Name: "c3"}
	a := newPoolActivity()
	a.claimServed(p1, c1, planNow, true)
	a.claimServed(p1, c2, planNow, true)
	a.claimServed(p2, c3, planNow, true)
	if n := a.unmetClaims(p1, planNow); n != 2 {
		t.Errorf("p1: %d unmet claims, want 2", n)
	}
	a.claimReady(c1)
	if n := a.unmetClaims(p1, planNow); n != 1 {
		t.Errorf("p1, c1 Ready: %d unmet claims, want 1", n)
	}
	if n := a.unmetClaims(p1, planNow.Add(maxInFlight)); n != 0 {
		t.Errorf("p1, c2 served maxInFlight ago: %d unmet claims, want 0", n)
	}
	a.claimServed(p1, c2, planNow, false) // served again, from a member
	if n := a.unmetClaims(p1, planNow); n != 0 {
		t.Errorf("p1, c2 served from a member: %d unmet claims, want 0", n)
	}
	a.forget(p2)
	if n := a.unmetClaims(p2, planNow); n != 0 || len(a.unmet) != 0 {
		t.Errorf("p2 gone: %d unmet claims (%d recorded), want 0", n, len(a.unmet))
	}
	// Without a claim controller (a nil activity): TestShortfallCountsAClaimOnce.
}

// unmetClaims is how many claims of pool found no ready member to take and are not Ready yet
// (poolActivity.unmetLocked), read under the lock: the tests' view of shortfall's second part.
func (a *poolActivity) unmetClaims(pool types.NamespacedName, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unmetLocked(pool, now)
}
