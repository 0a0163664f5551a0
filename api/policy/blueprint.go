package policy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// PublicNameservers resolve names for pods under the secure default network policy, whose
// egress rules block the cluster's DNS.
var PublicNameservers = []string{"8.8.8.8", "1.1.1.1"}

// UsesSecureDefault reports whether a template gets the secure default network policy: it is
// Managed and has no rules of its own.
func UsesSecureDefault(tmpl *extv1beta1.SandboxTemplate) bool {
	return tmpl.Spec.NetworkPolicyManagement != extv1beta1.NetworkPolicyUnmanaged && tmpl.Spec.NetworkPolicy == nil
}

// TemplateBlueprint is the blueprint of every Sandbox the operator builds from tmpl: the
// template's own, the pod labels naming the template (LabelTemplateUID, which the template's
// NetworkPolicy selects, and the public LabelSandboxTemplateRefHash: two templates with the
// same spec still build different pods), no service account token unless the template says otherwise, and — under the
// secure default network policy, which blocks the cluster's DNS — public nameservers unless
// the template sets a dnsPolicy.
// The operator copies it verbatim into pool members; a cold start adds only what the claim
// asks for (ClaimBlueprint).
//
// The token default applies to every template, whatever its network policy, as the public
// controller applies it (its ApplySandboxSecureDefaults; the API documents it on
// podTemplate): the pods are the same, and the members that controller left behind are
// what this builds, so the pool takes them over in place (see
// reconcilers/sandboxwarmpool_controller.go).
func TemplateBlueprint(tmpl *extv1beta1.SandboxTemplate) agentsv1beta1.SandboxBlueprint {
	bp := *tmpl.Spec.SandboxBlueprint.DeepCopy()
	if bp.PodTemplate.ObjectMeta.Labels == nil {
		bp.PodTemplate.ObjectMeta.Labels = map[string]string{}
	}
	bp.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelSandboxTemplateRefHash] = agentsv1beta1.NameHash(tmpl.Name)
	if tmpl.UID != "" {
		// What the template's NetworkPolicy selects on: the template's UID cannot collide
		// with another template's, as the 32-bit name hash can.
		bp.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelTemplateUID] = string(tmpl.UID)
	}
	spec := &bp.PodTemplate.Spec
	if spec.AutomountServiceAccountToken == nil {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	if UsesSecureDefault(tmpl) && spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSNone
		if spec.DNSConfig == nil {
			spec.DNSConfig = &corev1.PodDNSConfig{}
		}
		if len(spec.DNSConfig.Nameservers) == 0 {
			spec.DNSConfig.Nameservers = append([]string(nil), PublicNameservers...)
		}
	}
	return bp
}

// TemplateHash identifies the current version of a template: the BlueprintHash of the
// blueprint the operator builds from it (TemplateBlueprint). It is a claim's stamp and a pool
// member's template-hash label.
//
// The binding guard trusts content, not labels: it admits a binding only when SandboxHash of
// the Sandbox — computed from the Sandbox's own spec by the same BlueprintHash — equals the
// claim's stamp. This holds exactly for what the operator builds, because a pool member's
// blueprint IS TemplateBlueprint(tmpl), copied verbatim, and nothing but the operator may
// change a member's spec afterwards.
func TemplateHash(tmpl *extv1beta1.SandboxTemplate) string {
	bp := TemplateBlueprint(tmpl)
	return agentsv1beta1.BlueprintHash(&bp)
}

// SandboxHash is the BlueprintHash of what a Sandbox is: its own blueprint, whatever its
// labels say.
func SandboxHash(sb *agentsv1beta1.Sandbox) string {
	return agentsv1beta1.BlueprintHash(&sb.Spec.SandboxBlueprint)
}

// SpecHash identifies a blueprint up to its pod metadata: two versions of a template with the
// same SpecHash build the same pods but for their labels and annotations, which a pool
// member takes on in place (its pod's metadata follows) instead of being replaced.
func SpecHash(bp *agentsv1beta1.SandboxBlueprint) string {
	spec := *bp.DeepCopy()
	spec.PodTemplate.ObjectMeta = agentsv1beta1.PodMetadata{}
	return agentsv1beta1.BlueprintHash(&spec)
}
