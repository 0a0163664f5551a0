package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sandgate-dev/sandgate/api"
)

// A template whose volume claim template clones a PVC leaves the dataSource's apiGroup out (a
// PVC is in the core group): the defaulting patch must add the defaults and nothing else, not
// "apiGroup": null, which the API server refuses for a string field.
func TestDefaultingPatchWritesNoNullForAnOmittedField(t *testing.T) {
	raw := []byte(`{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxTemplate",
"metadata":{"name":"t","namespace":"ns"},
"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"busybox"}]}},
"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],
"dataSource":{"kind":"PersistentVolumeClaim","name":"golden"},
"dataSourceRef":{"kind":"PersistentVolumeClaim","name":"golden"},
"resources":{"requests":{"storage":"1Gi"}}}}]}}`)
	hook := admission.WithDefaulter(api.NewScheme(), TemplateWebhook{})
	for name, tc := range map[string]struct {
		handler   admission.Handler
		wantNulls bool
	}{
		"the defaulter alone writes null (the bug omitNulls closes)": {handler: hook.Handler, wantNulls: true},
		"behind omitNulls": {handler: omitNulls{next: hook.Handler}},
	} {
		t.Run(name, func(t *testing.T) {
			resp := tc.handler.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "ns", Name: "t",
				Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("refused: %v", resp.Result)
			}
			var nulls []string
			got := map[string]bool{}
			for _, op := range resp.Patches {
				got[op.Operation+" "+op.Path] = true
				nulls = append(nulls, nullsIn(op.Path, op.Value)...)
			}
			if (len(nulls) > 0) != tc.wantNulls {
				t.Errorf("the patch writes null at %v; want nulls: %v", nulls, tc.wantNulls)
			}
			for _, want := range []string{"add /spec/envVarsInjectionPolicy", "add /spec/networkPolicyManagement", "add /spec/volumeClaimTemplatesPolicy"} {
				if !got[want] {
					t.Errorf("the patch lacks %q: %v", want, got)
				}
			}
		})
	}
}

// nullsIn lists the paths of the nulls in v, a patch value at path.
func nullsIn(path string, v any) []string {
	switch t := v.(type) {
	case nil:
		return []string{path}
	case map[string]any:
		var out []string
		for k, e := range t {
			out = append(out, nullsIn(path+"/"+k, e)...)
		}
		return out
	case []any:
		var out []string
		for i, e := range t {
			out = append(out, nullsIn(fmt.Sprintf("%s/%d", path, i), e)...)
		}
		return out
	}
	return nil
}

// A v1alpha1 client's Sandbox whose volume claim template clones a PVC without apiGroup
// converts to v1beta1 without "apiGroup": null, which the API server would refuse.
func TestConversionAnswerCarriesNoNull(t *testing.T) {
	sandbox := []byte(`{"apiVersion":"agents.x-k8s.io/v1alpha1","kind":"Sandbox","metadata":{"name":"s","namespace":"ns"},
"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"busybox"}]}},
"volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],
"dataSource":{"kind":"PersistentVolumeClaim","name":"golden"},"resources":{"requests":{"storage":"1Gi"}}}}]}}`)
	body, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{UID: "1", DesiredAPIVersion: "agents.x-k8s.io/v1beta1",
			Objects: []runtime.RawExtension{{Raw: sandbox}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	scheme := api.NewScheme()
	wrapped, err := ConversionHandler(scheme, conversion.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		handler   http.Handler
		wantNulls bool
	}{
		"controller-runtime's handler alone writes null (the bug)": {handler: conversion.NewWebhookHandler(scheme, conversion.NewRegistry()), wantNulls: true},
		"ConversionHandler": {handler: wrapped},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, ConvertPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			tc.handler.ServeHTTP(rec, req)
			var got apiextensionsv1.ConversionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
				t.Fatalf("answer %d %q: %v", rec.Code, rec.Body.String(), err)
			}
			if got.Response.Result.Status != metav1.StatusSuccess || len(got.Response.ConvertedObjects) != 1 {
				t.Fatalf("conversion failed: %+v", got.Response.Result)
			}
			var obj any
			if err := json.Unmarshal(got.Response.ConvertedObjects[0].Raw, &obj); err != nil {
				t.Fatal(err)
			}
			if nulls := nullsIn("", obj); (len(nulls) > 0) != tc.wantNulls {
				t.Errorf("the converted object has null at %v; want nulls: %v", nulls, tc.wantNulls)
			}
		})
	}
}
