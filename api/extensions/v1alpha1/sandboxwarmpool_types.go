package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxTemplateRef names a SandboxTemplate in the same namespace.
type SandboxTemplateRef struct {
	// Name of the template.
	// +required
	Name string `json:"name,omitempty"`
}

// UpdateStrategyType says what a pool does with members made from an older template version.
// +kubebuilder:validation:Enum=Recreate;OnReplenish
type UpdateStrategyType string

const (
	// RecreateUpdateStrategy deletes stale unclaimed members at once.
	RecreateUpdateStrategy UpdateStrategyType = "Recreate"
	// OnReplenishUpdateStrategy keeps stale members until they are claimed or deleted.
	OnReplenishUpdateStrategy UpdateStrategyType = "OnReplenish"
)

// UpdateStrategy of a warm pool.
type UpdateStrategy struct {
	// Type of the strategy.
	// +optional
	// +kubebuilder:default=OnReplenish
	Type UpdateStrategyType `json:"type,omitempty"`
}

// SandboxWarmPoolSpec is the desired state of a v1alpha1 warm pool.
type SandboxWarmPoolSpec struct {
	// Replicas is the number of members to keep, ready or not; at most 10000, as in v1beta1.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas int32 `json:"replicas"`

	// SandboxTemplateRef names the template members are made from.
	// +required
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`

	// UpdateStrategy for members made from an older template version.
	// +optional
	UpdateStrategy *UpdateStrategy `json:"updateStrategy,omitempty"`
}

// SandboxWarmPoolStatus is the observed state of a v1alpha1 warm pool.
type SandboxWarmPoolStatus struct {
	// Replicas is the number of members, ready or not.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of ready members.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector of the members, in string form (for the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
}

// SandboxWarmPool keeps a number of pre-started Sandboxes ready for claims (deprecated
// version).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=swp
// +kubebuilder:deprecatedversion:warning="extensions.agents.x-k8s.io/v1alpha1 SandboxWarmPool is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxWarmPool instead"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type SandboxWarmPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxWarmPoolSpec `json:"spec"`
	// +optional
	Status SandboxWarmPoolStatus `json:"status,omitempty"`
}

// SandboxWarmPoolList is a list of SandboxWarmPools.
// +kubebuilder:object:root=true
type SandboxWarmPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxWarmPool `json:"items"`
}

func init() {
	register(&SandboxWarmPool{}, &SandboxWarmPoolList{})
}
