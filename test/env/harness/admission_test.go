package harness

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionapi "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// With an admission rate, the stand-in refuses the claim creates beyond it as sandgate sheds
// them (429 with a retry hint), and nothing else.
func TestAnswerAtOnceRefusesClaimsPastItsRate(t *testing.T) {
	open := true
	h := answerAtOnce(time.Now, func() bool { return open })
	claim := admissionapi.AdmissionRequest{Operation: admissionapi.Create, Name: "c",
		Kind: metav1.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"}, Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"c"}}`)}}
	sandbox := admissionapi.AdmissionRequest{Operation: admissionapi.Create, Name: "s",
		Kind: metav1.GroupVersionKind{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"}, Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"s"}}`)}}
	if resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: claim}); !resp.Allowed {
		t.Fatalf("claim within the rate refused: %+v", resp.Result)
	}
	open = false
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: claim})
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests || resp.Result.Reason != metav1.StatusReasonTooManyRequests ||
		resp.Result.Details == nil || resp.Result.Details.RetryAfterSeconds != 1 {
		t.Fatalf("claim past the rate: %+v, want 429 with a retry hint of 1 s", resp.AdmissionResponse)
	}
	if resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: sandbox}); !resp.Allowed {
		t.Fatalf("a Sandbox create was refused with the claims: %+v", resp.Result)
	}
}

func TestAnswerAtOnce(t *testing.T) {
	at := time.Date(2026, 11, 23, 17, 0, 0, 123, time.UTC)
	stamp := at.Format(time.RFC3339Nano)
	claimGVK := metav1.GroupVersionKind{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Kind: "SandboxClaim"}
	cases := []struct {
		name      string
		op        admissionapi.Operation
		kind      metav1.GroupVersionKind
		object    string
		wantPatch []map[string]any // nil: allowed without a patch
		wantCode  int32            // non-zero: refused with this code
	}{
		{
			name: "claim create with annotations gets the stamp added", op: admissionapi.Create, kind: claimGVK,
			object:    `{"metadata":{"name":"c","annotations":{"a":"b"}}}`,
			wantPatch: []map[string]any{{"op": "add", "path": "/metadata/annotations/agents.x-k8s.io~1webhook-first-observed-at", "value": stamp}},
		},
		{
			name: "claim create without annotations gets the map", op: admissionapi.Create, kind: claimGVK,
			object:    `{"metadata":{"name":"c"}}`,
			wantPatch: []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]any{"agents.x-k8s.io/webhook-first-observed-at": stamp}}},
		},
		{
			name: "claim update is allowed as it is", op: admissionapi.Update, kind: claimGVK,
			object: `{"metadata":{"name":"c"}}`,
		},
		{
			name: "sandbox binding is allowed as it is", op: admissionapi.Update,
			kind:   metav1.GroupVersionKind{Group: "agents.x-k8s.io", Version: "v1beta1", Kind: "Sandbox"},
			object: `{"metadata":{"name":"s"}}`,
		},
		{
			name: "a claim that is not JSON is refused", op: admissionapi.Create, kind: claimGVK,
			object: `{`, wantCode: http.StatusBadRequest,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := answerAtOnce(func() time.Time { return at }, nil)
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionapi.AdmissionRequest{
				Operation: tc.op, Kind: tc.kind, Object: runtime.RawExtension{Raw: []byte(tc.object)},
			}})
			if tc.wantCode != 0 {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != tc.wantCode {
					t.Fatalf("response %+v, want refused with %d", resp.AdmissionResponse, tc.wantCode)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			if tc.wantPatch == nil {
				if len(resp.Patch) != 0 || len(resp.Patches) != 0 {
					t.Fatalf("patched %s, want no patch", resp.Patch)
				}
				return
			}
			if resp.PatchType == nil || *resp.PatchType != admissionapi.PatchTypeJSONPatch {
				t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
			}
			var got []map[string]any
			if err := json.Unmarshal(resp.Patch, &got); err != nil {
				t.Fatalf("patch %s: %v", resp.Patch, err)
			}
			if diff := cmp.Diff(tc.wantPatch, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmissionPaths(t *testing.T) {
	url := func(s string) *string { return &s }
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hook := func(name string, cc admissionv1.WebhookClientConfig) (admissionv1.MutatingWebhook, admissionv1.ValidatingWebhook) {
		return admissionv1.MutatingWebhook{Name: name, ClientConfig: cc}, admissionv1.ValidatingWebhook{Name: name, ClientConfig: cc}
	}
	m1, _ := hook("stamp", admissionv1.WebhookClientConfig{URL: url("https://127.0.0.1:9443//mutate-claim")})
	m2, _ := hook("default", admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Name: "webhook-service", Path: url("/mutate-sandbox")}})
	_, v1 := hook("guard", admissionv1.WebhookClientConfig{URL: url("https://127.0.0.1:9443/validate-sandbox")})
	_, v2 := hook("again", admissionv1.WebhookClientConfig{URL: url("https://127.0.0.1:9443//mutate-claim")})
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []admissionv1.MutatingWebhook{m1, m2}},
		&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Webhooks: []admissionv1.ValidatingWebhook{v1, v2}},
	).Build()

	got, err := admissionPaths(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/mutate-claim", "/mutate-sandbox", "/validate-sandbox"}, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}

	if _, err := admissionPaths(context.Background(), fake.NewClientBuilder().WithScheme(scheme).Build()); err == nil {
		t.Error("no webhook configurations: want an error, got none")
	}
}
