// Package v1beta1 holds the extensions.agents.x-k8s.io/v1beta1 API: SandboxTemplate,
// SandboxWarmPool and SandboxClaim, and the condition reasons of claims.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the extension kinds.
	GroupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers the kinds of this group with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
