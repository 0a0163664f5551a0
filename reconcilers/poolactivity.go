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
	// inFlight are, per pool, the claims served (bound, or given a Sandbox of their own) and
	// not Ready yet, with when they were served; inFlightPool is the pool of each.
	inFlight     map[types.NamespacedName]map[types.NamespacedName]time.Time
	inFlightPool map[types.NamespacedName]types.NamespacedName
	// unmet are the claims of inFlight that found no ready member of their pool to take
	// (shortfall).
	unmet map[types.NamespacedName]struct{}
}

// Claims still starting count as claims arriving. A claim asks for a member once (or a few
// times while it waits for one) and is then served in milliseconds, while its Sandbox may take
// seconds to be Ready: a burst of 300 claims was served within two seconds and Ready within
// ten, and the second after the last was served passed for a pause, in which the pool's
// refill went out at full speed and the first bursts' bookkeeping came due, among the claims
// still starting. A claim served longer ago than maxInFlight no longer counts (one that never
// becomes Ready must not hold its pool's refill back for ever).
const maxInFlight = 30 * time.Second

// wakePoolBuffer bounds the pool wake-ups in flight; one left out has its pool reconciled
// by its members' events anyway.
const wakePoolBuffer = 256

func newPoolActivity() *poolActivity {
	return &poolActivity{
		last:         map[types.NamespacedName]time.Time{},
		unserved:     map[types.NamespacedName]map[types.NamespacedName]struct{}{},
		unservedPool: map[types.NamespacedName]types.NamespacedName{},
		wakePool:     make(chan event.GenericEvent, wakePoolBuffer),
		inFlight:     map[types.NamespacedName]map[types.NamespacedName]time.Time{},
		inFlightPool: map[types.NamespacedName]types.NamespacedName{},
		unmet:        map[types.NamespacedName]struct{}{},
	}
}

// claimServed records that claim of pool was served at now and is not Ready yet; unmet says
// it found no ready member to take: it took one still starting, or was cold-started for want
// of one (shortfall).
func (a *poolActivity) claimServed(pool, claim types.NamespacedName, now time.Time, unmet bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claimReadyLocked(claim)
	a.dropUnservedLocked(claim) // served: it waits no more, and counts once in shortfall
	if a.inFlight[pool] == nil {
		a.inFlight[pool] = map[types.NamespacedName]time.Time{}
	}
	a.inFlight[pool][claim] = now
	a.inFlightPool[claim] = pool
	if unmet {
		a.unmet[claim] = struct{}{}
	}
}

// shortfall is how many claims of pool the refill is short of: those waiting for a member
// (waitingClaims) and those that found no ready one (shortfall), read together, so that a
// claim moving from one to the other in between is not counted twice, or not at all.
func (a *poolActivity) shortfall(pool types.NamespacedName, now time.Time) int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.unserved[pool]) + a.unmetLocked(pool, now)
}

// unmetLocked is how many claims of pool found no ready member to take (took one starting, or
// were cold-started for want of one) and are not Ready yet (served within maxInFlight of now):
// the pool's shortfall under the traffic now, in claims (startingRoom); a.mu held.
func (a *poolActivity) unmetLocked(pool types.NamespacedName, now time.Time) int {
	n := 0
	for claim, at := range a.inFlight[pool] {
		if _, ok := a.unmet[claim]; ok && now.Sub(at) < maxInFlight {
			n++
		}
	}
	return n
}

// claimReady records that claim is no longer starting: Ready, or gone.
func (a *poolActivity) claimReady(claim types.NamespacedName) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claimReadyLocked(claim)
}

func (a *poolActivity) claimReadyLocked(claim types.NamespacedName) {
	pool, ok := a.inFlightPool[claim]
	if !ok {
		return
	}
	delete(a.inFlightPool, claim)
	delete(a.inFlight[pool], claim)
	delete(a.unmet, claim)
	if len(a.inFlight[pool]) == 0 {
		delete(a.inFlight, pool)
	}
}

// startingLocked reports whether a claim of pool served within maxInFlight of now is not
// Ready yet.
func (a *poolActivity) startingLocked(pool types.NamespacedName, now time.Time) bool {
	for _, at := range a.inFlight[pool] {
		if now.Sub(at) < maxInFlight {
			return true
		}
	}
	return false
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

// quietFor is how long it has been since a claim of any pool last asked, none if a claim is
// still starting; ok is false when none ever did (or a is nil: no claim controller runs).
func (a *poolActivity) quietFor(now time.Time) (d time.Duration, ok bool) {
	if a == nil {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.any.IsZero() {
		return 0, false
	}
	for pool := range a.inFlight {
		if a.startingLocked(pool, now) {
			return 0, true
		}
	}
	return now.Sub(a.any), true
}

// lastClaim is when a claim of pool last asked for a member, now while one is still starting;
// ok is false when none ever did.
func (a *poolActivity) lastClaim(pool types.NamespacedName, now time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.last[pool]
	if ok && a.startingLocked(pool, now) {
		return now, true
	}
	return t, ok
}

func (a *poolActivity) forget(pool types.NamespacedName) {
	a.mu.Lock()
	delete(a.last, pool)
	for claim := range a.unserved[pool] {
		delete(a.unservedPool, claim)
	}
	delete(a.unserved, pool)
	for claim := range a.inFlight[pool] {
		delete(a.inFlightPool, claim)
		delete(a.unmet, claim)
	}
	delete(a.inFlight, pool)
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
