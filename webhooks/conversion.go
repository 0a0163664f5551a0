package webhooks

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ConvertPath is where the manager's webhook server answers the API server's ConversionReviews
// for every sandgate kind (the CRDs' spec.conversion.webhook names it; config/default and the
// local control plane set it).
const ConvertPath = "/convert"

// registerConversion serves the conversion webhook: controller-runtime's handler converts any
// version of the four kinds to any other through the v1beta1 hub (the types' ConvertTo and
// ConvertFrom in api/v1alpha1 and api/extensions/v1alpha1). Only the kinds in the manager's
// scheme convert, so it first checks that every kind has all its versions there.
//
// Admission needs nothing else for v1alpha1: the webhook configurations match v1beta1 with
// matchPolicy Equivalent, so the API server converts a v1alpha1 request to v1beta1 (through
// this webhook), admits it there, and converts a mutation back.
func registerConversion(mgr ctrl.Manager) error {
	for _, hub := range []runtime.Object{&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxTemplate{}, &extv1beta1.SandboxWarmPool{}, &extv1beta1.SandboxClaim{}} {
		ok, err := conversion.IsConvertible(mgr.GetScheme(), hub)
		if err != nil {
			return fmt.Errorf("checking the versions of %T: %w", hub, err)
		}
		if !ok {
			return fmt.Errorf("%T: the manager's scheme lacks a version of the kind or its conversion", hub)
		}
	}
	mgr.GetWebhookServer().Register(ConvertPath, conversion.NewWebhookHandler(mgr.GetScheme(), mgr.GetConverterRegistry()))
	return nil
}
