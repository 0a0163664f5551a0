package load

// The fair-share scenario's floor arms: the same two tenants on the contract floor (floor.go),
// where no operator runs. Once the operator has filled the pool, it is stopped and a stand-in
// answers its admission webhooks at once; the load generator then serves each admitted claim
// itself with the writes sandgate's API asks of a warm claim (the bind, the route write, the
// Ready status). The pool is made large enough for the whole run, so no claim waits for a
// member; but as a pool's replicas ask, each member a claim takes is replaced at once, with
// the writes sandgate's pool makes for it (refillFloor): the replacement Sandbox, its pod,
// and the Sandbox's Ready status once the scheduler and kwok have made the pod Ready. Under
// steady claims sandgate replaces each member as it leaves too (reconcilers'
// sandboxwarmpool_refill.go), so both arms carry their tenants' replacements.
//
// In the floor-policy arm the load generator decides B's admission as the arm's ClaimPolicy
// would, with the operator's own token buckets (fairshare.RateLimits) and B's limit on claims
// at once. A claim it admits is created and served; one it refuses is sent as a dry-run create
// instead, which the API server takes through authentication, authorization, decoding, both
// admission webhooks and validation and then drops: at least what a refusal by the stamping
// webhook costs it (that one stops at the first webhook). The arm is what A's latency would
// be with B's admitted work and B's refusals on the API server and nothing else: the limit of
// any operator's fair share on this machine.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

// floorGate admits B's claims in a floor-policy arm as the arm's ClaimPolicy does at
// admission: a token of B's admission rate, and a slot under B's limit on claims at once
// (max; 0 for none).
type floorGate struct {
	rates   fairshare.RateLimits
	charges []fairshare.RateCharge
	max     int

	mu   sync.Mutex
	held int
}

// newFloorGate is the gate of policy p in namespace ns.
func newFloorGate(ns string, p FairSharePolicy) *floorGate {
	policy := p.object(ns)
	policy.UID = types.UID("floor-" + ns) // the buckets are keyed by the policy's UID
	return &floorGate{
		charges: fairshare.RateChargesOf(policy, fairshare.Identity{User: TenantBUser, Groups: []string{"system:authenticated", "bench:" + TenantBUser}}),
		max:     int(p.BMaxClaims),
	}
}

// admit takes a slot and a token for one of B's claims, or neither.
func (g *floorGate) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max > 0 && g.held >= g.max {
		return false
	}
	if _, refused := g.rates.Take(g.charges); refused != nil {
		return false
	}
	g.held++
	return true
}

// release gives back the slot of an admitted claim once it is deleted.
func (g *floorGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held--
}

// FloorPoolSize is the pool a floor arm of cfg needs: a member for each of A's claims and for
// each of B's that its policy can admit (all of them without one), and a few more.
func FloorPoolSize(cfg FairShareConfig) int32 {
	aClaims := cfg.AClaims()
	b := cfg.BBursts * cfg.BBurst
	if p := cfg.Policy; p != nil && cfg.BBursts > 0 {
		// Per burst at most a full bucket and what the rate refills while the burst lasts
		// (and one more for rounding).
		perBurst := cfg.BBurst
		if r := p.bAdmissionRate(); r != nil {
			window := float64(cfg.BBurst) / cfg.BRate
			perBurst = min(perBurst, int(fairshare.RateBurst(r))+int(float64(r.ClaimsPerMinute)/60*window)+1)
		}
		b = cfg.BBursts * perBurst
	}
	return int32(aClaims + b + max(10, (aClaims+b)/20))
}

// floorRefill replaces the members the floor's claims take.
type floorRefill struct {
	// member is a member of the pool as sandgate made it, the model of its replacements.
	member *agentsv1beta1.Sandbox
	pods   *podWatcher
	next   atomic.Int64
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error
}

// startFloorRefill opens the pod watch the replacements wait on, with a member of pool as
// their model.
func (f *fairShareRun) startFloorRefill(ctx context.Context) error {
	f.r.floor.mu.Lock()
	var member *agentsv1beta1.Sandbox
	if len(f.r.floor.members) > 0 {
		member = f.r.floor.members[len(f.r.floor.members)-1].DeepCopy()
	}
	f.r.floor.mu.Unlock()
	if member == nil {
		return errors.New("floor: no pool member to model the replacements on")
	}
	pods, err := startPodWatch(ctx, f.r.c, f.cfg.Namespace)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	f.refill = &floorRefill{member: member, pods: pods}
	return nil
}

// finishFloorRefill waits for the replacements started, up to timeout, and reports those
// that failed.
func (f *fairShareRun) finishFloorRefill(timeout time.Duration) {
	rf := f.refill
	done := make(chan struct{})
	go func() {
		rf.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		f.r.progressf("floor: replacements still starting after %s; the failures below are those until then", timeout)
	}
	rf.pods.stop()
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if n := len(rf.errs); n > 0 {
		f.r.progressf("floor: %d of %d replacements failed, the first: %v", n, rf.next.Load(), rf.errs[0])
	}
}

// refillFloor replaces a member a claim took, as sandgate's pool does: a Sandbox made like
// the pool's members, then what starts it (runner.startSandbox: its pod as sandgate makes it,
// and once the pod is Ready the Sandbox's Ready status).
func (rf *floorRefill) refillFloor(ctx context.Context, r *runner) error {
	m := rf.member
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-floor-%05d", poolName, rf.next.Add(1)), Namespace: m.Namespace,
			Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations), OwnerReferences: m.OwnerReferences,
		},
		Spec: *m.Spec.DeepCopy(),
	}
	if _, ok := sb.Annotations[agentsv1beta1.AnnotationPodName]; ok {
		sb.Annotations[agentsv1beta1.AnnotationPodName] = sb.Name
	}
	if err := r.c.Create(ctx, sb); err != nil {
		return fmt.Errorf("creating replacement %s: %w", sb.Name, err)
	}
	if err := r.startSandbox(ctx, sb, rf.pods, &coldTimes{}); err != nil {
		return fmt.Errorf("starting replacement %s: %w", sb.Name, err)
	}
	return nil
}

// serveFloorClaim makes the floor's writes of a claim its tenant created, and starts the
// replacement of the member it took.
func (f *fairShareRun) serveFloorClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) error {
	_, bindErrs, err := f.r.serveFloor(ctx, claim, f.r.floor)
	for _, e := range bindErrs {
		f.r.progressf("floor: claim %s: %v", claim.Name, e)
	}
	if err != nil {
		return fmt.Errorf("floor: serving claim %s: %w", claim.Name, err)
	}
	rf := f.refill
	rf.wg.Add(1)
	go func() {
		defer rf.wg.Done()
		if err := rf.refillFloor(ctx, f.r); err != nil {
			rf.mu.Lock()
			rf.errs = append(rf.errs, err)
			rf.mu.Unlock()
		}
	}()
	return nil
}

// refuseFloorClaim sends the create of one of B's claims the floor's gate refused as a dry
// run, as B.
func (f *fairShareRun) refuseFloorClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) error {
	return f.b.Create(ctx, claim, client.DryRunAll)
}
