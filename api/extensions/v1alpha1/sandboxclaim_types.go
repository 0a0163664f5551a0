package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
)

// WarmPoolPolicy says where a v1alpha1 claim's sandbox comes from: "none" (always a fresh
// sandbox), "default" (any pool of the template; the default) or the name of one pool.
type WarmPoolPolicy string

const (
	// WarmPoolPolicyNone asks for a fresh sandbox, never a pool member.
	WarmPoolPolicyNone WarmPoolPolicy = "none"
	// WarmPoolPolicyDefault asks for a member of any pool of the claim's template.
	WarmPoolPolicyDefault WarmPoolPolicy = "default"
)

// IsSpecificPool reports whether the policy names a pool rather than being "", "none" or
// "default".
func (p WarmPoolPolicy) IsSpecificPool() bool {
	return p != "" && p != WarmPoolPolicyNone && p != WarmPoolPolicyDefault
}

// ShutdownPolicy says what happens when a claim expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the claim, and through ownership its Sandbox.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyDeleteForeground deletes the claim in the foreground: it stays until its
	// Sandbox is gone.
	ShutdownPolicyDeleteForeground ShutdownPolicy = "DeleteForeground"
	// ShutdownPolicyRetain deletes only the Sandbox and keeps the claim.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle of a claim.
type Lifecycle struct {
	// ShutdownTime is when the claim expires.
	// +optional
	// +kubebuilder:validation:Format="date-time"
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// TTLSecondsAfterFinished expires the claim this long after its Sandbox finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ShutdownPolicy says what happens when the claim expires.
	// +optional
	// +kubebuilder:default=Retain
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// EnvVar is an environment variable a claim injects into its sandbox.
type EnvVar struct {
	// Name of the variable.
	// +required
	Name string `json:"name"`

	// Value of the variable.
	// +required
	Value string `json:"value"`

	// ContainerName limits the variable to one container; empty means every container.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// SandboxClaimSpec is the desired state of a v1alpha1 claim.
type SandboxClaimSpec struct {
	// TemplateRef names the template of the claim's sandbox.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// Lifecycle of the claim.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// WarmPool is "none", "default" or a pool name; see WarmPoolPolicy.
	// +optional
	// +kubebuilder:default=default
	WarmPool *WarmPoolPolicy `json:"warmpool,omitempty"`

	// AdditionalPodMetadata is merged into the sandbox pod's metadata.
	// +optional
	AdditionalPodMetadata agentsv1alpha1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// Env is injected into the sandbox's containers, as the template's policy allows.
	// +optional
	// +listType=atomic
	Env []EnvVar `json:"env,omitempty"`
}

// SandboxStatusRef describes the Sandbox a claim is bound to.
type SandboxStatusRef struct {
	// Name of the Sandbox.
	// +optional
	Name string `json:"name,omitempty"`

	// PodIPs of the Sandbox's pod.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// SandboxClaimStatus is the observed state of a claim.
type SandboxClaimStatus struct {
	// Conditions: Ready, Finished.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SandboxStatus is the Sandbox the claim is bound to.
	// +optional
	SandboxStatus SandboxStatusRef `json:"sandbox,omitempty"`
}

// SandboxClaim requests one Sandbox of a template (deprecated version).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sandboxclaim
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxClaim is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxClaim instead"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=".status.sandbox.name"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type SandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxClaimSpec `json:"spec"`
	// +optional
	Status SandboxClaimStatus `json:"status,omitempty"`
}

// SandboxClaimList is a list of SandboxClaims.
// +kubebuilder:object:root=true
type SandboxClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxClaim `json:"items"`
}

func init() {
	register(&SandboxClaim{}, &SandboxClaimList{})
}
