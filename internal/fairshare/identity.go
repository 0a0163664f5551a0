// Package fairshare holds the rules of ClaimPolicies (docs/fair-share.md) that admission and
// the controllers both apply, written once: whose a claim is (TenantOf), what it counts
// against (ChargeOf), which limits it would exceed (Exceeded), which ledgers a policy keeps
// (Ledgers), how the leader recounts a ledger from the claims that exist (Recount), and
// whether a claim may have a warm member (DecideWarm). Every function is pure: no API reads,
// no clock; the callers pass what their caches show and the time.
package fairshare

import (
	"slices"
	"strings"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// serviceAccountPrefix is the user name prefix of service accounts.
const serviceAccountPrefix = "system:serviceaccount:"

// Identity is who created a claim: the user name and groups admission saw.
type Identity struct {
	User   string
	Groups []string
}

// IdentityOf is the identity a claim records of its creator: sandgate.dev/creator and
// policy.sandgate.dev/creator-groups, both set by admission and immutable. A claim created
// before admission recorded them has an empty identity, which no tenant names.
func IdentityOf(c *extv1beta1.SandboxClaim) Identity {
	id := Identity{User: c.Annotations[agentsv1beta1.AnnotationCreator]}
	if g := c.Annotations[tenancyv1alpha1.AnnotationCreatorGroups]; g != "" {
		id.Groups = strings.Split(g, ",")
	}
	return id
}

// RecordedGroups is the value of policy.sandgate.dev/creator-groups for a creator of these
// groups: sorted and without duplicates, at most MaxCreatorGroups, those a Group subject of
// policies names first (so that a creator with very many groups still matches its tenant).
// Groups holding a comma, which the record cannot hold, are left out.
func RecordedGroups(groups []string, policies []tenancyv1alpha1.ClaimPolicy) string {
	named := map[string]bool{}
	for i := range policies {
		for _, t := range policies[i].Spec.Tenants {
			for _, s := range t.Subjects {
				if s.Kind == tenancyv1alpha1.SubjectGroup {
					named[s.Name] = true
				}
			}
		}
	}
	var first, rest []string
	for _, g := range groups {
		switch {
		case g == "" || strings.Contains(g, ","):
		case named[g]:
			first = append(first, g)
		default:
			rest = append(rest, g)
		}
	}
	slices.Sort(first)
	slices.Sort(rest)
	kept := append(slices.Compact(first), slices.Compact(rest)...)
	if len(kept) > tenancyv1alpha1.MaxCreatorGroups {
		kept = kept[:tenancyv1alpha1.MaxCreatorGroups]
	}
	slices.Sort(kept)
	return strings.Join(slices.Compact(kept), ",")
}

// TenantOf is the tenant of policy p a creator belongs to: the first tenant with a subject
// that matches the identity, "" for none (the policy's unnamed creators).
func TenantOf(p *tenancyv1alpha1.ClaimPolicy, id Identity) string {
	if id.User == "" && len(id.Groups) == 0 {
		return ""
	}
	for _, t := range p.Spec.Tenants {
		for _, s := range t.Subjects {
			if SubjectMatches(s, p.Namespace, id) {
				return t.Name
			}
		}
	}
	return ""
}

// SubjectMatches reports whether subject s of a policy in namespace ns names the identity.
// A ServiceAccount subject without a namespace is one of the policy's namespace.
func SubjectMatches(s tenancyv1alpha1.Subject, ns string, id Identity) bool {
	switch s.Kind {
	case tenancyv1alpha1.SubjectUser:
		return id.User != "" && id.User == s.Name
	case tenancyv1alpha1.SubjectGroup:
		return slices.Contains(id.Groups, s.Name)
	case tenancyv1alpha1.SubjectServiceAccount:
		saNS := s.Namespace
		if saNS == "" {
			saNS = ns
		}
		return id.User == serviceAccountPrefix+saNS+":"+s.Name
	}
	return false
}

// MetricTenant is the tenant label of the metrics for tenant ("" is unnamed).
func MetricTenant(tenant string) string {
	if tenant == "" {
		return tenancyv1alpha1.UnnamedTenant
	}
	return tenant
}
