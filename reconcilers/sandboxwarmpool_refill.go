package reconcilers

import (
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
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
//
// Steady traffic never pauses, so a deferral is bounded: a pool's replacements wait at most
// RefillPolicy.MaxDeferral from the first one deferred, then go out. Without the bound a pool
// under steady claims refilled only at its low-water mark: drained to a quarter of its
// replicas, then a refill of three quarters at once, which slowed the claims arriving
// meanwhile (measured at 10 claims/s: pool ready 100 → 23 → 73, claim p99 870 ms). Claims
// that outlast the bound are steady traffic, not a burst: from then on the pool replaces each
// member as it leaves, until claims pause for the quiet period, when the next claims start a
// deferral again. So are claims that drain the pool to its low-water mark before the bound:
// the low-water refill spends the deferral. Restarting the deferral at every bound instead
// made a cycle of its own: drained for MaxDeferral, then the whole backlog at once (measured
// at 10 claims/s into a pool of 50: ready members down to 2 every 10 s, claim p50 2.4 × the
// floor's, p99 3.4 ×, the slow windows those of the refills).

// Once the deferral is over and claims still come (it reached its bound, or the low-water
// mark, or a claim waits for a member), the refill is bounded rather than sent all at once:
// at most RefillPolicy.MaxStartingPercent of replicas are being placed (members not Ready
// whose pod is not on a node yet, startingRoom) at a time, or, if more, as many as claims wait
// for a member or found no ready one (took one starting, or were cold-started for want of one)
// and are not Ready yet; as members become Ready, or claims take them starting, the pool
// starts more.
// Bursts that come back to back never pause: the public project's rapid-burst recipe (bursts
// of 300 claims at 300/s into a pool of 600, each waited on until Ready) drained the pool in
// its second burst, which sent the whole backlog at once, 600 creates, then 300 more for the
// members the third burst's claims took while starting: 893 Sandbox creates in that burst's
// window against 334 pods the Sandbox controller could start in it, every create an
// admission call and a write taken from the claims. Bounded, the pool starts members about as
// fast as they come up and claims take them; once claims pause it refills at full speed
// again.

// Defaults of RefillPolicy, chosen for bursts: a burst's claims arrive milliseconds apart,
// and a pool keeps a quarter of its members for claims that arrive late in it.
const (
	DefaultRefillQuietPeriod     = time.Second
	DefaultRefillLowWaterPercent = 25
	// DefaultRefillMaxDeferral outlasts a burst (300 claims at 300/s are served within 3–6 s
	// on two cores) and still bounds what steady traffic defers.
	DefaultRefillMaxDeferral = 10 * time.Second
	// DefaultRefillMaxStartingPercent lets a pool of 600 start 60 members at a time while
	// claims keep coming.
	DefaultRefillMaxStartingPercent = 10
)

// RefillPolicy says when a pool creates replacements for members claims took.
type RefillPolicy struct {
	// QuietPeriod is how long after the last claim of a pool its replacements wait; 0 turns
	// deferral off (replacements go out at once).
	QuietPeriod time.Duration
	// LowWaterPercent: while fewer than this percentage of replicas are ready and unbound,
	// the pool refills at once, claims or not.
	LowWaterPercent int
	// MaxDeferral bounds a deferral: replacements wait at most this long from the first one
	// deferred, claims pausing or not; 0 leaves it unbounded. It bounds the claims' deferred
	// bookkeeping (their sandbox-name annotation) the same way, from the claim's Ready.
	MaxDeferral time.Duration
	// MaxStartingPercent bounds a refill while claims keep coming: at most this percentage
	// of replicas (at least one, and at least as many as claims wait for a member or found no
	// ready one and are not Ready yet) are being placed (created, their pod not on a node
	// yet) at a time; 0 leaves it unbounded. Once claims pause, nothing bounds it.
	MaxStartingPercent int
}

// Events of a pool's refill deferral, one per transition (not per reconcile: events are API
// writes too).
const (
	EventRefillDeferred = "RefillDeferred"
	EventRefillResumed  = "RefillResumed"
)

// refillDelay is how long pool's replacements wait under policy: 0 to create them now.
// deferredSince is when the pool's current deferral began; zero when none is under way.
func refillDelay(policy RefillPolicy, lastClaim time.Time, claimed bool, now time.Time, members []*agentsv1beta1.Sandbox, replicas int, deferredSince time.Time) time.Duration {
	wait := quietWait(policy, lastClaim, claimed, now, members, replicas)
	return boundDeferral(wait, policy.MaxDeferral, deferredSince, now)
}

// boundDeferral cuts wait to what is left of limit from since; since zero or limit 0 leave
// it.
func boundDeferral(wait, limit time.Duration, since, now time.Time) time.Duration {
	if wait <= 0 || limit <= 0 || since.IsZero() {
		return wait
	}
	return min(wait, max(0, limit-now.Sub(since)))
}

// quietWait is how long pool's replacements wait for claims to pause: 0 to create them now.
func quietWait(policy RefillPolicy, lastClaim time.Time, claimed bool, now time.Time, members []*agentsv1beta1.Sandbox, replicas int) time.Duration {
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

// paceCreates says how many of the plan's creates to send now (at most MaxBatchSize, as many
// as the refill rate grants) and how long the rest wait: deferred, for the quiet period of
// RefillPolicy or the replenish hold, or paced, for the next token of the refill rate. It
// looks at the replenish hold on every reconcile, creates or not, to keep its count current.
// placed says whether a member's pod is on a node.
func (r *warmPoolReconciler) paceCreates(pool types.NamespacedName, plan poolPlan, members []*agentsv1beta1.Sandbox, replicas int,
	now time.Time, placed func(*agentsv1beta1.Sandbox) bool) (create int, deferred, paced time.Duration) {
	hold := r.pacing.replenishHold(pool, r.WarmPool.ReplenishDelay, plan.active, replicas, now)
	growth := r.pacing.grown(pool, replicas, plan.create)
	if plan.create == 0 {
		return 0, 0, 0
	}
	if growth > 0 {
		// Members the pool gained by a raise of its replicas go out now, deferral or not: they
		// are capacity asked for ahead of demand (sandboxwarmpool_growth.go).
		create, paced = r.pacing.take(pool, r.WarmPool.MaxRefillRate, min(growth, r.WarmPool.MaxBatchSize), now)
		r.pacing.grew(pool, create)
		return create, 0, paced
	}
	last, claimed := r.activity.lastClaim(pool, now)
	var since time.Time
	if v, ok := r.deferredSince.Load(pool); ok {
		since = v.(time.Time)
	}
	wait := refillDelay(r.Refill, last, claimed, now, members, replicas, since)
	if r.activity.waitingClaims(pool) > 0 {
		// Claims wait for a member and found none to take: the pool has run dry under
		// traffic, as at its low-water mark, and refills now (poolActivity.claimWaits).
		wait = 0
	}
	switch {
	case !claimed || now.Sub(last) >= r.Refill.QuietPeriod:
		// Claims paused: the next ones start a deferral of their own.
		r.deferredSince.Delete(pool)
	case wait > 0 && since.IsZero():
		r.deferredSince.Store(pool, now)
	case wait == 0 && !since.IsZero() && r.Refill.MaxDeferral > 0 && now.Sub(since) < r.Refill.MaxDeferral:
		// Claims keep coming and the pool fell to its low-water mark before the bound: steady
		// traffic, as when a deferral outlasts its bound. The deferral is spent: from here on
		// each member that leaves is replaced at once, until claims pause. Deferring again as
		// soon as the refill lifted the pool above the mark drained it to the mark again and
		// again, each time followed by a refill of three quarters of the pool at once (at 10
		// claims/s into a pool of 50: at 4, 8 and 11 s, each slowing the claims of the next
		// second to 450–850 ms, the slowest 3% of the run).
		r.deferredSince.Store(pool, now.Add(-r.Refill.MaxDeferral))
	}
	// Past its bound, a deferral stays on record while claims keep coming: boundDeferral then
	// lets the replacements out, one for each member that leaves, within startingRoom.
	if deferred = max(wait, hold); deferred > 0 {
		return 0, deferred, 0
	}
	want := min(plan.create, r.WarmPool.MaxBatchSize)
	if claimed && now.Sub(last) < r.Refill.QuietPeriod {
		short := r.activity.shortfall(pool, now)
		room := startingRoom(r.Refill.MaxStartingPercent, replicas, members, short, placed)
		if room <= 0 {
			// The members being started bring the pool back as they become Ready or are
			// taken; this is in case claims pause first.
			return 0, 0, r.Refill.QuietPeriod
		}
		want = min(want, room)
	}
	create, paced = r.pacing.take(pool, r.WarmPool.MaxRefillRate, want, now)
	return create, 0, paced
}

// startingRoom is how many more members a pool may start while claims keep coming:
// percent of replicas (at least one, at least short: the claims waiting for a member, and
// those that found no ready one, took one starting or were cold-started for want of one, and
// are not Ready yet) less the members being placed now. percent 0 bounds nothing.
//
// The bound is for members no claim may need; short counts claims that needed one and found
// none ready. A tenth of the replicas per placement time is a rate, and steady traffic above
// it drained the pool for good: every claim it missed was cold-started, the same create and
// pod as a member but on the claim path, whose priority puts it ahead of the members being
// placed in the Sandbox controller's queue, so they were placed later still and the next
// claims missed them too (overload scenario, 30 claims/s into a pool of 50, fast pods: the
// pool 0 ready of 0–3 members from its 7th second, 38.5% of the claims warm, p99 8.2 s, 87
// creates shed). A cold start a member would have spared is no work the bound saves: the
// member goes to a claim after it, which then starts no Sandbox of its own. Counting the
// cold-started claims alone held the pool at about half of them: as many members placed as
// claims cold-starting, so about as many claims warm as cold (54% warm, p99 4.8 s); counting
// the claims that took a member starting too lets the refill follow all the claims it did not
// have ready (56% warm, p99 1.2 s, none shed; the bound off: 84% warm, p99 2.5 s). Once
// members are ready for the claims again, short falls as those claims become Ready, and the
// bound is back.
//
// Being placed is the part of a start that is the API server's work, and so competes with the
// claims: the Sandbox, its pod, the pod's binding, until the pod is on a node.
// A member whose pod is on a node waits for its kubelet (the image, the container, the
// readiness probe): seconds on a real cluster, a few status writes, nothing the claims wait
// behind. Counting those too held a pool's refill to percent of replicas per start-up time:
// on the realistic profile (2 s median, 8 s tail) a pool of 108 an autoscaler sized under a
// day's steady claims kept 11 starting at a time and 15 of its 108 members, and served 86%
// of its claims warm.
func startingRoom(percent, replicas int, members []*agentsv1beta1.Sandbox, short int, placed func(*agentsv1beta1.Sandbox) bool) int {
	if percent <= 0 {
		return math.MaxInt
	}
	limit := max(1, short, (percent*replicas+99)/100)
	for _, m := range members {
		// placed last: it may read the member's pod, and most members are Ready.
		if !meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady) && !memberFailed(m) && !placed(m) {
			limit-- // being placed: its start is still the API server's work
		}
	}
	return limit
}

// statusPlaced reports whether a member's status names a node. The pool's reconcile asks the
// pod cache too (podPlaced): a member's status shows its start-up steps only with its Ready or
// seconds later (startingUp), while its pod shows the placement as the scheduler binds it.
func statusPlaced(m *agentsv1beta1.Sandbox) bool { return m.Status.NodeName != "" }

// noteDeferral sends an event when the pool starts or stops deferring its refill.
func (r *warmPoolReconciler) noteDeferral(pool *extv1beta1.SandboxWarmPool, wait time.Duration, missing int) {
	nn := client.ObjectKeyFromObject(pool)
	_, was := r.deferring.Load(nn)
	switch {
	case wait > 0 && !was:
		r.deferring.Store(nn, true)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, EventRefillDeferred, "Refill",
				"Deferring %d replacement(s) while claims arrive or members leave; refilling once claims pause for %s (and members stop leaving for %s)",
				missing, r.Refill.QuietPeriod, r.WarmPool.ReplenishDelay)
		}
	case wait == 0 && was:
		r.deferring.Delete(nn)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, EventRefillResumed, "Refill", "Refilling %d replacement(s)", missing)
		}
	}
}

