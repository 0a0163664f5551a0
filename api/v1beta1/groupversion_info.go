// Package v1beta1 holds the agents.x-k8s.io/v1beta1 API: the Sandbox kind, the blueprint shared
// with the extensions group, the label and annotation keys of the contract, and the hashes that
// tie pool members, claims and admission together.
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Sandbox kind.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this group with a scheme. Only apimachinery is
	// imported here, so that clients can use these types without controller-runtime.
	SchemeBuilder runtime.SchemeBuilder

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds kinds of this group to the schemes SchemeBuilder builds.
func register(objects ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objects...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}
