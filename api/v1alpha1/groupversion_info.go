// Package v1alpha1 holds the deprecated agents.x-k8s.io/v1alpha1 API: the Sandbox kind in the
// JSON shape of the public agent-sandbox project's v1alpha1 (v0.5.x), served for clients that
// have not moved to v1beta1 yet. Nothing is stored in this version: the API server converts
// every v1alpha1 request to v1beta1, the hub and storage version, through the manager's
// conversion webhook (ConvertTo and ConvertFrom here), and admission runs on the v1beta1
// form, so a v1alpha1 client gets exactly the guarantees of a v1beta1 one.
//
// The blueprint pieces (PodTemplate, PersistentVolumeClaimTemplate, PodMetadata) are this
// version's own types, shared with extensions.agents.x-k8s.io/v1alpha1 as upstream shares
// them. Conversion needs controller-runtime's conversion interfaces, so unlike v1beta1 this
// package imports sigs.k8s.io/controller-runtime/pkg/conversion (interfaces only).
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the deprecated Sandbox kind.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this version with a scheme.
	SchemeBuilder runtime.SchemeBuilder

	// AddToScheme adds the kinds of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds kinds of this version to the schemes SchemeBuilder builds.
func register(objects ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objects...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}
