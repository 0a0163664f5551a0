package webhooks

import (
	"fmt"
	"net/http"

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

// registerConversion serves the conversion webhook (ConversionHandler) at ConvertPath.
//
// Admission needs nothing else for v1alpha1: the webhook configurations match v1beta1 with
// matchPolicy Equivalent, so the API server converts a v1alpha1 request to v1beta1 (through
// this webhook), admits it there, and converts a mutation back.
func registerConversion(mgr ctrl.Manager) error {
	h, err := ConversionHandler(mgr.GetScheme(), mgr.GetConverterRegistry())
	if err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(ConvertPath, h)
	return nil
}

// ConversionHandler answers ConversionReviews: controller-runtime's handler converts any
// version of the four kinds to any other through the v1beta1 hub (the types' ConvertTo and
// ConvertFrom in api/v1alpha1 and api/extensions/v1alpha1), and the converted objects carry no
// null (conversionWithoutNulls). Only the kinds in scheme convert, so it first checks that
// every kind has all its versions there.
func ConversionHandler(scheme *runtime.Scheme, registry conversion.Registry) (http.Handler, error) {
	for _, hub := range []runtime.Object{&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxTemplate{}, &extv1beta1.SandboxWarmPool{}, &extv1beta1.SandboxClaim{}} {
		ok, err := conversion.IsConvertible(scheme, hub)
		if err != nil {
			return nil, fmt.Errorf("checking the versions of %T: %w", hub, err)
		}
		if !ok {
			return nil, fmt.Errorf("%T: the scheme lacks a version of the kind or its conversion", hub)
		}
	}
	return conversionWithoutNulls{next: conversion.NewWebhookHandler(scheme, registry)}, nil
}
