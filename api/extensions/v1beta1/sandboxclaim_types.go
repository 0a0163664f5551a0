package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimShutdownPolicy says what happens when a claim expires.
// +kubebuilder:validation:Enum=Delete;DeleteForeground;Retain
type ClaimShutdownPolicy string

const (
	// ClaimShutdownPolicyDelete deletes the claim, and through ownership its Sandbox.
	ClaimShutdownPolicyDelete ClaimShutdownPolicy = "Delete"
	// ClaimShutdownPolicyDeleteForeground deletes the claim in the foreground: it stays until its
	// Sandbox is gone.
	ClaimShutdownPolicyDeleteForeground ClaimShutdownPolicy = "DeleteForeground"
	// ClaimShutdownPolicyRetain deletes only the Sandbox and keeps the claim.
	ClaimShutdownPolicyRetain ClaimShutdownPolicy = "Retain"
)

// WarmPoolRef names a SandboxWarmPool in the same namespace.
type WarmPoolRef struct {
	// Name of the pool.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Lifecycle of a claim.
type Lifecycle struct {
	// ShutdownTime is when the claim expires.
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// TTLSecondsAfterFinished expires the claim this long after its Sandbox finished.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2147483647
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// ShutdownPolicy says what happens when the claim expires.
	// +optional
	// +kubebuilder:default=Retain
	ShutdownPolicy ClaimShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// EnvVar is an environment variable a claim injects into its sandbox.
type EnvVar struct {
	// Name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Value of the variable.
	// +optional
	Value string `json:"value,omitempty"`

	// ContainerName limits the variable to one container; empty means every container.
	// +optional
	ContainerName string `json:"containerName,omitempty"`
}

// SandboxClaimSpec is the desired state of a claim.
type SandboxClaimSpec struct {
	// WarmPoolRef names the pool the claim is served from (its template for cold starts).
	// +required
	WarmPoolRef WarmPoolRef `json:"warmPoolRef"`

	// Lifecycle of the claim.
	// +optional
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`

	// AdditionalPodMetadata is merged into the sandbox pod's metadata.
	// +optional
	AdditionalPodMetadata agentsv1beta1.PodMetadata `json:"additionalPodMetadata,omitempty"`

	// Env is injected into the sandbox's containers, as the template's policy allows.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	Env []EnvVar `json:"env,omitempty"`

	// VolumeClaimTemplates are added to the sandbox, as the template's policy allows.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
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
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Sandbox the claim is bound to.
	// +optional
	Sandbox SandboxStatusRef `json:"sandbox,omitempty"`
}

// SandboxClaim requests one Sandbox, warm from a pool or cold from the pool's template.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sandboxclaim
// +kubebuilder:storageversion
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

// MaxClaimEnv bounds a claim's spec.env; the MaxItems marker of the list must say the same
// number.
const MaxClaimEnv = 1024
