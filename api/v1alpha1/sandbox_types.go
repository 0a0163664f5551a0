package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodMetadata is the subset of object metadata a v1alpha1 blueprint may set on its pod.
type PodMetadata struct {
	// Labels to put on the pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to put on the pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// EmbeddedObjectMetadata is the metadata of an object created from a template.
type EmbeddedObjectMetadata struct {
	// Name of the object; a PVC made from the template is named <name>-<sandbox>.
	// +optional
	Name string `json:"name,omitempty"`

	// Labels to put on the object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to put on the object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the pod of a Sandbox. v1alpha1 always writes metadata, even empty.
type PodTemplate struct {
	// Spec of the pod.
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// Metadata propagated to the pod; only labels and annotations are used.
	// +optional
	ObjectMeta PodMetadata `json:"metadata"`
}

// PersistentVolumeClaimTemplate describes a PVC created for, and owned by, a Sandbox.
type PersistentVolumeClaimTemplate struct {
	// Metadata of the claim.
	// +optional
	EmbeddedObjectMetadata `json:"metadata"`

	// Spec of the claim.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// ShutdownPolicy says what happens to a Sandbox when its shutdownTime is reached.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox at shutdownTime.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps the Sandbox, without pod and Service, at shutdownTime.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// Lifecycle is when and how a Sandbox shuts down; its fields are inlined into the spec.
type Lifecycle struct {
	// ShutdownTime is when the sandbox expires.
	// +optional
	// +kubebuilder:validation:Format="date-time"
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ShutdownPolicy says whether the Sandbox itself is deleted when it expires; its pod and
	// Service always are.
	// +optional
	// +kubebuilder:default=Retain
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

// SandboxSpec is the desired state of a v1alpha1 Sandbox.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="volumeClaimTemplates is immutable"
type SandboxSpec struct {
	// PodTemplate describes the sandbox pod.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// VolumeClaimTemplates are PVCs created for the sandbox and mounted into its pod by name.
	// +optional
	// +listType=atomic
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// Lifecycle: shutdownTime and shutdownPolicy.
	// +optional
	Lifecycle `json:",inline"`

	// Replicas is 1 to run the pod and 0 to suspend the sandbox (v1beta1 operatingMode).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// Service asks for a headless Service named after the sandbox when true; false deletes a
	// Service the sandbox owns; unset keeps an existing one but never creates it.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// SandboxStatus is the observed state of a v1alpha1 Sandbox.
type SandboxStatus struct {
	// ServiceFQDN is <service>.<namespace>.svc.<cluster-domain> when a Service exists.
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// Service is the name of the sandbox's Service.
	// +optional
	Service string `json:"service,omitempty"`

	// Conditions: Ready, Suspended, PodScheduled, Finished.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Replicas is the number of pods the sandbox has: 1 or 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// LabelSelector of the sandbox pod, in string form (for the scale subresource).
	// +optional
	LabelSelector string `json:"selector,omitempty"`

	// PodIPs of the sandbox pod.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
}

// Sandbox is one stateful pod with a stable identity, its PVCs and optionally a headless
// Service (deprecated version).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=sandbox
// +kubebuilder:deprecatedversion:warning="agents.x-k8s.io/v1alpha1 Sandbox is deprecated; use agents.x-k8s.io/v1beta1 Sandbox instead"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Sandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxSpec `json:"spec"`
	// +optional
	Status SandboxStatus `json:"status,omitempty"`
}

// SandboxList is a list of Sandboxes.
// +kubebuilder:object:root=true
type SandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sandbox `json:"items"`
}

func init() {
	register(&Sandbox{}, &SandboxList{})
}
