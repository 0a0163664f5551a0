package webhooks

import (
	"context"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

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
