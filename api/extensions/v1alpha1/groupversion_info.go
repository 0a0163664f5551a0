// Package v1alpha1 holds the deprecated extensions.agents.x-k8s.io/v1alpha1 API:
// SandboxTemplate, SandboxWarmPool and SandboxClaim in the JSON shape of the public
// agent-sandbox project's v1alpha1 (v0.5.x). Nothing is stored in this version: the API
// server converts every v1alpha1 request to v1beta1, the hub and storage version, through the
// manager's conversion webhook (ConvertTo and ConvertFrom here), and admission (claim
// stamping, validation) runs on the v1beta1 form.
//
// The one kind that differs in meaning is SandboxClaim: a v1alpha1 claim names its template
// (spec.sandboxTemplateRef) and a warm pool policy (spec.warmpool), a v1beta1 claim names its
// pool (spec.warmPoolRef), which names the template. See sandboxclaim_conversion.go.
//
// +kubebuilder:object:generate=true
// +groupName=extensions.agents.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the deprecated extension kinds.
	GroupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1alpha1"}

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
