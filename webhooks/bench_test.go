package webhooks_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/test/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// BenchmarkClaimCreateAdmission is the operator's share of a claim's one admission round
// trip: the AdmissionReview as the API server sends it, decoded, checked, stamped and
// answered with its JSON patch (the HTTP server and TLS left out).
func BenchmarkClaimCreateAdmission(b *testing.B) {
	tmpl := builders.MakeTemplate("python", "ns").Obj()
	reader := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tmpl, builders.MakePool("pool", "ns", "python").Obj()).Build()
	hook := admission.WithDefaulter(api.NewScheme(), &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser})
	body := review(b, admissionv1.Create, someUser, builders.MakeClaim("claim", "ns", "pool").Obj(), nil)
	serve(b, hook, body)
}

// BenchmarkBindingGuardAdmission is the operator's share of a warm binding's admission round
// trip: the guard decodes the member before and after the bind patch and checks it against
// the claim's stamp.
func BenchmarkBindingGuardAdmission(b *testing.B) {
	fx := newGuardFixture()
	claim := stampedClaim("c1", "uid-1", fx.hash)
	reader := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(claim, fx.pool, fx.tmpl).Build()
	hook := admission.WithValidator(api.NewScheme(), &webhooks.BindingGuard{Cache: reader, APIReader: reader, OperatorUser: operatorUser})
	body := review(b, admissionv1.Update, operatorUser, boundTo(fx.member, claim, true, true), fx.member)
	serve(b, hook, body)
}

func review(b *testing.B, op admissionv1.Operation, user string, obj, old runtime.Object) []byte {
	b.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		if err != nil {
			b.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	gvk, err := apiutil.GVKForObject(obj, api.NewScheme())
	if err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "1", Operation: op, Namespace: "ns", Name: "claim",
			Kind:     metav1.GroupVersionKind(gvk),
			UserInfo: authenticationv1.UserInfo{Username: user},
			Object:   raw(obj), OldObject: raw(old),
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func serve(b *testing.B, hook http.Handler, body []byte) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"allowed":true`)) {
			b.Fatalf("answer %d: %s", rec.Code, rec.Body.String())
		}
	}
}
