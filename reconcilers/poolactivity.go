package reconcilers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
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
}

func newPoolActivity() *poolActivity {
	return &poolActivity{last: map[types.NamespacedName]time.Time{}}
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
	a.mu.Unlock()
}
