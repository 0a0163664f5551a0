// Package v1alpha1 holds the autoscaling.sandgate.dev/v1alpha1 API: WarmPoolAutoscaler, which
// sets a SandboxWarmPool's replicas from the claims admission sees arrive. It is sandgate's own
// group, not the public agent-sandbox API: the pool's schema stays the public one, and an
// autoscaler scales its pool only through the pool's /scale subresource, as any autoscaler
// would (docs/autoscaling.md).
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.sandgate.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the autoscaling kinds.
	GroupVersion = schema.GroupVersion{Group: "autoscaling.sandgate.dev", Version: "v1alpha1"}

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
