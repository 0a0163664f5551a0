// Package v1beta1 holds the agents.x-k8s.io/v1beta1 API: the Sandbox kind, the blueprint shared
// with the extensions group, the label and annotation keys of the contract, and the hashes that
// tie pool members, claims and admission together.
//
// +kubebuilder:object:generate=true
// +groupName=agents.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Sandbox kind.
	GroupVersion = schema.GroupVersion{Group: "agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
