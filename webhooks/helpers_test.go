package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/policycases"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// What the tests of every webhook share: who asks, and how an answer is read.

const (
	operatorUser = webhooks.DefaultOperatorUser
	someUser     = "jane@example.com"
	staleHash    = "2222222222222222"
)

// request returns a context carrying an admission request from user, as the webhook server
// passes it to typed webhooks.
func request(user string, op admissionv1.Operation) context.Context {
	return requestAs(authenticationv1.UserInfo{Username: user}, op)
}

func requestAs(u authenticationv1.UserInfo, op admissionv1.Operation) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "ns", UserInfo: u,
	}})
}

// fakeClientBuilder starts a fake client holding objs, to stand for the API server or the
// manager's cache: with the indexes.SandboxClaimUID index, as the operator registers it.
func fakeClientBuilder(objs ...client.Object) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).
		WithIndex(&agentsv1beta1.Sandbox{}, indexes.SandboxClaimUID, indexes.SandboxClaimUIDOf)
}

// fakeClient is a fake client holding objs.
func fakeClient(objs ...client.Object) client.WithWatch { return fakeClientBuilder(objs...).Build() }

// code is the HTTP status an admission error becomes (200 for none).
func code(err error) int32 {
	if err == nil {
		return 200
	}
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 500
}

// summary is what a test compares of an error list: type and field path of each error.
func summary(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Type.String()+" "+e.Field)
	}
	return out
}

// causes are the field errors an admission error carries, as the API server returns them.
func causes(err error) []policycases.FieldError {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []policycases.FieldError
	for _, c := range status.Status().Details.Causes {
		out = append(out, policycases.FieldError{Type: field.ErrorType(c.Type), Field: c.Field})
	}
	return out
}

// review is the AdmissionReview the API server sends for obj (old: the object before an
// update).
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

// serve benchmarks hook answering body, which it must admit.
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
