package webhooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/testing/policycases"
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
		user            string // someUser when empty
		groups          []string
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
		{name: "first-observed times the client supplied are admission's", claim: builders.MakeClaim("c", "ns", "nopool").
			Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, "0001-01-01T00:00:00Z").
			Annotation(agentsv1beta1.AnnotationControllerFirstObservedAt, "0001-01-01T00:00:00Z").
			Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, "0001-01-01T00:00:00Z").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed,
				agentsv1beta1.AnnotationClientFirstRequestedAt: "0001-01-01T00:00:00Z", agentsv1beta1.AnnotationCreator: "jane@example.com"}},
		{name: "a binding supplied at creation", claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxName, "someone-elses").Obj(),
			op: admissionv1.Create, wantCode: 422},
		{name: "a binding supplied at creation, before the template exists", claim: builders.MakeClaim("c", "ns", "orphan").Annotation(agentsv1beta1.AnnotationSandboxName, "someone-elses").Obj(),
			op: admissionv1.Create, wantCode: 422},
		{name: "a binding the platform carries over (a restore)", user: "admin", groups: []string{"system:masters"},
			claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxName, "restored").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationSandboxName: "restored", agentsv1beta1.AnnotationSandboxTemplateHash: hash, agentsv1beta1.AnnotationWebhookFirstObservedAt: observed, agentsv1beta1.AnnotationControllerFirstObservedAt: observed, agentsv1beta1.AnnotationCreator: "admin"}},
		{name: "update leaves annotations alone", claim: builders.MakeClaim("c", "ns", "pool").Annotation("a", "b").Obj(), op: admissionv1.Update, wantCode: 200,
			wantAnnotations: map[string]string{"a": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := tc.claim.DeepCopy()
			user := tc.user
			if user == "" {
				user = someUser
			}
			err := w.Default(requestAs(authenticationv1.UserInfo{Username: user, Groups: tc.groups}, tc.op), claim)
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

// Every claim admitted is recorded as an arrival at its pool, at the time written into its
// webhook-first-observed-at (by which the leader's informer recognizes it: internal/demand);
// a refused claim, a dry run and a claim whose name is taken (the API server will refuse it)
// are not demand.
func TestClaimStampingRecordsArrivals(t *testing.T) {
	now := time.Date(2026, 11, 27, 4, 5, 6, 789, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj(),
		builders.MakeClaim("taken", "ns", "pool").Obj())
	rec := demand.NewRecorder(clk)
	w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser, Now: clk.Now, Demand: rec}
	pool := types.NamespacedName{Namespace: "ns", Name: "pool"}
	dryRun := func(op admissionv1.Operation) context.Context {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "ns",
			UserInfo: authenticationv1.UserInfo{Username: someUser}, DryRun: ptr.To(true)}}
		return admission.NewContextWithRequest(context.Background(), req)
	}

	admitted := builders.MakeClaim("", "ns", "pool").Obj()
	if err := w.Default(request(someUser, admissionv1.Create), admitted); err != nil {
		t.Fatal(err)
	}
	if code(w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("bad", "ns", "pool").
		Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, staleHash).Obj())) != 422 {
		t.Fatal("a forged stamp was admitted")
	}
	if err := w.Default(dryRun(admissionv1.Create), builders.MakeClaim("dry", "ns", "pool").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("taken", "ns", "pool").Obj()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Estimate(pool).LongWindowClaims; got != 1 {
		t.Fatalf("%d arrivals recorded, want the one admitted claim", got)
	}
	at, err := time.Parse(time.RFC3339Nano, admitted.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Created(pool, at) {
		t.Error("the informer's create of the admitted claim counted as a second arrival")
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
// controller's tests iterate too (internal/testing/policycases): a claim is refused with 422 exactly when
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

// A claim's pod labels must be under the allowlist in effect (the public controller's
// allowed-label-domains): refused at creation with 422 naming the label and the allowed
// domains, whether or not the pool and template exist yet; an update is refused only for a
// label it adds.
func TestClaimLabelAllowlist(t *testing.T) {
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj())
	custom := policy.NewLabelDomains([]string{"acme.example"})
	labelled := func(pool string, labels ...string) *extv1beta1.SandboxClaim {
		w := builders.MakeClaim("c", "ns", pool)
		for _, k := range labels {
			w.PodLabel(k, "v")
		}
		return w.Obj()
	}
	for name, tc := range map[string]struct {
		domains    *policy.LabelDomains
		claim      *extv1beta1.SandboxClaim
		wantCauses []policycases.FieldError
		wantMsg    string
	}{
		"the public default domain": {claim: labelled("pool", "sandbox.users.io/team", "ml.sandbox.users.io/gpu")},
		"outside the default list": {claim: labelled("pool", "example.com/team"),
			wantCauses: []policycases.FieldError{{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.labels[example.com/team]"}},
			wantMsg:    "allowed domains (and their subdomains): sandbox.users.io"},
		"unprefixed, also while the pool does not exist": {claim: labelled("nopool", "team"),
			wantCauses: []policycases.FieldError{{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.labels[team]"}},
			wantMsg:    "need a domain prefix"},
		"router impersonation": {claim: builders.MakeClaim("c", "ns", "pool").PodLabel("app", "sandbox-router").Obj(),
			wantCauses: []policycases.FieldError{{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.labels[app]"}},
			wantMsg:    "sandbox router"},
		"a configured list": {domains: custom, claim: labelled("pool", "acme.example/team")},
		"a configured list replaces the default": {domains: custom, claim: labelled("pool", "sandbox.users.io/team"),
			wantCauses: []policycases.FieldError{{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.labels[sandbox.users.io/team]"}},
			wantMsg:    "acme.example"},
	} {
		t.Run(name, func(t *testing.T) {
			w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser, LabelDomains: tc.domains}
			err := w.Default(request(someUser, admissionv1.Create), tc.claim.DeepCopy())
			if diff := cmp.Diff(tc.wantCauses, causes(err)); diff != "" {
				t.Fatalf("refused fields (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil && (code(err) != 422 || !strings.Contains(err.Error(), tc.wantMsg)) {
				t.Errorf("error %d %q, want 422 saying %q", code(err), err, tc.wantMsg)
			}
		})
	}

	t.Run("an update is refused for the labels it adds only", func(t *testing.T) {
		w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}
		old := labelled("pool", "team") // admitted before the allowlist
		kept := old.DeepCopy()
		kept.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownPolicy: extv1beta1.ClaimShutdownPolicyDelete}
		if _, err := w.ValidateUpdate(request(someUser, admissionv1.Update), old, kept); err != nil {
			t.Errorf("an update keeping a label admitted before: %v", err)
		}
		added := old.DeepCopy()
		added.Spec.AdditionalPodMetadata.Labels["example.com/new"] = "v"
		_, err := w.ValidateUpdate(request(someUser, admissionv1.Update), old, added)
		if diff := cmp.Diff([]policycases.FieldError{{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.labels[example.com/new]"}}, causes(err)); diff != "" {
			t.Errorf("an update adding a label (-want +got):\n%s", diff)
		}
	})
}

// A claim's pod annotations must be under the annotation allowlist
// (--claim-allowed-annotation-domains, default sandbox.users.io): a service mesh's opt-out,
// a CNI's extra networks, a runtime option without a domain are refused at creation with 422
// naming the annotation, the allowed domains and the flag; the runtime prefixes stay refused
// under any list; an update is refused only for an annotation it adds.
func TestClaimAnnotationAllowlist(t *testing.T) {
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj())
	annotated := func(pool string, keys ...string) *extv1beta1.SandboxClaim {
		w := builders.MakeClaim("c", "ns", pool)
		for _, k := range keys {
			w.PodAnnotation(k, "v")
		}
		return w.Obj()
	}
	forbidden := func(keys ...string) []policycases.FieldError {
		var out []policycases.FieldError
		for _, k := range keys {
			out = append(out, policycases.FieldError{Type: field.ErrorTypeForbidden, Field: "spec.additionalPodMetadata.annotations[" + k + "]"})
		}
		return out
	}
	for name, tc := range map[string]struct {
		domains    []string
		claim      *extv1beta1.SandboxClaim
		wantCauses []policycases.FieldError
		wantMsg    string
	}{
		"the default domain and its subdomains": {claim: annotated("pool", "sandbox.users.io/note", "ml.sandbox.users.io/gpu")},
		"the autoscaler's eviction hint, as the public controller allows it": {
			claim: annotated("pool", "cluster-autoscaler.kubernetes.io/safe-to-evict")},
		"service mesh opt-outs": {
			claim:      annotated("pool", "sidecar.istio.io/inject", "traffic.sidecar.istio.io/excludeOutboundIPRanges", "linkerd.io/inject"),
			wantCauses: forbidden("linkerd.io/inject", "sidecar.istio.io/inject", "traffic.sidecar.istio.io/excludeOutboundIPRanges"),
			wantMsg:    "allowed domains (and their subdomains): sandbox.users.io (the platform sets them with --claim-allowed-annotation-domains)"},
		"extra networks, also while the pool does not exist": {claim: annotated("nopool", "k8s.v1.cni.cncf.io/networks"),
			wantCauses: forbidden("k8s.v1.cni.cncf.io/networks"), wantMsg: `annotation domain "k8s.v1.cni.cncf.io" is not in the allowlist`},
		"crun's options, which carry no domain": {claim: annotated("pool", "run.oci.keep_original_groups"),
			wantCauses: forbidden("run.oci.keep_original_groups"), wantMsg: "need a domain prefix"},
		"a configured list replaces the default": {domains: []string{"acme.example"}, claim: annotated("pool", "acme.example/owner", "sandbox.users.io/note"),
			wantCauses: forbidden("sandbox.users.io/note"), wantMsg: "acme.example"},
		"the runtime prefixes stay refused under any list": {domains: []string{"io.containerd.example"},
			claim: annotated("pool", "io.containerd.example/x"), wantCauses: forbidden("io.containerd.example/x"), wantMsg: "container runtimes"},
	} {
		t.Run(name, func(t *testing.T) {
			w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser, AnnotationDomains: tc.domains}
			err := w.Default(request(someUser, admissionv1.Create), tc.claim.DeepCopy())
			if diff := cmp.Diff(tc.wantCauses, causes(err)); diff != "" {
				t.Fatalf("refused fields (-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil && (code(err) != 422 || !strings.Contains(err.Error(), tc.wantMsg)) {
				t.Errorf("error %d %q, want 422 saying %q", code(err), err, tc.wantMsg)
			}
		})
	}

	t.Run("an update is refused for the annotations it adds only", func(t *testing.T) {
		w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}
		old := annotated("pool", "note") // admitted before the allowlist
		kept := old.DeepCopy()
		kept.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownPolicy: extv1beta1.ClaimShutdownPolicyDelete}
		if _, err := w.ValidateUpdate(request(someUser, admissionv1.Update), old, kept); err != nil {
			t.Errorf("an update keeping an annotation admitted before: %v", err)
		}
		added := old.DeepCopy()
		added.Spec.AdditionalPodMetadata.Annotations["sidecar.istio.io/inject"] = "false"
		_, err := w.ValidateUpdate(request(someUser, admissionv1.Update), old, added)
		if diff := cmp.Diff(forbidden("sidecar.istio.io/inject"), causes(err)); diff != "" {
			t.Errorf("an update adding an annotation (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkClaimCreateAdmission is the operator's share of a claim's one admission round
// trip: the AdmissionReview as the API server sends it, decoded, checked, stamped and
// answered with its JSON patch (the HTTP server and TLS left out).
//
// With ClaimPolicies on, a namespace without a policy costs one more list from the cache (here
// a fake client's, dearer than an informer's), and nothing else.
func BenchmarkClaimCreateAdmission(b *testing.B) {
	tmpl := builders.MakeTemplate("python", "ns").Obj()
	body := review(b, admissionv1.Create, someUser, builders.MakeClaim("claim", "ns", "pool").Obj(), nil)
	for name, policies := range map[string]bool{"without ClaimPolicies": false, "a namespace without a policy": true} {
		b.Run(name, func(b *testing.B) {
			reader := fakeClient(tmpl, builders.MakePool("pool", "ns", "python").Obj())
			w := &webhooks.ClaimWebhook{Cache: reader, APIReader: reader, OperatorUser: operatorUser}
			if policies {
				w.Policies = claimPolicies(noWrites{reader}, noWrites{reader})
			}
			serve(b, admission.WithDefaulter(api.NewScheme(), w), body)
		})
	}
}
