package reconcilers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func TestRefillDelay(t *testing.T) {
	policy := RefillPolicy{QuietPeriod: time.Second, LowWaterPercent: 25}
	members := func(ready, notReady int) []*agentsv1beta1.Sandbox {
		var out []*agentsv1beta1.Sandbox
		for i := range ready + notReady {
			out = append(out, poolMember(fmt.Sprintf("m%d", i), "h1", i < ready, "1"))
		}
		return out
	}
	for name, tc := range map[string]struct {
		policy    RefillPolicy
		claimedAt time.Duration // before planNow; negative: never
		members   []*agentsv1beta1.Sandbox
		want      time.Duration
	}{
		"no claim yet: refill now":                   {policy: policy, claimedAt: -1, members: members(2, 0)},
		"claims arriving: wait out the quiet period": {policy: policy, claimedAt: 300 * time.Millisecond, members: members(5, 0), want: 700 * time.Millisecond},
		"claims paused: refill now":                  {policy: policy, claimedAt: 2 * time.Second, members: members(5, 0)},
		"below the low-water mark: refill now":       {policy: policy, claimedAt: 0, members: members(2, 3)},
		"at the low-water mark: wait":                {policy: policy, claimedAt: 0, members: members(3, 0), want: time.Second},
		"deferral off: refill now":                   {claimedAt: 0, members: members(10, 0)},
		"no replicas: a mark of 0 is never undercut": {policy: policy, claimedAt: 0, members: nil, want: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			replicas := 10
			if tc.members == nil {
				replicas = 0
			}
			got := refillDelay(tc.policy, planNow.Add(-tc.claimedAt), tc.claimedAt >= 0, planNow, tc.members, replicas, time.Time{})
			if got != tc.want {
				t.Errorf("refillDelay = %s, want %s", got, tc.want)
			}
		})
	}
}

// Steady claims never pause: a deferral ends MaxDeferral after it began, whatever the claims
// do, and is cut to what is left of it before then.
func TestRefillDeferralIsBounded(t *testing.T) {
	policy := RefillPolicy{QuietPeriod: time.Second, LowWaterPercent: 25, MaxDeferral: 3 * time.Second}
	var members []*agentsv1beta1.Sandbox
	for i := range 8 {
		members = append(members, poolMember(fmt.Sprintf("m%d", i), "h1", true, "1"))
	}
	justClaimed := planNow.Add(-10 * time.Millisecond)
	for name, tc := range map[string]struct {
		since time.Time
		want  time.Duration
	}{
		"no deferral under way: the quiet period":   {want: 990 * time.Millisecond},
		"deferral young: the quiet period":          {since: planNow.Add(-time.Second), want: 990 * time.Millisecond},
		"deferral near its end: what is left of it": {since: planNow.Add(-2700 * time.Millisecond), want: 300 * time.Millisecond},
		"deferral at its bound: refill now":         {since: planNow.Add(-3 * time.Second)},
		"deferral past its bound: refill now":       {since: planNow.Add(-time.Minute)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := refillDelay(policy, justClaimed, true, planNow, members, 10, tc.since); got != tc.want {
				t.Errorf("refillDelay = %s, want %s", got, tc.want)
			}
		})
	}
	unbounded := policy
	unbounded.MaxDeferral = 0
	if got := refillDelay(unbounded, justClaimed, true, planNow, members, 10, planNow.Add(-time.Hour)); got != 990*time.Millisecond {
		t.Errorf("refillDelay without a bound = %s, want the quiet period's 990ms", got)
	}
}

// The replenish hold (--sandbox-warm-pool-replenish-delay): never on the first look nor for a
// full pool, re-armed by every drop of the member count, the pool's own creates counted in it.
func TestReplenishHold(t *testing.T) {
	p := newRefillPacing()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	const delay = 10 * time.Second
	steps := []struct {
		at             time.Duration
		active, create int
		want           time.Duration
	}{
		{at: 0, active: 5, want: 0},               // first look: no baseline
		{at: time.Second, active: 3, want: delay}, // two left: hold
		{at: 4 * time.Second, active: 3, want: 7 * time.Second},
		{at: 5 * time.Second, active: 2, want: delay}, // another left: re-armed
		{at: 15 * time.Second, active: 2, create: 3, want: 0},
		{at: 16 * time.Second, active: 4, want: delay}, // its 3 creates counted: 4 is one left
		{at: 17 * time.Second, active: 5, want: 0},     // full
	}
	for i, s := range steps {
		if got := p.replenishHold(pool, delay, s.active, 5, planNow.Add(s.at)); got != s.want {
			t.Errorf("step %d: hold = %s, want %s", i, got, s.want)
		}
		p.created(pool, s.create)
	}
	if got := p.replenishHold(pool, 0, 0, 5, planNow); got != 0 {
		t.Errorf("without a delay the hold is %s, want 0", got)
	}
}

