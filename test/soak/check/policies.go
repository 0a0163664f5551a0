package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// checkPolicies proves that, once settled, every ClaimPolicy's usage is the truth: the claims
// of its namespace the final list shows, counted against each of its limits (the namespace, each
// pool its status names, each tenant and the unnamed creators), none reserved; and that its
// ledgers count the same claims and hold no reservation. The tenant of a claim is worked out
// here from the identity admission recorded on it, apart from the operator's code.
func (c *checker) checkPolicies() {
	f := &c.in.Final
	for i := range f.ClaimPolicies {
		p := &f.ClaimPolicies[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		var claims []*extv1beta1.SandboxClaim
		for j := range f.Claims {
			if f.Claims[j].Namespace == p.Namespace {
				claims = append(claims, &f.Claims[j])
			}
		}
		obj := "ClaimPolicy " + p.Namespace + "/" + p.Name
		wrong := func(what string, shown, truth int32) {
			if shown != truth {
				c.violate(InvariantPolicyUsage, obj, time.Time{}, "%s: the status shows %d, %d exist", what, shown, truth)
			}
		}
		st := &p.Status
		wrong("claims", st.Claims, int32(len(claims)))
		wrong("claims reserved", st.Reserved, 0)
		for _, u := range st.Pools {
			if u.PoolName != tenancyv1alpha1.OtherPools {
				wrong("claims of pool "+u.PoolName, u.Claims, count(claims, func(cl *extv1beta1.SandboxClaim) bool { return cl.Spec.WarmPoolRef.Name == u.PoolName }))
			}
		}
		tenants := append([]tenancyv1alpha1.TenantStatus(nil), st.Tenants...)
		if st.Unnamed != nil {
			tenants = append(tenants, *st.Unnamed)
		}
		for _, t := range tenants {
			name := t.Name
			if name == tenancyv1alpha1.UnnamedTenant {
				name = ""
			}
			wrong(fmt.Sprintf("claims of tenant %s", t.Name), t.Claims, count(claims, func(cl *extv1beta1.SandboxClaim) bool { return tenantOf(p, cl) == name }))
			wrong(fmt.Sprintf("claims of tenant %s reserved", t.Name), t.Reserved, 0)
		}
		c.checkLedgers(p, claims)
	}
}

// checkLedgers proves that p's ledgers hold no reservation and count the claims of their
// scope (a tenant's, or every claim of the namespace).
func (c *checker) checkLedgers(p *tenancyv1alpha1.ClaimPolicy, claims []*extv1beta1.SandboxClaim) {
	for i := range c.in.Final.ClaimLedgers {
		l := &c.in.Final.ClaimLedgers[i]
		if l.Namespace != p.Namespace || l.Spec.PolicyName != p.Name || l.Status.Retired {
			continue
		}
		obj := "ClaimLedger " + l.Namespace + "/" + l.Name
		if n := len(l.Status.Reservations); n > 0 {
			c.violate(InvariantPolicyUsage, obj, time.Time{}, "%d reservations left, none of them a claim", n)
		}
		var counted int32
		for _, n := range l.Status.Counted {
			counted += n.Claims
		}
		truth := count(claims, func(cl *extv1beta1.SandboxClaim) bool { return l.Spec.Tenant == "" || tenantOf(p, cl) == l.Spec.Tenant })
		if counted != truth {
			c.violate(InvariantPolicyUsage, obj, time.Time{}, "counts %d claims, %d exist", counted, truth)
		}
	}
}

func count(claims []*extv1beta1.SandboxClaim, match func(*extv1beta1.SandboxClaim) bool) int32 {
	var n int32
	for _, cl := range claims {
		if match(cl) {
			n++
		}
	}
	return n
}

// tenantOf is the first tenant of p one of whose subjects names the claim's creator, as
// admission recorded it (user name and groups); "" when none does.
func tenantOf(p *tenancyv1alpha1.ClaimPolicy, cl *extv1beta1.SandboxClaim) string {
	user := cl.Annotations[agentsv1beta1.AnnotationCreator]
	var groups []string
	if g := cl.Annotations[tenancyv1alpha1.AnnotationCreatorGroups]; g != "" {
		groups = strings.Split(g, ",")
	}
	for _, t := range p.Spec.Tenants {
		for _, s := range t.Subjects {
			switch s.Kind {
			case tenancyv1alpha1.SubjectUser:
				if user != "" && user == s.Name {
					return t.Name
				}
			case tenancyv1alpha1.SubjectGroup:
				if slices.Contains(groups, s.Name) {
					return t.Name
				}
			case tenancyv1alpha1.SubjectServiceAccount:
				ns := s.Namespace
				if ns == "" {
					ns = p.Namespace
				}
				if user == "system:serviceaccount:"+ns+":"+s.Name {
					return t.Name
				}
			}
		}
	}
	return ""
}
