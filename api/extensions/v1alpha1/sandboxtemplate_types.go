package v1alpha1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
)

// NetworkPolicyManagement says whether the template controls a NetworkPolicy for its sandboxes.
type NetworkPolicyManagement string

const (
	// NetworkPolicyManaged keeps <template>-network-policy with the template's rules or the
	// secure default.
	NetworkPolicyManaged NetworkPolicyManagement = "Managed"
	// NetworkPolicyUnmanaged deletes the policy the template controls, if any.
	NetworkPolicyUnmanaged NetworkPolicyManagement = "Unmanaged"
)

// EnvVarsInjectionPolicy says whether claims may inject environment variables.
type EnvVarsInjectionPolicy string

const (
	// EnvVarsInjectionAllowed lets claims add variables the template does not set.
	EnvVarsInjectionAllowed EnvVarsInjectionPolicy = "Allowed"
	// EnvVarsInjectionOverrides lets claims add variables and override the template's.
	EnvVarsInjectionOverrides EnvVarsInjectionPolicy = "Overrides"
	// EnvVarsInjectionDisallowed rejects claims that set env.
	EnvVarsInjectionDisallowed EnvVarsInjectionPolicy = "Disallowed"
)

// NetworkPolicySpec holds the rules of the managed NetworkPolicy.
type NetworkPolicySpec struct {
	// Ingress rules; empty denies all ingress.
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`

	// Egress rules; empty denies all egress.
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
}

// SandboxTemplateSpec is a blueprint plus the policies for sandboxes made from it. v1alpha1
// has no volumeClaimTemplatesPolicy: see sandboxtemplate_conversion.go.
type SandboxTemplateSpec struct {
	// PodTemplate describes the sandbox pod.
	// +required
	PodTemplate agentsv1alpha1.PodTemplate `json:"podTemplate"`

	// VolumeClaimTemplates are PVCs created for each sandbox made from the template.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []agentsv1alpha1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// NetworkPolicy rules of the managed policy; unset means the secure default.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// NetworkPolicyManagement says whether the template controls a NetworkPolicy.
	// +optional
	// +kubebuilder:validation:Enum=Managed;Unmanaged
	// +kubebuilder:default=Managed
	NetworkPolicyManagement NetworkPolicyManagement `json:"networkPolicyManagement,omitempty"`

	// EnvVarsInjectionPolicy says whether claims may set env.
	// +optional
	// +kubebuilder:validation:Enum=Allowed;Overrides;Disallowed
	// +kubebuilder:default=Disallowed
	EnvVarsInjectionPolicy EnvVarsInjectionPolicy `json:"envVarsInjectionPolicy,omitempty"`

	// Service asks for a headless Service per sandbox when true; false deletes one the sandbox
	// owns; unset keeps an existing one but never creates it.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// SandboxTemplate is a blueprint for Sandboxes, used by warm pools and claims (deprecated
// version).
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=sandboxtemplate
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxTemplate instead"
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
