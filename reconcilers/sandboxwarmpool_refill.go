package reconcilers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Refill after the burst, not during it. On a small control plane the API server's CPU
// decides claim latency: every replacement member a pool creates while claims arrive costs
// the API server a Sandbox create, a pod create, scheduling, the pod's status, the Sandbox's
// status, ... at the moment the claims need it for their own two writes. So a pool whose
// members claims are taking defers its replacements until claims stop arriving for
// RefillPolicy.QuietPeriod, then creates them at full speed; unless its ready members fall
// below RefillPolicy.LowWaterPercent of replicas, when it refills at once, as it always did.
// A pool that runs dry still cold-starts claims as before (the claim controller's grace and
// cold start do not change). spec.replicas keeps its meaning: the pool converges to it.

// Defaults of RefillPolicy, chosen for bursts: a burst's claims arrive milliseconds apart,
// and a pool keeps a quarter of its members for claims that arrive late in it.
const (
	DefaultRefillQuietPeriod     = time.Second
	DefaultRefillLowWaterPercent = 25
)

// RefillPolicy says when a pool creates replacements for members claims took.
type RefillPolicy struct {
	// QuietPeriod is how long after the last claim of a pool its replacements wait; 0 turns
	// deferral off (replacements go out at once).
	QuietPeriod time.Duration
	// LowWaterPercent: while fewer than this percentage of replicas are ready and unbound,
	// the pool refills at once, claims or not.
	LowWaterPercent int
}

// Events of a pool's refill deferral, one per transition (not per reconcile: events are API
// writes too).
const (
	EventRefillDeferred = "RefillDeferred"
	EventRefillResumed  = "RefillResumed"
)

// poolActivity records, per pool, when a claim last asked for one of its members: the claim
// controller writes it for every claim it serves or keeps waiting, the pool controller reads
// it. In memory, of this process only (claims and pools are reconciled by the same leader).
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

// refillDelay is how long pool's replacements wait under policy: 0 to create them now.
func refillDelay(policy RefillPolicy, lastClaim time.Time, claimed bool, now time.Time, members []*agentsv1beta1.Sandbox, replicas int) time.Duration {
	if policy.QuietPeriod <= 0 || !claimed {
		return 0
	}
	quietFor := now.Sub(lastClaim)
	if quietFor >= policy.QuietPeriod {
		return 0
	}
	ready := 0
	for _, m := range members {
		if meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady) {
			ready++
		}
	}
	if ready*100 < policy.LowWaterPercent*replicas {
		return 0 // below the low-water mark: claims would run dry
	}
	return policy.QuietPeriod - quietFor
}
