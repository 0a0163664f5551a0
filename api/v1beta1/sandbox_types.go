package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShutdownPolicy says what happens to a Sandbox when its shutdownTime is reached.
// +kubebuilder:validation:Enum=Delete;Retain
type ShutdownPolicy string

const (
	// ShutdownPolicyDelete deletes the Sandbox at shutdownTime.
	ShutdownPolicyDelete ShutdownPolicy = "Delete"
	// ShutdownPolicyRetain keeps the Sandbox, without pod and Service, at shutdownTime.
	ShutdownPolicyRetain ShutdownPolicy = "Retain"
)

// OperatingMode says whether the Sandbox pod should run.
// +kubebuilder:validation:Enum=Running;Suspended
type OperatingMode string

const (
	// OperatingModeRunning keeps the pod running.
	OperatingModeRunning OperatingMode = "Running"
	// OperatingModeSuspended deletes the pod and keeps PVCs and Service.
	OperatingModeSuspended OperatingMode = "Suspended"
)

// SandboxSpec is the desired state of a Sandbox.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplates) == has(oldSelf.volumeClaimTemplates) && (!has(self.volumeClaimTemplates) || self.volumeClaimTemplates == oldSelf.volumeClaimTemplates)",message="volumeClaimTemplates is immutable"
type SandboxSpec struct {
	SandboxBlueprint `json:",inline"`

	// ShutdownTime is when the sandbox expires: its pod and Service are deleted and the
	// shutdownPolicy applies.
	// +optional
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`

	// ShutdownPolicy says what happens to the Sandbox at shutdownTime.
	// +optional
	// +kubebuilder:default=Retain
	ShutdownPolicy ShutdownPolicy `json:"shutdownPolicy,omitempty"`

	// OperatingMode Suspended deletes the pod and keeps PVCs and Service; Running recreates it.
	// +optional
	// +kubebuilder:default=Running
	OperatingMode OperatingMode `json:"operatingMode,omitempty"`
}

// SandboxStatus is the observed state of a Sandbox.
type SandboxStatus struct {
	// ServiceFQDN is <service>.<namespace>.svc.<cluster-domain> when a Service exists.
	// +optional
	ServiceFQDN string `json:"serviceFQDN,omitempty"`

	// Service is the name of the sandbox's Service.
	// +optional
	Service string `json:"service,omitempty"`

	// Conditions: Ready, Suspended, PodScheduled, Finished.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Selector is the label selector of the sandbox pod, in string form.
	// +optional
	Selector string `json:"selector,omitempty"`

	// PodIPs of the sandbox pod.
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`

	// NodeName of the node running the sandbox pod.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}

// Sandbox is one stateful pod with a stable identity, its PVCs and optionally a headless Service.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sandbox
// +kubebuilder:storageversion
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
