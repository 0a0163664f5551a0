package fairshare

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func TestLedgersAreOnePerTenantUnlessALimitSpansTheNamespace(t *testing.T) {
	tenants := func(w *builders.ClaimPolicyWrapper) *builders.ClaimPolicyWrapper {
		return w.Tenant(builders.MakeTenant("a").User("alice").MaxClaims(3)).
			Tenant(builders.MakeTenant("b").User("bob").PerPool("python", 2)).
			Tenant(builders.MakeTenant("c").User("carol").WarmShare("python", 1, 2))
	}
	cases := map[string]struct {
		policy *tenancyv1alpha1.ClaimPolicy
		want   []tenancyv1alpha1.ClaimLedgerSpec
	}{
		"tenant limits only": {tenants(builders.MakeClaimPolicy("p", "ns")).Obj(),
			[]tenancyv1alpha1.ClaimLedgerSpec{{PolicyName: "p", Tenant: "a"}, {PolicyName: "p", Tenant: "b"}}},
		"a namespace maxClaims": {tenants(builders.MakeClaimPolicy("p", "ns").MaxClaims(10)).Obj(),
			[]tenancyv1alpha1.ClaimLedgerSpec{{PolicyName: "p"}}},
		"a namespace perPool": {tenants(builders.MakeClaimPolicy("p", "ns").PerPool("python", 10)).Obj(),
			[]tenancyv1alpha1.ClaimLedgerSpec{{PolicyName: "p"}}},
		"warm shares only": {builders.MakeClaimPolicy("p", "ns").Tenant(builders.MakeTenant("c").User("carol").WarmShare("python", 1, 2)).Obj(), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Ledgers(tc.policy)); diff != "" {
				t.Errorf("Ledgers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChargeOfNamesTheLedgerOnlyWhenALimitApplies(t *testing.T) {
	perTenant := builders.MakeClaimPolicy("p", "ns").
		Tenant(builders.MakeTenant("a").User("alice").MaxClaims(3)).
		Tenant(builders.MakeTenant("b").User("bob").PerPool("python", 2)).
		Tenant(builders.MakeTenant("c").User("carol").WarmShare("python", 1, 2)).Obj()
	wide := builders.MakeClaimPolicy("q", "ns").PerPool("python", 5).Tenant(builders.MakeTenant("a").User("alice")).Obj()
	cases := map[string]struct {
		policy *tenancyv1alpha1.ClaimPolicy
		user   string
		pool   string
		want   Charge
	}{
		"a tenant with a limit":            {perTenant, "alice", "go", Charge{Policy: "p", Ledger: "p.a", Tenant: "a"}},
		"a named pool keeps its name":      {perTenant, "bob", "python", Charge{Policy: "p", Ledger: "p.b", Tenant: "b", Pool: "python"}},
		"other pools count together":       {perTenant, "bob", "go", Charge{Policy: "p", Ledger: "p.b", Tenant: "b"}},
		"a tenant with warm shares only":   {perTenant, "carol", "python", Charge{Policy: "p", Tenant: "c", Pool: "python"}},
		"unnamed, no namespace-wide limit": {perTenant, "mallory", "python", Charge{Policy: "p", Pool: "python"}},
		"unnamed, a namespace-wide limit":  {wide, "mallory", "python", Charge{Policy: "q", Ledger: "q", Pool: "python"}},
		"a tenant, a namespace-wide limit": {wide, "alice", "go", Charge{Policy: "q", Ledger: "q", Tenant: "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ChargeOf(tc.policy, Identity{User: tc.user}, tc.pool)); diff != "" {
				t.Errorf("ChargeOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExceedListsEveryLimitOneMoreClaimWouldPass(t *testing.T) {
	p := builders.MakeClaimPolicy("p", "ns").MaxClaims(10).PerPool("python", 6).
		Tenant(builders.MakeTenant("a").User("alice").MaxClaims(4).PerPool("python", 2)).Obj()
	type limit struct {
		Limit, Path, Tenant, Pool string
		Used, Max                 int32
	}
	zero := builders.MakeClaimPolicy("z", "ns").Tenant(builders.MakeTenant("a").User("alice").MaxClaims(0)).Obj()
	cases := map[string]struct {
		policy *tenancyv1alpha1.ClaimPolicy
		counts Counts
		charge Charge
		want   []limit
	}{
		"below every limit": {nil, Counts{{"a", "python"}: 1, {"", "python"}: 1}, Charge{Tenant: "a", Pool: "python"}, nil},
		"the tenant's pool limit": {nil, Counts{{"a", "python"}: 2}, Charge{Tenant: "a", Pool: "python"},
			[]limit{{"tenants.perPool", "spec.tenants[0].perPool[0].maxClaims", "a", "python", 2, 2}}},
		"the tenant's limit, other pools count": {nil, Counts{{"a", "python"}: 1, {"a", ""}: 3}, Charge{Tenant: "a"},
			[]limit{{"tenants.maxClaims", "spec.tenants[0].maxClaims", "a", "", 4, 4}}},
		"the namespace's pool limit, every tenant counts": {nil, Counts{{"a", "python"}: 1, {"", "python"}: 5}, Charge{Pool: "python"},
			[]limit{{"perPool", "spec.perPool[0].maxClaims", "", "python", 6, 6}}},
		"the namespace's limit": {nil, Counts{{"a", ""}: 3, {"", ""}: 7}, Charge{},
			[]limit{{"maxClaims", "spec.maxClaims", "", "", 10, 10}}},
		"several at once, the tenant's first": {nil, Counts{{"a", "python"}: 2, {"a", ""}: 2, {"", "python"}: 4, {"", ""}: 2}, Charge{Tenant: "a", Pool: "python"},
			[]limit{
				{"tenants.perPool", "spec.tenants[0].perPool[0].maxClaims", "a", "python", 2, 2},
				{"tenants.maxClaims", "spec.tenants[0].maxClaims", "a", "", 4, 4},
				{"perPool", "spec.perPool[0].maxClaims", "", "python", 6, 6},
				{"maxClaims", "spec.maxClaims", "", "", 10, 10},
			}},
		"a limit of zero refuses every claim": {zero, Counts{}, Charge{Tenant: "a", Pool: "python"},
			[]limit{{"tenants.maxClaims", "spec.tenants[0].maxClaims", "a", "", 0, 0}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			policy, want := tc.policy, tc.want
			if policy == nil {
				policy = p
			}
			var got []limit
			for _, e := range Exceed(policy, tc.counts, tc.charge) {
				got = append(got, limit{e.Limit, e.Path.String(), e.Tenant, e.Pool, e.Used, e.Max})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Exceed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLedgerCountsAddReservationsToTheCount(t *testing.T) {
	l := &tenancyv1alpha1.ClaimLedger{Status: tenancyv1alpha1.ClaimLedgerStatus{
		Counted:      []tenancyv1alpha1.LedgerCount{{Claims: 1}, {Tenant: "a", Pool: "python", Claims: 2}},
		Reservations: []tenancyv1alpha1.Reservation{{ID: "1", Tenant: "a", Pool: "python"}, {ID: "2"}},
	}}
	want := Counts{{"a", "python"}: 3, {"", ""}: 2}
	if diff := cmp.Diff(want, LedgerCounts(builders.MakeClaimPolicy("p", "ns").PerPool("python", 1).Obj(), l)); diff != "" {
		t.Errorf("LedgerCounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(l.Status.Counted, CountsList(Counts{{"", ""}: 1, {"a", "python"}: 2, {"b", ""}: 0})); diff != "" {
		t.Errorf("CountsList (-want +got):\n%s", diff)
	}
}
