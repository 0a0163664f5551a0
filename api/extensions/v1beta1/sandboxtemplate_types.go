package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// NetworkPolicyManagement says whether the template controls a NetworkPolicy for its sandboxes.
// +kubebuilder:validation:Enum=Managed;Unmanaged
type NetworkPolicyManagement string

const (
	// NetworkPolicyManaged keeps <template>-network-policy with the template's rules or the
	// secure default.
	NetworkPolicyManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyUnmanaged deletes the policy the template controls, if any.
	NetworkPolicyUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy says whether claims may inject environment variables.
// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionAllowed lets claims add variables the template does not set.
	EnvVarsInjectionAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionOverrides lets claims add variables and override the template's.
	EnvVarsInjectionOverrides EnvVarsInjectionPolicy = "Overrides"
	// EnvVarsInjectionDisallowed rejects claims that set env.
	EnvVarsInjectionDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// VolumeClaimTemplatesPolicy says whether claims may bring their own volume claim templates.
// +kubebuilder:validation:Enum=Disallowed;Allowed;Overrides
type VolumeClaimTemplatesPolicy string

const (
	// VolumeClaimTemplatesDisallowed rejects claims that set volumeClaimTemplates.
	VolumeClaimTemplatesDisallowed VolumeClaimTemplatesPolicy = "Disallowed"
	// VolumeClaimTemplatesAllowed lets claims add templates with names the template does not use.
	VolumeClaimTemplatesAllowed VolumeClaimTemplatesPolicy = "Allowed"
	// VolumeClaimTemplatesOverrides lets claims add templates and replace the template's by name.
	VolumeClaimTemplatesOverrides VolumeClaimTemplatesPolicy = "Overrides"
)

// NetworkPolicySpec holds the rules of the managed NetworkPolicy.
type NetworkPolicySpec struct {
	// Ingress rules; empty denies all ingress.
	// +optional
	// +listType=atomic
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// Egress rules; empty denies all egress.
	// +optional
	// +listType=atomic
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is a blueprint plus the policies for sandboxes made from it.
type SandboxTemplateSpec struct {
	agentsv1beta1.SandboxBlueprint `json:",inline"`

	// NetworkPolicy rules of the managed policy; unset means the secure default.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// NetworkPolicyManagement says whether the template controls a NetworkPolicy.
	// +optional
	// +kubebuilder:default=Managed
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// EnvVarsInjectionPolicy says whether claims may set env.
	// +optional
	// +kubebuilder:default=Disallowed
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// VolumeClaimTemplatesPolicy says whether claims may set volumeClaimTemplates.
	// +optional
	// +kubebuilder:default=Disallowed
	VolumeClaimTemplatesPolicy VolumeClaimTemplatesPolicy `json:"volumeClaimTemplatesPolicy,omitempty"`
}

// SandboxTemplate is a blueprint for Sandboxes, used by warm pools and claims.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sandboxtemplate
// +kubebuilder:storageversion
type SandboxTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxTemplateSpec `json:"spec"`
}

// SandboxTemplateList is a list of SandboxTemplates.
// +kubebuilder:object:root=true
type SandboxTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxTemplate `json:"items"`
}

func init() {
	register(&SandboxTemplate{}, &SandboxTemplateList{})
}
