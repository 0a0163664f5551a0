package reconcilers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
)

// What claims tell the other controllers about their arrival, so that work that can wait
// (a pool's refill, a bound Sandbox's bookkeeping) waits until they pause.

// poolActivity records, per pool, when a claim last asked for one of its members: the claim
// controller writes it for every claim it serves or keeps waiting, the pool controller (and the
// Sandbox controller, through quietFor) reads it. In memory, of this process only (claims and pools are reconciled by the same leader).
type poolActivity struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
	// any is when a claim of any pool last asked.
	any time.Time
	// waiters are, per pool, the bound claims whose bookkeeping waits for a pause.
	waiters map[types.NamespacedName]*pauseWaiters
	// unserved are, per pool, the claims that found no member to take and wait for one;
	// unservedPool is the pool each of them waits on.
	unserved     map[types.NamespacedName]map[types.NamespacedName]struct{}
	unservedPool map[types.NamespacedName]types.NamespacedName
	// wakePool brings a pool to its controller when one of its claims starts waiting for a
	// member: its wake-ups for members leaving wait to coalesce (memberReadinessDelay).
	wakePool chan event.GenericEvent
}

// wakePoolBuffer bounds the pool wake-ups in flight; one left out has its pool reconciled
// by its members' events anyway.
const wakePoolBuffer = 256

func newPoolActivity() *poolActivity {
	return &poolActivity{
		last:         map[types.NamespacedName]time.Time{},
		unserved:     map[types.NamespacedName]map[types.NamespacedName]struct{}{},
		unservedPool: map[types.NamespacedName]types.NamespacedName{},
		wakePool:     make(chan event.GenericEvent, wakePoolBuffer),
	}
}

// A claim that finds no member to take waits for one (DefaultColdStartGrace), and the pool
// must not defer its refill meanwhile: waiting for claims to pause is for a pool that still
// has members to give, and one whose claims wait has none. Under bursts that come back to
// back claims never pause, and a waiting claim would otherwise wait out its grace for
// members the pool holds back, and then start one of its own beside them.

// claimWaits records that claim waits for a member of pool; the pool's controller is woken
// when the claim starts waiting (its queue holds the pool once however many claims wake it),
// to start a member for it.
func (a *poolActivity) claimWaits(pool, claim types.NamespacedName) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if prev, ok := a.unservedPool[claim]; ok && prev != pool {
		a.dropUnservedLocked(claim)
	}
	if a.unserved[pool] == nil {
		a.unserved[pool] = map[types.NamespacedName]struct{}{}
	}
	_, already := a.unserved[pool][claim]
	a.unserved[pool][claim] = struct{}{}
	a.unservedPool[claim] = pool
	a.mu.Unlock()
	if !already {
		select {
		case a.wakePool <- event.GenericEvent{Object: &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name}}}:
		default:
		}
	}
}

// claimDone records that claim no longer waits for a member (served, cold-started or gone).
func (a *poolActivity) claimDone(claim types.NamespacedName) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.dropUnservedLocked(claim)
	a.mu.Unlock()
}

func (a *poolActivity) dropUnservedLocked(claim types.NamespacedName) {
	pool, ok := a.unservedPool[claim]
	if !ok {
		return
	}
	delete(a.unservedPool, claim)
	delete(a.unserved[pool], claim)
	if len(a.unserved[pool]) == 0 {
		delete(a.unserved, pool)
	}
}

// waitingClaims is how many claims wait for a member of pool.
func (a *poolActivity) waitingClaims(pool types.NamespacedName) int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.unserved[pool])
}

func (a *poolActivity) touch(pool types.NamespacedName, now time.Time) {
	a.mu.Lock()
	a.last[pool] = now
	a.any = now
	a.mu.Unlock()
}

// quietFor is how long it has been since a claim of any pool last asked; ok is false when
// none ever did (or a is nil: no claim controller runs).
func (a *poolActivity) quietFor(now time.Time) (d time.Duration, ok bool) {
	if a == nil {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.any.IsZero() {
		return 0, false
	}
	return now.Sub(a.any), true
}

func (a *poolActivity) lastClaim(pool types.NamespacedName) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.last[pool]
	return t, ok
}

func (a *poolActivity) forget(pool types.NamespacedName) {
	a.mu.Lock()
	delete(a.last, pool)
	for claim := range a.unserved[pool] {
		delete(a.unservedPool, claim)
	}
	delete(a.unserved, pool)
	a.mu.Unlock()
}

// Bound claims whose bookkeeping waits for their pool's claims to pause (recordSandboxName).
// Under steady traffic claims never pause, and each waiting claim looking again every quiet
// period would cost a reconcile a second per claim for nothing. So one waiting claim per pool
// looks, the watcher; the others sleep until their own bound (MaxBookkeepingDelay after
// Ready), and are woken when the watcher sees the pause, or one of them is woken to watch
// when the watcher stops waiting without having seen it (its bound came, or it was deleted).
type pauseWaiters struct {
	watcher types.NamespacedName
	claims  map[types.NamespacedName]struct{}
}

// awaitPause records that claim's bookkeeping waits for pool's claims to pause, and reports
// whether claim is the one that looks for the pause.
func (a *poolActivity) awaitPause(pool, claim types.NamespacedName) (watcher bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiters == nil {
		a.waiters = map[types.NamespacedName]*pauseWaiters{}
	}
	w := a.waiters[pool]
	if w == nil {
		w = &pauseWaiters{claims: map[types.NamespacedName]struct{}{}}
		a.waiters[pool] = w
	}
	w.claims[claim] = struct{}{}
	if w.watcher == (types.NamespacedName{}) {
		w.watcher = claim
	}
	return w.watcher == claim
}

// stopWaiting records that claim's bookkeeping no longer waits, and returns the claims of
// its pool to wake: every other waiting claim when claim saw the pause; else, when claim was
// the watcher, one of them to watch in its place.
func (a *poolActivity) stopWaiting(pool, claim types.NamespacedName, sawPause bool) []types.NamespacedName {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.waiters[pool]
	if w == nil {
		return nil
	}
	delete(w.claims, claim)
	var wake []types.NamespacedName
	switch {
	case sawPause:
		for c := range w.claims {
			wake = append(wake, c)
		}
		clear(w.claims)
		w.watcher = types.NamespacedName{}
	case w.watcher == claim:
		w.watcher = types.NamespacedName{}
		for c := range w.claims {
			w.watcher = c
			wake = append(wake, c)
			break
		}
	}
	if len(w.claims) == 0 {
		delete(a.waiters, pool)
	}
	return wake
}

// claimGone stops claim's waiting in whichever pool it waited (the claim was deleted), and
// returns the claim to wake in its place, if it watched.
func (a *poolActivity) claimGone(claim types.NamespacedName) []types.NamespacedName {
	a.mu.Lock()
	var pool types.NamespacedName
	found := false
	for p, w := range a.waiters {
		if _, ok := w.claims[claim]; ok {
			pool, found = p, true
			break
		}
	}
	a.mu.Unlock()
	if !found {
		return nil
	}
	return a.stopWaiting(pool, claim, false)
}
