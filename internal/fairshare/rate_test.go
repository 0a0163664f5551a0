package fairshare

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newRates(c *clock) *RateLimits      { return &RateLimits{Now: c.now} }
func bob() Identity                      { return Identity{User: "bob"} }
func rated(perMinute, burst int32) *tenancyv1alpha1.ClaimPolicy {
	p := builders.MakeClaimPolicy("rates", "ns").
		Tenant(builders.MakeTenant("team-b").User("bob").AdmissionRate(perMinute, burst)).Obj()
	p.UID = "uid-1"
	return p
}

// A tenant's burst is admitted, the next claim refused with the time until a token, and one
// admitted again once the rate refilled it.
func TestATenantsRateAdmitsItsBurstThenItsRate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	r := newRates(c)
	charges := RateChargesOf(rated(60, 3), bob()) // one a second, three at once
	if len(charges) != 1 || charges[0].Limit != tenancyv1alpha1.LimitTenantAdmissionRate || charges[0].Path.String() != "spec.tenants[0].admissionRate" {
		t.Fatalf("charges = %+v, want the tenant's rate", charges)
	}
	for i := range 3 {
		if _, refused := r.Take(charges); refused != nil {
			t.Fatalf("claim %d of the burst refused: %+v", i, refused)
		}
	}
	_, refused := r.Take(charges)
	if refused == nil || refused.Wait != time.Second || refused.Describe() != "tenant team-b's claims" {
		t.Fatalf("the claim beyond the burst: %+v, want refused for a second", refused)
	}
	c.advance(400 * time.Millisecond)
	if _, refused := r.Take(charges); refused == nil || refused.Wait != 600*time.Millisecond {
		t.Fatalf("0.4 s later: %+v, want refused for 0.6 s", refused)
	}
	c.advance(600 * time.Millisecond)
	if _, refused := r.Take(charges); refused != nil {
		t.Fatalf("a second later: refused %+v, want admitted", refused)
	}
	if _, refused := r.Take(charges); refused == nil {
		t.Fatal("the token was taken: want the next refused")
	}
}

// A claim refused for another limit after taking its tokens gets them back.
func TestRefundGivesTheTokensBack(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	r := newRates(c)
	charges := RateChargesOf(rated(60, 1), bob())
	taken, _ := r.Take(charges)
	if _, refused := r.Take(charges); refused == nil {
		t.Fatal("the bucket of one is empty: want refused")
	}
	r.Refund(taken)
	if _, refused := r.Take(charges); refused != nil {
		t.Fatalf("after the refund: refused %+v", refused)
	}
	r.Refund(taken)
	r.Refund(taken)
	if b := r.buckets[charges[0].key]; b.tokens != 1 {
		t.Errorf("refunds beyond the burst: %g tokens, want at most the burst (1)", b.tokens)
	}
}

// The tenant's and the namespace's buckets are taken together or not at all: a claim refused
// by the namespace's rate leaves the tenant's tokens.
func TestTheTenantsAndTheNamespacesRatesAreTakenAllOrNone(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	r := newRates(c)
	p := rated(60, 5)
	p.Spec.AdmissionRate = &tenancyv1alpha1.AdmissionRate{ClaimsPerMinute: 60}
	charges := RateChargesOf(p, bob())
	if len(charges) != 2 || charges[1].Burst != 1 || charges[1].Path.String() != "spec.admissionRate" {
		t.Fatalf("charges = %+v, want the tenant's then the namespace's (its burst defaulted to 1)", charges)
	}
	if _, refused := r.Take(charges); refused != nil {
		t.Fatalf("first claim refused: %+v", refused)
	}
	_, refused := r.Take(charges)
	if refused == nil || refused.Limit != tenancyv1alpha1.LimitAdmissionRate || refused.Describe() != "the namespace's claims" {
		t.Fatalf("second claim: %+v, want refused by the namespace's rate", refused)
	}
	if b := r.buckets[charges[0].key]; b.tokens != 4 {
		t.Errorf("the tenant's bucket holds %g, want 4: a refused claim takes nothing", b.tokens)
	}
	// Another creator, in no tenant, shares the namespace's bucket only.
	other := RateChargesOf(p, Identity{User: "carol"})
	if len(other) != 1 || other[0].Tenant != "" {
		t.Fatalf("an unnamed creator's charges = %+v, want the namespace's only", other)
	}
	if _, refused := r.Take(other); refused == nil {
		t.Error("an unnamed creator took the namespace's token bob's claim took")
	}
}

// A dry run answers what a create would, and takes nothing.
func TestCheckTakesNothing(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	r := newRates(c)
	charges := RateChargesOf(rated(60, 1), bob())
	if refused := r.Check(charges); refused != nil {
		t.Fatalf("a full bucket: %+v", refused)
	}
	r.Take(charges)
	if refused := r.Check(charges); refused == nil {
		t.Fatal("an empty bucket: want refused")
	}
	c.advance(time.Second)
	if refused := r.Check(charges); refused != nil {
		t.Fatalf("refilled: %+v", refused)
	}
	if _, refused := r.Take(charges); refused != nil {
		t.Fatalf("Check took the token: %+v", refused)
	}
}

// A policy recreated under the same name starts with a full bucket; a burst lowered holds at
// most the new burst; full buckets are dropped.
func TestBucketsFollowThePolicy(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	r := newRates(c)
	old := RateChargesOf(rated(60, 1), bob())
	r.Take(old)
	recreated := rated(60, 1)
	recreated.UID = types.UID("uid-2")
	if _, refused := r.Take(RateChargesOf(recreated, bob())); refused != nil {
		t.Errorf("a recreated policy: %+v, want a bucket of its own", refused)
	}
	raised := RateChargesOf(rated(60, 10), bob())
	c.advance(2 * time.Minute)
	r.Take(raised)
	lowered := RateChargesOf(rated(60, 2), bob())
	if r.Take(lowered); r.buckets[lowered[0].key].tokens != 1 {
		t.Errorf("burst lowered to 2: %g tokens after a take, want 1", r.buckets[lowered[0].key].tokens)
	}
	c.advance(2 * sweepEvery)
	other := builders.MakeClaimPolicy("other", "ns").AdmissionRate(60, 0).Obj()
	if _, refused := r.Take(RateChargesOf(other, bob())); refused != nil || len(r.buckets) != 1 {
		t.Errorf("after a sweep: %d buckets kept (%+v), want only the one just made: full ones dropped", len(r.buckets), refused)
	}
}
