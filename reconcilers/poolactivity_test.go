package reconcilers

import (
	"testing"

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