// The refill rate (--sandbox-warm-pool-max-refill-rate): a token bucket of one second of
// creates, full at first.
func TestRefillRate(t *testing.T) {
	p := newRefillPacing()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	steps := []struct {
		at          time.Duration
		want        int
		wantGranted int
		wantWait    time.Duration
	}{
		{at: 0, want: 10, wantGranted: 2},                                   // a full bucket: 2
		{at: 0, want: 10, wantGranted: 0, wantWait: 500 * time.Millisecond}, // empty: the next token
		{at: 250 * time.Millisecond, want: 10, wantGranted: 0, wantWait: 250 * time.Millisecond},
		{at: 1500 * time.Millisecond, want: 1, wantGranted: 1},
		{at: 10 * time.Second, want: 10, wantGranted: 2}, // capped at one second's worth
	}
	for i, s := range steps {
		granted, wait := p.take(pool, 2, s.want, planNow.Add(s.at))
		if granted != s.wantGranted || wait != s.wantWait {
			t.Errorf("step %d: take = %d, %s; want %d, %s", i, granted, wait, s.wantGranted, s.wantWait)
		}
	}
	if granted, _ := p.take(pool, 0, 300, planNow); granted != 300 {
		t.Errorf("unpaced take granted %d, want 300", granted)
	}
}

// A pool under claims that never pause refills every MaxDeferral: the reconciles in between
// defer, the first one at or past the bound creates, and the next deferral starts afresh.
// Claims that outlast MaxDeferral are steady traffic: the pool refills then, and from then on
// replaces members as they leave, until claims pause for the quiet period; the claims after the
// pause are deferred again, from their first reconcile.
// steadyRefill is a pool reconciler with a quiet period of 1s, a low-water mark of 25% and
// deferrals bound at maxDeferral, and the pool it refills.
func steadyRefill(maxDeferral time.Duration) (*warmPoolReconciler, types.NamespacedName) {
	return &warmPoolReconciler{
		Refill:   RefillPolicy{QuietPeriod: time.Second, LowWaterPercent: 25, MaxDeferral: maxDeferral},
		WarmPool: WarmPoolPolicy{MaxBatchSize: 100},
		activity: newPoolActivity(),
		pacing:   newRefillPacing(),
	}, types.NamespacedName{Namespace: "ns", Name: "pool"}
}

func TestSteadyClaimsRefillOneForOneAfterMaxDeferral(t *testing.T) {
	r, pool := steadyRefill(3 * time.Second)
	var members []*agentsv1beta1.Sandbox
	for i := range 8 {
		members = append(members, poolMember(fmt.Sprintf("m%d", i), "h1", true, "1"))
	}
	plan := poolPlan{create: 2, active: 8}
	var created []time.Duration
	for step := time.Duration(0); step <= 14*time.Second; step += 500 * time.Millisecond {
		now := planNow.Add(step)
		// A claim every reconcile, but for a pause of 2s after 5s.
		if step <= 5*time.Second || step >= 7*time.Second {
			r.activity.touch(pool, now.Add(-10*time.Millisecond))
		}
		if n, _, _ := r.paceCreates(pool, plan, members, 10, now, statusPlaced); n > 0 {
			created = append(created, step)
		}
	}
	want := []time.Duration{
		// Deferred from 0 to its bound at 3s, then one for one while the claims go on (the
		// last at 5s counts until it is a quiet period old)...
		3 * time.Second, 3500 * time.Millisecond, 4 * time.Second, 4500 * time.Millisecond, 5 * time.Second,
		5500 * time.Millisecond,
		// ... and through the pause, which ends the deferral at 6s.
		6 * time.Second, 6500 * time.Millisecond,
		// Claims again at 7s: a fresh deferral, bound at 10s.
		10 * time.Second, 10500 * time.Millisecond, 11 * time.Second, 11500 * time.Millisecond, 12 * time.Second,
		12500 * time.Millisecond, 13 * time.Second, 13500 * time.Millisecond, 14 * time.Second,
	}
	if fmt.Sprint(created) != fmt.Sprint(want) {
		t.Errorf("refills at %v, want %v", created, want)
	}
}

