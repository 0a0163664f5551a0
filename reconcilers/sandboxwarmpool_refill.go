package reconcilers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
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

// noteDeferral sends an event when the pool starts or stops deferring its refill.
func (r *warmPoolReconciler) noteDeferral(pool *extv1beta1.SandboxWarmPool, wait time.Duration, missing int) {
	nn := client.ObjectKeyFromObject(pool)
	_, was := r.deferring.Load(nn)
	switch {
	case wait > 0 && !was:
		r.deferring.Store(nn, true)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, EventRefillDeferred, "Refill",
				"Deferring %d replacement(s) while claims arrive; refilling once claims pause for %s", missing, r.Refill.QuietPeriod)
		}
	case wait == 0 && was:
		r.deferring.Delete(nn)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, EventRefillResumed, "Refill", "Refilling %d replacement(s)", missing)
		}
	}
}
