package policy

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The label allowlist of claims, as the public controller has it (its
// extensions/controllers/sandboxclaim_controller.go, validateAdditionalPodMetadata): a label a
// claim's additionalPodMetadata puts on its pod must carry a domain prefix, and that domain
// must be one of the allowed ones or a subdomain of one. A tenant's label lands on a pod the
// platform's template defines, next to the labels NetworkPolicies, Services and monitoring
// select on; an allowlist keeps the tenant out of every label domain the platform did not hand
// out. app=sandbox-router is refused by name: the template's default NetworkPolicy admits
// traffic from pods labelled so.
//
// A claim's pod annotations are allowlisted the same way (sandgate's own rule; the public
// controller only blocks a few domains): annotations are how a service mesh, a CNI and the
// container runtime take orders from a pod (sidecar.istio.io/inject: "false" opts the pod out
// of the mesh, k8s.v1.cni.cncf.io/networks attaches networks, crun reads run.oci.*), and no
// blocklist can name every component a cluster runs. The platform hands out annotation
// domains with --claim-allowed-annotation-domains; the runtime prefixes
// (--claim-refused-annotation-prefixes) stay refused on top of it.

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

// DefaultClaimAnnotationDomains is the annotation allowlist when none is configured: the
// label allowlist's default domain, which no component of a cluster reads orders from.
var DefaultClaimAnnotationDomains = []string{"sandbox.users.io"}

// ClaimAnnotationDomainsFlag is the operator flag that sets the annotation allowlist; refusals
// name it, so that a tenant knows what to ask the platform for.
const ClaimAnnotationDomainsFlag = "--claim-allowed-annotation-domains"

// ValidateClaimAnnotationDomains checks the annotations of a claim's additionalPodMetadata
// against the allowlist allowed: every annotation has a domain prefix that is an allowed
// domain or a subdomain of one (compared without regard to case). Unprefixed keys are
// refused too: the container runtimes read their options from such keys (run.oci.*,
// io.kubernetes.cri-o.*). Keys that are not valid annotation keys, that IsReservedClaimKey or
// the runtime prefixes refuse, are left to ValidateClaimPodMetadata, which reports them
// already; the keys of claimKeyExceptions stay allowed, as the public controller allows them.
// An empty allowed is DefaultClaimAnnotationDomains.
func ValidateClaimAnnotationDomains(annotations map[string]string, fldPath *field.Path, allowed []string) field.ErrorList {
	if len(allowed) == 0 {
		allowed = DefaultClaimAnnotationDomains
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(annotations) {
		if len(validation.IsQualifiedName(strings.ToLower(k))) > 0 || IsReservedClaimKey(k) || isRuntimeAnnotation(k) ||
			slices.Contains(claimKeyExceptions, k) {
			continue
		}
		prefix, _, found := strings.Cut(k, "/")
		if !found {
			errs = append(errs, field.Forbidden(fldPath.Key(k), fmt.Sprintf(
				"a claim's pod annotations need a domain prefix (e.g. %s/%s) under one of the allowed domains: %s "+
					"(the platform sets them with %s)",
				allowed[0], k, strings.Join(allowed, ", "), ClaimAnnotationDomainsFlag)))
			continue
		}
		if !labelDomainAllowed(strings.ToLower(prefix), allowed) {
			errs = append(errs, field.Forbidden(fldPath.Key(k), fmt.Sprintf(
				"annotation domain %q is not in the allowlist; allowed domains (and their subdomains): %s "+
					"(the platform sets them with %s)",
				strings.ToLower(prefix), strings.Join(allowed, ", "), ClaimAnnotationDomainsFlag)))
		}
	}
	return errs
}

// ValidateClaimMetadataDomains checks a claim's additionalPodMetadata (md, at fldPath) against
// both allowlists: its labels against labelDomains (ValidateClaimLabelDomains), its
// annotations against annotationDomains (ValidateClaimAnnotationDomains). Admission and the
// claim controller both apply it.
func ValidateClaimMetadataDomains(md *agentsv1beta1.PodMetadata, fldPath *field.Path, labelDomains, annotationDomains []string) field.ErrorList {
	return append(ValidateClaimLabelDomains(md.Labels, fldPath.Child("labels"), labelDomains),
		ValidateClaimAnnotationDomains(md.Annotations, fldPath.Child("annotations"), annotationDomains)...)
}

// ValidateAnnotationDomains checks a configured annotation allowlist: every entry a DNS
// subdomain (lowercase), as the prefix of an annotation key must be.
func ValidateAnnotationDomains(domains []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, d := range domains {
		for _, msg := range validation.IsDNS1123Subdomain(d) {
			errs = append(errs, field.Invalid(fldPath.Index(i), d, msg))
		}
	}
	return errs
}
