package load

// The fair-share scenario's floor arms: the same two tenants on the contract floor (floor.go),
// where no operator runs. Once the operator has filled the pool, it is stopped and a stand-in
// answers its admission webhooks at once; the load generator then serves each admitted claim
// itself with the writes sandgate's API asks of a warm claim (the bind, the route write, the
// Ready status), and nothing refills the pool (it is made large enough for the whole run).
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
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

// floorGate admits B's claims in a floor-policy arm as the arm's ClaimPolicy does at
// admission: a token of B's admission rate, and a slot under B's limit on claims at once.
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
	if g.held >= g.max {
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

// serveFloorClaim makes the floor's writes of a claim its tenant created.
func (f *fairShareRun) serveFloorClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) error {
	_, bindErrs, err := f.r.serveFloor(ctx, claim, f.r.floor)
	for _, e := range bindErrs {
		f.r.progressf("floor: claim %s: %v", claim.Name, e)
	}
	if err != nil {
		return fmt.Errorf("floor: serving claim %s: %w", claim.Name, err)
	}
	return nil
}

// refuseFloorClaim sends the create of one of B's claims the floor's gate refused as a dry
// run, as B.
func (f *fairShareRun) refuseFloorClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) error {
	return f.b.Create(ctx, claim, client.DryRunAll)
}
