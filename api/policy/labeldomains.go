package policy

import (
	"fmt"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The label allowlist of claims, as the public controller has it (its
// extensions/controllers/sandboxclaim_controller.go, validateAdditionalPodMetadata): a label a
// claim's additionalPodMetadata puts on its pod must carry a domain prefix, and that domain
// must be one of the allowed ones or a subdomain of one. A tenant's label lands on a pod the
// platform's template defines, next to the labels NetworkPolicies, Services and monitoring
// select on; an allowlist keeps the tenant out of every label domain the platform did not hand
// out. app=sandbox-router is refused by name: the template's default NetworkPolicy admits
// traffic from pods labelled so. Annotations are not allowlisted (ValidateClaimPodMetadata
// refuses the reserved and runtime ones).

// DefaultClaimLabelDomains is the allowlist when none is configured, or the configured one
// is empty: the public controller's default.
var DefaultClaimLabelDomains = []string{"sandbox.users.io"}

// routerLabelKey and routerLabelValue are the label of the public sandbox router, which
// templates' default NetworkPolicy lets into every sandbox.
const (
	routerLabelKey   = "app"
	routerLabelValue = "sandbox-router"
)

// ParseLabelDomains reads an allowed-label-domains file the way the public controller does:
// entries separated by commas and line breaks, each trimmed and lowercased, empty ones
// dropped. nil when it holds none.
func ParseLabelDomains(s string) []string {
	var domains []string
	for _, d := range strings.FieldsFunc(s, func(c rune) bool { return c == ',' || c == '\n' || c == '\r' }) {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			domains = append(domains, d)
		}
	}
	return domains
}

// LabelDomains holds the claim label allowlist in effect, for the admission webhook and the
// claim controller alike; the operator replaces it when its ConfigMap changes. Safe for
// concurrent use. A nil or never set LabelDomains is DefaultClaimLabelDomains.
type LabelDomains struct {
	domains atomic.Pointer[[]string]
}

// NewLabelDomains returns a LabelDomains holding domains (see Set).
func NewLabelDomains(domains []string) *LabelDomains {
	l := &LabelDomains{}
	l.Set(domains)
	return l
}

// Set replaces the allowlist; an empty list restores DefaultClaimLabelDomains, as an empty
// file does for the public controller. Entries are lowercased and trimmed.
func (l *LabelDomains) Set(domains []string) {
	parsed := ParseLabelDomains(strings.Join(domains, ","))
	l.domains.Store(&parsed)
}

// Get returns the allowlist in effect.
func (l *LabelDomains) Get() []string {
	if l != nil {
		if p := l.domains.Load(); p != nil && len(*p) > 0 {
			return *p
		}
	}
	return DefaultClaimLabelDomains
}

// ValidateClaimLabelDomains checks the labels of a claim's additionalPodMetadata against the
// allowlist allowed (LabelDomains.Get): every label has a domain prefix that is an allowed
// domain or a subdomain of one (compared without regard to case), and none is
// app=sandbox-router. Keys that are not valid label keys, or that IsReservedClaimKey refuses,
// are left to ValidateClaimPodMetadata, which reports them already. An empty allowed is
// DefaultClaimLabelDomains.
func ValidateClaimLabelDomains(labels map[string]string, fldPath *field.Path, allowed []string) field.ErrorList {
	if len(allowed) == 0 {
		allowed = DefaultClaimLabelDomains
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		if len(validation.IsQualifiedName(k)) > 0 || IsReservedClaimKey(k) {
			continue
		}
		p := fldPath.Key(k)
		if strings.EqualFold(k, routerLabelKey) && strings.EqualFold(labels[k], routerLabelValue) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"%s=%s is the sandbox router's label, which sandbox network policies admit; a claim may not set it", routerLabelKey, routerLabelValue)))
			continue
		}
		prefix, _, found := strings.Cut(k, "/")
		if !found {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"a claim's pod labels need a domain prefix (e.g. %s/%s) under one of the allowed domains: %s",
				allowed[0], k, strings.Join(allowed, ", "))))
			continue
		}
		if !labelDomainAllowed(strings.ToLower(prefix), allowed) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"label domain %q is not in the allowlist; allowed domains (and their subdomains): %s",
				strings.ToLower(prefix), strings.Join(allowed, ", "))))
		}
	}
	return errs
}

// labelDomainAllowed reports whether domain is one of allowed or a subdomain of one.
func labelDomainAllowed(domain string, allowed []string) bool {
	for _, d := range allowed {
		d = strings.ToLower(d)
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}
