// Package v1alpha1 holds the policy.sandgate.dev/v1alpha1 API, sandgate's own: ClaimPolicy,
// the platform's limits on the claims of a namespace and its tenants' shares of warm members,
// and ClaimLedger, admission's record of the claims it let through, which the operator alone
// writes. Its Go package is named tenancy because api/policy is the package of the rules
// admission and the controllers share. docs/fair-share.md describes the model.
//
// +kubebuilder:object:generate=true
// +groupName=policy.sandgate.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the policy kinds.
	GroupVersion = schema.GroupVersion{Group: "policy.sandgate.dev", Version: "v1alpha1"}

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
