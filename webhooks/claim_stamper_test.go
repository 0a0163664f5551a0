package webhooks_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
	"github.com/sandgate-dev/sandgate/test/policycases"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestClaimStamping(t *testing.T) {
	tmpl := builders.MakeTemplate("tmpl", "ns").Obj()
	hash := policy.TemplateHash(tmpl)
	now := time.Date(2026, 11, 23, 4, 5, 6, 789, time.UTC)
	reader := fakeClient(
		tmpl,
		builders.MakePool("pool", "ns", "tmpl").Obj(),
		builders.MakePool("orphan", "ns", "missing").Obj(),
	)
	w := &webhooks.ClaimWebhook{APIReader: reader, OperatorUser: operatorUser, Now: func() time.Time { return now }}
	observed := now.Format(time.RFC3339Nano)

	for _, tc := range []struct {
		name            string
		claim           *extv1beta1.SandboxClaim
		op              admissionv1.Operation
		wantCode        int32
		wantAnnotations map[string]string
	}{
		{name: "stamped", claim: builders.MakeClaim("c", "ns", "pool").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationSandboxTemplateHash: hash, agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed, agentsv1beta1.AnnotationCreator: "jane@example.com"}},
		{name: "right stamp supplied", claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash).Obj(),
			op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationSandboxTemplateHash: hash, agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed, agentsv1beta1.AnnotationCreator: "jane@example.com"}},
		{name: "forged stamp", claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, staleHash).Obj(),
			op: admissionv1.Create, wantCode: 422},
		{name: "no pool", claim: builders.MakeClaim("c", "ns", "nopool").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed, agentsv1beta1.AnnotationCreator: "jane@example.com"}},
		{name: "no template", claim: builders.MakeClaim("c", "ns", "orphan").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed, agentsv1beta1.AnnotationCreator: "jane@example.com"}},
		{name: "stamp that cannot be checked", claim: builders.MakeClaim("c", "ns", "orphan").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash).Obj(),
			op: admissionv1.Create, wantCode: 422},
		{name: "update leaves annotations alone", claim: builders.MakeClaim("c", "ns", "pool").Annotation("a", "b").Obj(), op: admissionv1.Update, wantCode: 200,
			wantAnnotations: map[string]string{"a": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := tc.claim.DeepCopy()
			err := w.Default(request(someUser, tc.op), claim)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.wantAnnotations, claim.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// The stamp comes from the cache when it has pool and template; a stamp the client supplies
// is checked against the API server when the cache does not have that version yet.
func TestClaimStampingThroughTheCache(t *testing.T) {
	older := builders.MakeTemplate("tmpl", "ns").Obj()
	current := builders.MakeTemplate("tmpl", "ns").Image("registry.example/agent:2").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").Obj()
	cache := fakeClient(older, pool)
	apiServer := fakeClient(current, pool.DeepCopy())
	w := &webhooks.ClaimWebhook{Cache: cache, APIReader: apiServer, OperatorUser: operatorUser}

	for _, tc := range []struct {
		name      string
		supplied  string
		wantStamp string
		wantCode  int32
	}{
		{name: "the cached version", wantStamp: policy.TemplateHash(older), wantCode: 200},
		{name: "a supplied stamp of the current version, not cached yet", supplied: policy.TemplateHash(current), wantStamp: policy.TemplateHash(current), wantCode: 200},
		{name: "a supplied stamp of no version", supplied: staleHash, wantCode: 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cw := builders.MakeClaim("c", "ns", "pool")
			if tc.supplied != "" {
				cw.Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, tc.supplied)
			}
			claim := cw.Obj()
			err := w.Default(request(someUser, admissionv1.Create), claim)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err == nil && claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] != tc.wantStamp {
				t.Errorf("stamp = %s, want %s", claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash], tc.wantStamp)
			}
		})
	}
}

// Admission applies the claim injection rule of the one table the rule's and the claim
// controller's tests iterate too (test/policycases): a claim is refused with 422 exactly when
// the case has problems, naming exactly their fields, so that admission and controller never
// disagree on a claim.
func TestClaimCreateAppliesTheClaimRule(t *testing.T) {
	for name, tc := range policycases.Cases() {
		t.Run(name, func(t *testing.T) {
			reader := fakeClient(tc.Template, builders.MakePool(policycases.Pool, policycases.Namespace, tc.Template.Name).Obj())
			w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}

			err := w.Default(request(someUser, admissionv1.Create), tc.Claim.DeepCopy())

			wantCode := int32(200)
			if len(tc.WantErrors) > 0 {
				wantCode = 422
			}
			if diff := cmp.Diff(wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			if diff := cmp.Diff(tc.WantErrors, causes(err)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkClaimCreateAdmission is the operator's share of a claim's one admission round
// trip: the AdmissionReview as the API server sends it, decoded, checked, stamped and
// answered with its JSON patch (the HTTP server and TLS left out).
func BenchmarkClaimCreateAdmission(b *testing.B) {
	tmpl := builders.MakeTemplate("python", "ns").Obj()
	reader := fakeClient(tmpl, builders.MakePool("pool", "ns", "python").Obj())
	hook := admission.WithDefaulter(api.NewScheme(), &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser})
	body := review(b, admissionv1.Create, someUser, builders.MakeClaim("claim", "ns", "pool").Obj(), nil)
	serve(b, hook, body)
}