// TestLowWaterEndsADeferralUntilClaimsPause: claims keep coming and the pool falls to its
// low-water mark before the deferral's bound: the refill goes out, and from then on the pool
// replaces members as they leave, not deferring again once it is back above the mark (which
// drained it to the mark again and again, each time refilled at once), until claims pause.
func TestLowWaterEndsADeferralUntilClaimsPause(t *testing.T) {
	r, pool := steadyRefill(10 * time.Second)
	members := func(ready int) []*agentsv1beta1.Sandbox {
		var out []*agentsv1beta1.Sandbox
		for i := range 10 {
			out = append(out, poolMember(fmt.Sprintf("m%d", i), "h1", i < ready, "1"))
		}
		return out
	}
	var created []time.Duration
	for step := time.Duration(0); step <= 9*time.Second; step += 500 * time.Millisecond {
		now := planNow.Add(step)
		if step <= 6*time.Second { // claims until 6s, then a pause
			r.activity.touch(pool, now.Add(-10*time.Millisecond))
		}
		ready := 8 // above the mark (2.5 of 10) but at 2s, when it is 2
		if step == 2*time.Second {
			ready = 2
		}
		if n, _, _ := r.paceCreates(pool, poolPlan{create: 2, active: 10}, members(ready), 10, now, statusPlaced); n > 0 {
			created = append(created, step)
		}
	}
	want := []time.Duration{
		// Deferred until the mark at 2s, then one for one while the claims go on...
		2 * time.Second, 2500 * time.Millisecond, 3 * time.Second, 3500 * time.Millisecond, 4 * time.Second,
		4500 * time.Millisecond, 5 * time.Second, 5500 * time.Millisecond, 6 * time.Second, 6500 * time.Millisecond,
		// ... and through the pause.
		7 * time.Second, 7500 * time.Millisecond, 8 * time.Second, 8500 * time.Millisecond, 9 * time.Second,
	}
	if fmt.Sprint(created) != fmt.Sprint(want) {
		t.Errorf("refills at %v, want %v", created, want)
	}
}

// A claim that waits for a member ends its pool's deferral: claims that keep coming never give
// the pool its pause, and a waiting claim has found nothing to take. Once they are served the
// deferral is spent (as at the low-water mark), until claims pause.
func TestWaitingClaimsEndTheDeferral(t *testing.T) {
	r, pool := steadyRefill(10 * time.Second)
	var members []*agentsv1beta1.Sandbox
	for i := range 8 {
		members = append(members, poolMember(fmt.Sprintf("m%d", i), "h1", true, "1"))
	}
	claim := types.NamespacedName{Namespace: "ns", Name: "c"}
	var created []time.Duration
	for step := time.Duration(0); step <= 4*time.Second; step += 500 * time.Millisecond {
		now := planNow.Add(step)
		r.activity.touch(pool, now.Add(-10*time.Millisecond)) // claims never pause
		switch step {
		case 2 * time.Second:
			r.activity.claimWaits(pool, claim)
		case 3 * time.Second:
			r.activity.claimDone(claim)
		}
		if n, _, _ := r.paceCreates(pool, poolPlan{create: 2, active: 8}, members, 10, now, statusPlaced); n > 0 {
			created = append(created, step)
		}
	}
	want := []time.Duration{2 * time.Second, 2500 * time.Millisecond, 3 * time.Second, 3500 * time.Millisecond, 4 * time.Second}
	if fmt.Sprint(created) != fmt.Sprint(want) {
		t.Errorf("refills at %v, want %v", created, want)
	}
}

