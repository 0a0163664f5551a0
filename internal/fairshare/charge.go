package fairshare

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
)

// NamespaceWide reports whether policy p has limits that span every creator (spec.maxClaims
// or spec.perPool): one ledger then counts every claim of the namespace, and every admission
// the policy limits is reserved in it. Without them each tenant with a limit has a ledger of
// its own, and one tenant's admissions never contend with another's.
func NamespaceWide(p *tenancyv1alpha1.ClaimPolicy) bool {
	return p.Spec.MaxClaims != nil || len(p.Spec.PerPool) > 0
}

// LedgerName is the name of the ledger of policy's tenant ("" for the namespace-wide one).
// Policy names are DNS labels (ValidateClaimPolicy), so no two ledgers' names collide.
func LedgerName(policy, tenant string) string {
	if tenant == "" {
		return policy
	}
	return policy + "." + tenant
}

// Ledgers are the ledgers policy p keeps: the namespace-wide one, or one per tenant that has a
// limit (a tenant with warm shares only has nothing to count at admission).
func Ledgers(p *tenancyv1alpha1.ClaimPolicy) []tenancyv1alpha1.ClaimLedgerSpec {
	if NamespaceWide(p) {
		return []tenancyv1alpha1.ClaimLedgerSpec{{PolicyName: p.Name}}
	}
	var out []tenancyv1alpha1.ClaimLedgerSpec
	for _, t := range p.Spec.Tenants {
		if t.MaxClaims != nil || len(t.PerPool) > 0 {
			out = append(out, tenancyv1alpha1.ClaimLedgerSpec{PolicyName: p.Name, Tenant: t.Name})
		}
	}
	return out
}

// Charge is what a claim counts against in one policy.
type Charge struct {
	// Policy is the policy's name.
	Policy string
	// Ledger names the ledger the claim is reserved in; "" when no limit of the policy
	// applies to it (nothing to reserve).
	Ledger string
	// Tenant is the claim's tenant in the policy, "" for unnamed.
	Tenant string
	// Pool is the claim's pool when a limit of the policy names it, else OtherPools.
	Pool string
}

// Key is what a ledger counts by.
type Key struct{ Tenant, Pool string }

// Key is the ledger key of the charge.
func (c Charge) Key() Key { return Key{Tenant: c.Tenant, Pool: c.Pool} }

// ChargeOf is what a claim of pool by identity id counts against in policy p.
func ChargeOf(p *tenancyv1alpha1.ClaimPolicy, id Identity, pool string) Charge {
	c := Charge{Policy: p.Name, Tenant: TenantOf(p, id), Pool: PoolKey(p, pool)}
	t := tenantSpec(p, c.Tenant)
	switch {
	case NamespaceWide(p):
		c.Ledger = LedgerName(p.Name, "")
	case t != nil && (t.MaxClaims != nil || len(t.PerPool) > 0):
		c.Ledger = LedgerName(p.Name, c.Tenant)
	}
	return c
}

// PoolKey is the pool a ledger counts a claim of pool under: pool when a limit of p names
// it, else OtherPools.
func PoolKey(p *tenancyv1alpha1.ClaimPolicy, pool string) string {
	if findPool(p.Spec.PerPool, pool) >= 0 {
		return pool
	}
	for _, t := range p.Spec.Tenants {
		if findPool(t.PerPool, pool) >= 0 {
			return pool
		}
	}
	return tenancyv1alpha1.OtherPools
}

func findPool(limits []tenancyv1alpha1.PoolLimit, pool string) int {
	for i, l := range limits {
		if l.PoolName == pool {
			return i
		}
	}
	return -1
}

func tenantIndex(p *tenancyv1alpha1.ClaimPolicy, name string) int {
	if name == "" {
		return -1
	}
	for i := range p.Spec.Tenants {
		if p.Spec.Tenants[i].Name == name {
			return i
		}
	}
	return -1
}

func tenantSpec(p *tenancyv1alpha1.ClaimPolicy, name string) *tenancyv1alpha1.Tenant {
	if i := tenantIndex(p, name); i >= 0 {
		return &p.Spec.Tenants[i]
	}
	return nil
}

// Counts are claims by tenant and pool key.
type Counts map[Key]int32

// LedgerCounts is what a ledger holds for policy p: the operator's count plus the
// reservations since, each under its claim's pool key in p.
func LedgerCounts(p *tenancyv1alpha1.ClaimPolicy, l *tenancyv1alpha1.ClaimLedger) Counts {
	c := Counts{}
	for _, n := range l.Status.Counted {
		c[Key{n.Tenant, n.Pool}] += n.Claims
	}
	for _, r := range l.Status.Reservations {
		c[Key{r.Tenant, PoolKey(p, r.Pool)}]++
	}
	return c
}

