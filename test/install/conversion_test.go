//go:build integration

package install_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/sandgate-dev/sandgate/webhooks"
)

// publicCRDs splits the CRDs into those of the public API's groups, which serve v1alpha1 and
// v1beta1, and sandgate's own (*.sandgate.dev), of one version each.
func publicCRDs(t *testing.T, r *rendered) (public, own []apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	for _, crd := range r.crds {
		if strings.HasSuffix(crd.Spec.Group, "agents.x-k8s.io") {
			public = append(public, crd)
		} else {
			own = append(own, crd)
		}
	}
	if len(public) != 4 || len(own) == 0 {
		t.Fatalf("want the 4 CRDs of the public API and sandgate's own, got %d and %d", len(public), len(own))
	}
	return public, own
}

// Every CRD of the public API serves v1alpha1 by converting through the manager: its
// conversion webhook is the webhook Service at /convert (the path the manager serves), trusting
// the CA cert-manager injects from the serving certificate, as the webhook configurations do.
// sandgate's own kinds have one version each and nothing to convert: no webhook, no CA.
func TestCRDsConvertThroughTheWebhookService(t *testing.T) {
	r := render(t)
	cert := r.servingCertificate(t)
	// The Service the webhook configurations call.
	svc := r.mutating[0].Webhooks[0].ClientConfig.Service
	public, own := publicCRDs(t, r)
	for _, crd := range own {
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter || crd.Annotations["cert-manager.io/inject-ca-from"] != "" || len(crd.Spec.Versions) != 1 {
			t.Errorf("%s: conversion %+v, annotations %v, %d versions: want one version, no conversion", crd.Name, crd.Spec.Conversion, crd.Annotations, len(crd.Spec.Versions))
		}
	}
	for _, crd := range public {
		conv := crd.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
			t.Errorf("%s: conversion %+v, want a webhook", crd.Name, conv)
			continue
		}
		ref := conv.Webhook.ClientConfig.Service
		if ref == nil || svc == nil || ref.Name != svc.Name || ref.Namespace != svc.Namespace || ref.Path == nil || *ref.Path != webhooks.ConvertPath {
			t.Errorf("%s: conversion webhook %+v, want Service %s/%s path %s", crd.Name, ref, svc.Namespace, svc.Name, webhooks.ConvertPath)
		}
		if got, want := crd.Annotations["cert-manager.io/inject-ca-from"], cert.Namespace+"/"+cert.Name; got != want {
			t.Errorf("%s: inject-ca-from = %q, want %q", crd.Name, got, want)
		}
		served := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			served[v.Name] = v.Served
		}
		if !served["v1alpha1"] || !served["v1beta1"] {
			t.Errorf("%s: served versions %v, want v1alpha1 and v1beta1", crd.Name, served)
		}
	}
}

// config/v1beta1-only is config/default with v1alpha1 no longer served by any CRD of the
// public API: every other object, and every other field of the CRDs, is the same. sandgate's
// own kinds (policy.sandgate.dev/v1alpha1 and autoscaling.sandgate.dev/v1alpha1, their only
// version) are served either way.
func TestV1beta1OnlyStopsServingV1alpha1(t *testing.T) {
	def, only := render(t), renderDir(t, "v1beta1-only")
	public, own := publicCRDs(t, only)
	defPublic, defOwn := publicCRDs(t, def)
	if diff := cmp.Diff(defOwn, own); diff != "" {
		t.Errorf("sandgate's own CRDs differ from config/default's (-default +v1beta1-only):\n%s", diff)
	}
	for i, crd := range public {
		want := defPublic[i].DeepCopy()
		for j := range want.Spec.Versions {
			if want.Spec.Versions[j].Name == "v1alpha1" {
				want.Spec.Versions[j].Served = false
			}
		}
		if diff := cmp.Diff(want, &crd); diff != "" {
			t.Errorf("%s: want config/default's CRD with v1alpha1 not served (-want +got):\n%s", crd.Name, diff)
		}
		for _, v := range crd.Spec.Versions {
			if v.Served != v.Storage {
				t.Errorf("%s: version %s served %t, storage %t: want only the storage version served", crd.Name, v.Name, v.Served, v.Storage)
			}
		}
	}
	if diff := cmp.Diff(def.deployments, only.deployments); diff != "" {
		t.Errorf("the manager differs from config/default's (-default +v1beta1-only):\n%s", diff)
	}
	if diff := cmp.Diff(def.mutating, only.mutating); diff != "" {
		t.Errorf("the webhooks differ from config/default's (-default +v1beta1-only):\n%s", diff)
	}
}