// The public controller's pacing of a pool's creates (WarmPoolPolicy), kept per pool in
// memory: ReplenishDelay defers the start of a refill after members leave the pool, and
// MaxRefillRate shapes its flow once started. Both are off by default.
type refillPacing struct {
	mu sync.Mutex
	// members is the pool's active member count as last seen (plus the members created
	// since), to tell members leaving from creates the cache does not show yet.
	members map[types.NamespacedName]int
	// holdUntil is when a pool's replenish hold ends.
	holdUntil map[types.NamespacedName]time.Time
	// buckets are the pools' refill token buckets.
	buckets map[types.NamespacedName]*tokenBucket
	// replicas is the pool's spec.replicas as last seen; growth is how many of its members
	// are still to be created because replicas rose (sandboxwarmpool_growth.go).
	replicas map[types.NamespacedName]int
	growth   map[types.NamespacedName]int
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

func newRefillPacing() *refillPacing {
	return &refillPacing{
		members:   map[types.NamespacedName]int{},
		holdUntil: map[types.NamespacedName]time.Time{},
		buckets:   map[types.NamespacedName]*tokenBucket{},
		replicas:  map[types.NamespacedName]int{},
		growth:    map[types.NamespacedName]int{},
	}
}

// replenishHold records the pool's active member count and returns how long its creates wait
// for ReplenishDelay: every drop in the count re-arms the hold, so the refill starts only once
// the members stop leaving for a whole delay. The first look at a pool, and a full pool, never
// wait: a pool's first fill and scale-ups are not deferred. Call it once per reconcile.
func (p *refillPacing) replenishHold(pool types.NamespacedName, delay time.Duration, active, replicas int, now time.Time) time.Duration {
	if delay <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, seen := p.members[pool]
	p.members[pool] = active
	switch {
	case !seen:
		return 0
	case active >= replicas:
		delete(p.holdUntil, pool)
		return 0
	case active < last:
		p.holdUntil[pool] = now.Add(delay)
	}
	if left := p.holdUntil[pool].Sub(now); left > 0 {
		return left
	}
	return 0
}

// created counts creates in the pool's member count until the cache shows them, so that a
// stale count is not taken for members leaving.
func (p *refillPacing) created(pool types.NamespacedName, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.members[pool]; ok && n > 0 {
		p.members[pool] += n
	}
}

// take grants up to want creates from the pool's token bucket, which fills at rate per second
// up to max(1, rate) and starts full; when it grants none, wait is when the next token is
// there. rate <= 0 grants everything. Tokens of failed creates are not given back: they cost
// the API server as much.
func (p *refillPacing) take(pool types.NamespacedName, rate float64, want int, now time.Time) (granted int, wait time.Duration) {
	if rate <= 0 || want <= 0 {
		return want, 0
	}
	capacity := math.Max(1, rate)
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buckets[pool]
	if b == nil {
		b = &tokenBucket{tokens: capacity, last: now}
		p.buckets[pool] = b
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(capacity, b.tokens+rate*elapsed.Seconds())
		b.last = now
	}
	granted = want
	if b.tokens < float64(want) {
		granted = int(b.tokens) // below want, so it fits an int
	}
	b.tokens -= float64(granted)
	if granted > 0 {
		return granted, 0
	}
	return 0, time.Duration(math.Ceil((1 - b.tokens) / rate * float64(time.Second)))
}

func (p *refillPacing) forget(pool types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.members, pool)
	delete(p.holdUntil, pool)
	delete(p.buckets, pool)
	delete(p.replicas, pool)
	delete(p.growth, pool)
}
