package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
)

// PodMetadata is the subset of object metadata a blueprint may set on the pod it produces.
type PodMetadata struct {
	// Labels to put on the pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to put on the pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplate describes the pod of a Sandbox.
type PodTemplate struct {
	// Spec of the pod.
	// +required
	Spec corev1.PodSpec `json:"spec"`

	// Metadata propagated to the pod. Keys in the agents.x-k8s.io/ domain are reserved and ignored.
	// +optional
	ObjectMeta PodMetadata `json:"metadata,omitempty"`
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

// PersistentVolumeClaimTemplate describes a PVC created for, and owned by, a Sandbox.
type PersistentVolumeClaimTemplate struct {
	// Metadata of the claim.
	// +optional
	EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// Spec of the claim.
	// +required
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// SandboxBlueprint is what a Sandbox is made of. Sandboxes, templates and (through templates)
// warm pools and claims share it; its hash identifies a template version.
type SandboxBlueprint struct {
	// PodTemplate describes the sandbox pod.
	// +required
	PodTemplate PodTemplate `json:"podTemplate"`

	// VolumeClaimTemplates are PVCs created for the sandbox and mounted into its pod by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VolumeClaimTemplates []PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`

	// Service asks for a headless Service named after the sandbox when true; false deletes a
	// Service the sandbox owns; unset keeps an existing one but never creates it.
	// +optional
	Service *bool `json:"service,omitempty"`
}

// MaxVolumeClaimTemplates bounds a blueprint's volumeClaimTemplates; the MaxItems markers of
// the lists must say the same number.
const MaxVolumeClaimTemplates = 16
