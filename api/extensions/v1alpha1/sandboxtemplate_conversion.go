package v1alpha1

import (
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/internal/extras"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// SandboxTemplate conversion: the same data under the same JSON names, except that v1alpha1
// has no volumeClaimTemplatesPolicy. A v1alpha1 client sees a template's policy in
// annotation conversion.sandgate.dev/v1beta1-fields ({"spec":{"volumeClaimTemplatesPolicy":
// ...}}), which carries it back when the client writes the template; a template created
// through v1alpha1 has none and gets v1beta1's default, Disallowed.

// templateBetaFields are the v1beta1 values v1alpha1 cannot hold, kept on the v1alpha1 object.
type templateBetaFields struct {
	Spec *templateBetaSpec `json:"spec,omitempty"`
}

type templateBetaSpec struct {
	VolumeClaimTemplatesPolicy extv1beta1.VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy"`
}

var _ conversion.Convertible = &SandboxTemplate{}

// ConvertTo converts this v1alpha1 SandboxTemplate to v1beta1, the hub.
func (src *SandboxTemplate) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*extv1beta1.SandboxTemplate)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1alpha1Key)
	s := &src.Spec
	dst.Spec = extv1beta1.SandboxTemplateSpec{
		SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate:          agentsv1alpha1.PodTemplateTo(&s.PodTemplate),
			VolumeClaimTemplates: agentsv1alpha1.ClaimTemplatesTo(s.VolumeClaimTemplates),
			Service:              extras.Ptr(s.Service),
		},
		NetworkPolicyManagement: extv1beta1.NetworkPolicyManagement(s.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:  extv1beta1.EnvVarsInjectionPolicy(s.EnvVarsInjectionPolicy),
	}
	if s.NetworkPolicy != nil {
		dst.Spec.NetworkPolicy = &extv1beta1.NetworkPolicySpec{}
		s.NetworkPolicy.DeepCopyInto((*NetworkPolicySpec)(dst.Spec.NetworkPolicy))
	}
	var beta templateBetaFields
	if extras.Take(&dst.Annotations, extras.V1beta1Key, &beta) && beta.Spec != nil {
		// v1alpha1 cannot change the policy, so a saved one always still holds.
		dst.Spec.VolumeClaimTemplatesPolicy = beta.Spec.VolumeClaimTemplatesPolicy
	}
	return nil
}

// ConvertFrom converts a v1beta1 SandboxTemplate, the hub, to this v1alpha1 SandboxTemplate.
func (dst *SandboxTemplate) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*extv1beta1.SandboxTemplate)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1alpha1Key)
	extras.Drop(&dst.Annotations, extras.V1beta1Key)
	s := &src.Spec
	dst.Spec = SandboxTemplateSpec{
		PodTemplate:             agentsv1alpha1.PodTemplateFrom(&s.PodTemplate),
		VolumeClaimTemplates:    agentsv1alpha1.ClaimTemplatesFrom(s.VolumeClaimTemplates),
		NetworkPolicyManagement: NetworkPolicyManagement(s.NetworkPolicyManagement),
		EnvVarsInjectionPolicy:  EnvVarsInjectionPolicy(s.EnvVarsInjectionPolicy),
		Service:                 extras.Ptr(s.Service),
	}
	if s.NetworkPolicy != nil {
		dst.Spec.NetworkPolicy = &NetworkPolicySpec{}
		(*NetworkPolicySpec)(s.NetworkPolicy).DeepCopyInto(dst.Spec.NetworkPolicy)
	}
	if s.VolumeClaimTemplatesPolicy != "" {
		extras.Put(&dst.Annotations, extras.V1beta1Key, templateBetaFields{Spec: &templateBetaSpec{VolumeClaimTemplatesPolicy: s.VolumeClaimTemplatesPolicy}})
	}
	return nil
}
