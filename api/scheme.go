// Package api gathers the API groups sandgate serves. The types live in api/v1beta1
// (agents.x-k8s.io) and api/extensions/v1beta1 (extensions.agents.x-k8s.io), the storage
// version and hub of conversion; the deprecated v1alpha1 of both groups, served through the
// manager's conversion webhook, in api/v1alpha1 and api/extensions/v1alpha1. sandgate's own
// groups: policy.sandgate.dev (ClaimPolicy, ClaimLedger) is in api/tenancy/v1alpha1, and
// autoscaling.sandgate.dev (WarmPoolAutoscaler) in api/autoscaling/v1alpha1: each has one
// version and no conversion.
package api

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// AddToScheme adds every sandgate API group, every served version, to a scheme. The conversion
// webhook and envtest find the convertible kinds in it.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		agentsv1beta1.AddToScheme, extv1beta1.AddToScheme,
		agentsv1alpha1.AddToScheme, extv1alpha1.AddToScheme,
		tenancyv1alpha1.AddToScheme,
		autoscalingv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// NewScheme returns a scheme with the built-in Kubernetes kinds and every sandgate group: what the
// manager, the tools and the test suites all use.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}