// sum adds the counts whose key matches (an empty tenant or pool in match stands for any;
// any is true for the field it matches all of).
func (c Counts) sum(tenant string, anyTenant bool, pool string, anyPool bool) int32 {
	var n int32
	for k, v := range c {
		if (anyTenant || k.Tenant == tenant) && (anyPool || k.Pool == pool) {
			n += v
		}
	}
	return n
}

// Exceeded is a limit a claim would take beyond its maximum.
type Exceeded struct {
	// Limit is which kind of limit (LimitMaxClaims, ...), the refusal metric's label.
	Limit string
	// Path is the limit's field in the policy.
	Path *field.Path
	// Tenant and Pool say whose and which claims the limit counts ("" for all).
	Tenant, Pool string
	// Used is the claims counted against the limit; Max the limit.
	Used, Max int32
}

// Exceed lists the limits of p that one more claim of charge ch would exceed, given the
// counts of its ledger: the tenant's first, then the namespace's.
func Exceed(p *tenancyv1alpha1.ClaimPolicy, counts Counts, ch Charge) []Exceeded {
	var out []Exceeded
	spec := field.NewPath("spec")
	if i := tenantIndex(p, ch.Tenant); i >= 0 {
		t := &p.Spec.Tenants[i]
		tp := spec.Child("tenants").Index(i)
		if j := findPool(t.PerPool, ch.Pool); j >= 0 && ch.Pool != tenancyv1alpha1.OtherPools {
			if used := counts.sum(ch.Tenant, false, ch.Pool, false); used >= t.PerPool[j].MaxClaims {
				out = append(out, Exceeded{Limit: tenancyv1alpha1.LimitTenantPerPool, Path: tp.Child("perPool").Index(j).Child("maxClaims"),
					Tenant: ch.Tenant, Pool: ch.Pool, Used: used, Max: t.PerPool[j].MaxClaims})
			}
		}
		if t.MaxClaims != nil {
			if used := counts.sum(ch.Tenant, false, "", true); used >= *t.MaxClaims {
				out = append(out, Exceeded{Limit: tenancyv1alpha1.LimitTenantMaxClaims, Path: tp.Child("maxClaims"),
					Tenant: ch.Tenant, Used: used, Max: *t.MaxClaims})
			}
		}
	}
	if j := findPool(p.Spec.PerPool, ch.Pool); j >= 0 && ch.Pool != tenancyv1alpha1.OtherPools {
		if used := counts.sum("", true, ch.Pool, false); used >= p.Spec.PerPool[j].MaxClaims {
			out = append(out, Exceeded{Limit: tenancyv1alpha1.LimitPerPool, Path: spec.Child("perPool").Index(j).Child("maxClaims"),
				Pool: ch.Pool, Used: used, Max: p.Spec.PerPool[j].MaxClaims})
		}
	}
	if p.Spec.MaxClaims != nil {
		if used := counts.sum("", true, "", true); used >= *p.Spec.MaxClaims {
			out = append(out, Exceeded{Limit: tenancyv1alpha1.LimitMaxClaims, Path: spec.Child("maxClaims"),
				Used: used, Max: *p.Spec.MaxClaims})
		}
	}
	return out
}

// Describe says what an exceeded limit of policy counts, for a person: "tenant team-b's
// claims of pool python".
func (e Exceeded) Describe() string {
	var who string
	switch {
	case e.Tenant != "" && e.Pool != "":
		who = fmt.Sprintf("tenant %s's claims of pool %s", e.Tenant, e.Pool)
	case e.Tenant != "":
		who = fmt.Sprintf("tenant %s's claims", e.Tenant)
	case e.Pool != "":
		who = fmt.Sprintf("the namespace's claims of pool %s", e.Pool)
	default:
		who = "the namespace's claims"
	}
	return who
}

// CountsList is counts as a ledger's status.counted holds them, in a stable order.
func CountsList(c Counts) []tenancyv1alpha1.LedgerCount {
	out := make([]tenancyv1alpha1.LedgerCount, 0, len(c))
	for k, v := range c {
		if v != 0 {
			out = append(out, tenancyv1alpha1.LedgerCount{Tenant: k.Tenant, Pool: k.Pool, Claims: v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Pool < out[j].Pool
	})
	return out
}
