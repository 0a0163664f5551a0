// Package api gathers the API groups sandgate serves. The types live in api/v1beta1
// (agents.x-k8s.io) and api/extensions/v1beta1 (extensions.agents.x-k8s.io).
package api

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// AddToScheme adds both sandgate API groups to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	if err := agentsv1beta1.AddToScheme(s); err != nil {
		return err
	}
	return extv1beta1.AddToScheme(s)
}

// NewScheme returns a scheme with the built-in Kubernetes kinds and both sandgate groups: what the
// manager, the tools and the test suites all use.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}