// While claims keep coming, a refill no longer waiting for their pause starts at most
// MaxStartingPercent of replicas at a time (at least one, at least as many as claims wait
// for), counting the members being placed already (not those whose pod is on a node, waiting
// for its kubelet, whether their status says so yet or not); once claims pause, all of it.
func TestRefillIsBoundedWhileClaimsKeepComing(t *testing.T) {
	pool := types.NamespacedName{Namespace: "ns", Name: "pool"}
	// Members on a node say so in their status (onNode) or only in their pod (podOnNode:
	// their status is written with their Ready, startingUp).
	podOnNode := map[string]bool{}
	placed := func(m *agentsv1beta1.Sandbox) bool { return statusPlaced(m) || podOnNode[m.Name] }
	members := func(ready, starting, onNode, byPod int) []*agentsv1beta1.Sandbox {
		clear(podOnNode) // each case names its members from m0 again
		var out []*agentsv1beta1.Sandbox
		for i := range ready + starting + onNode + byPod {
			m := poolMember(fmt.Sprintf("m%d", i), "h1", i < ready, "1")
			switch {
			case i >= ready+starting+onNode:
				podOnNode[m.Name] = true
			case i >= ready+starting:
				m.Status.NodeName = "node-1" // its kubelet's to start now
			}
			out = append(out, m)
		}
		return out
	}
	for name, tc := range map[string]struct {
		ready, starting, onNode, podOnNode, waiting int
		// unmet claims were cold-started for want of a member and are not Ready; unmetReady
		// ones were and are Ready now, unmetOld were served longer ago than maxInFlight;
		// coldOwn were cold-started for another reason (their spec, their warm share).
		unmet, unmetReady, unmetOld, coldOwn int
		quietFor                             time.Duration
		maxStarting                          int
		wantCreate                           int
	}{
		"claims coming, starting members on nodes: not counted":            {ready: 10, starting: 6, onNode: 30, wantCreate: 4, maxStarting: 10},
		"claims coming, pods on nodes, not in the status yet: not counted": {ready: 10, starting: 6, podOnNode: 30, wantCreate: 4, maxStarting: 10},
		"claims coming, none starting: a tenth of the replicas":            {ready: 10, wantCreate: 10, maxStarting: 10},
		"claims coming, some starting: the rest of the tenth":              {ready: 10, starting: 6, wantCreate: 4, maxStarting: 10},
		"claims coming, the tenth starting: none now":                      {ready: 10, starting: 10, wantCreate: 0, maxStarting: 10},
		"claims waiting for members: as many as wait":                      {ready: 0, starting: 10, waiting: 25, wantCreate: 15, maxStarting: 10},
		// Steady traffic past what a tenth of the replicas carries: the claims the pool
		// missed are cold-starting; the pool places as many members as they, for the claims
		// after them.
		"claims cold-started for want of a member: as many as they": {ready: 0, starting: 10, unmet: 25, wantCreate: 15, maxStarting: 10},
		"claims waiting and cold-started: as many as both":          {ready: 0, starting: 10, waiting: 5, unmet: 25, wantCreate: 20, maxStarting: 10},
		"cold-started claims Ready or long served: a tenth":         {ready: 0, starting: 6, unmetReady: 25, unmetOld: 25, wantCreate: 4, maxStarting: 10},
		"claims cold-started for their spec: a tenth":               {ready: 0, starting: 6, coldOwn: 25, wantCreate: 4, maxStarting: 10},
		"claims paused: the whole deficit":                          {ready: 10, starting: 10, quietFor: 2 * time.Second, wantCreate: 80, maxStarting: 10},
		"unbounded":                                                 {ready: 10, starting: 10, wantCreate: 80},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := steadyRefill(time.Second) // past its bound from the first reconcile
			r.Refill.MaxStartingPercent = tc.maxStarting
			now := planNow
			r.deferredSince.Store(pool, now.Add(-time.Minute))
			r.activity.touch(pool, now.Add(-time.Millisecond-tc.quietFor))
			for i := range tc.waiting {
				r.activity.claimWaits(pool, types.NamespacedName{Namespace: "ns", Name: fmt.Sprint("c", i)})
			}
			served := func(n int, prefix string, at time.Time, unmet bool) []types.NamespacedName {
				var out []types.NamespacedName
				for i := range n {
					c := types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(prefix, i)}
					r.activity.claimServed(pool, c, at, unmet)
					out = append(out, c)
				}
				return out
			}
			served(tc.unmet, "unmet", now.Add(-2*time.Second), true)
			for _, c := range served(tc.unmetReady, "ready", now.Add(-2*time.Second), true) {
				r.activity.claimReady(c)
			}
			served(tc.unmetOld, "old", now.Add(-maxInFlight), true)
			served(tc.coldOwn, "own", now.Add(-2*time.Second), false)
			m := members(tc.ready, tc.starting, tc.onNode, tc.podOnNode)
			got, deferred, _ := r.paceCreates(pool, poolPlan{create: 100 - len(m), active: len(m)}, m, 100, now, placed)
			if got != tc.wantCreate || deferred != 0 {
				t.Errorf("paceCreates = %d created, deferred %s; want %d, not deferred", got, deferred, tc.wantCreate)
			}
		})
	}
}
