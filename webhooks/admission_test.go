package webhooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

const (
	operatorUser = webhooks.DefaultOperatorUser
	someUser     = "jane@example.com"
	goodHash     = "1111111111111111"
	staleHash    = "2222222222222222"
)

// request returns a context carrying an admission request from user, as the webhook server
// passes it to typed webhooks.
func request(user string, op admissionv1.Operation) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: user},
	}})
}

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

func stampedClaim(name string, uid types.UID, hash string) *extv1beta1.SandboxClaim {
	w := builders.MakeClaim(name, "ns", "pool")
	if hash != "" {
		w.Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash)
	}
	c := w.Obj()
	c.UID = uid
	return c
}

// boundTo returns sb bound to claim as the binding patch leaves it; a nil claim leaves sb as is.
func boundTo(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, label, owner bool) *agentsv1beta1.Sandbox {
	sb = sb.DeepCopy()
	if label {
		sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	}
	if owner {
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	}
	return sb
}

func TestBindingGuard(t *testing.T) {
	claim := stampedClaim("c1", "uid-1", goodHash)
	other := stampedClaim("c2", "uid-2", goodHash)
	unstamped := stampedClaim("c3", "uid-3", "")
	ghost := stampedClaim("ghost", "uid-404", goodHash)
	member := builders.MakeSandbox("m", "ns").Label(agentsv1beta1.LabelSandboxTemplateHash, goodHash).Obj()
	stale := builders.MakeSandbox("m", "ns").Label(agentsv1beta1.LabelSandboxTemplateHash, staleHash).Obj()
	mixed := boundTo(boundTo(member, other, true, false), claim, false, true)

	for _, tc := range []struct {
		name     string
		user     string
		old, new *agentsv1beta1.Sandbox
		// cached is what the manager's cache holds (nil: the cache misses every claim).
		cached   []client.Object
		wantCode int32
		wantMsg  []string
	}{
		{name: "operator binds a member of the claim's version", user: operatorUser, old: member, new: boundTo(member, claim, true, true), wantCode: 200},
		{name: "the claim found only in the API server", user: operatorUser, old: member, new: boundTo(member, claim, true, true), cached: []client.Object{}, wantCode: 200},
		{name: "a user binds", user: someUser, old: member, new: boundTo(member, claim, true, true), wantCode: 403,
			wantMsg: []string{"ns/m", "c1", goodHash, operatorUser, someUser}},
		{name: "a user sets the claim-uid label", user: someUser, old: member, new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "operator binds a stale member", user: operatorUser, old: stale, new: boundTo(stale, claim, true, true), wantCode: 403,
			wantMsg: []string{"ns/m", "c1", goodHash, staleHash}},
		{name: "operator rebinds", user: operatorUser, old: boundTo(member, other, true, true), new: boundTo(member, claim, true, true), wantCode: 403,
			wantMsg: []string{"already bound", "uid-2"}},
		{name: "operator binds by label only", user: operatorUser, old: member, new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "label and owner name different claims", user: operatorUser, old: member, new: mixed, wantCode: 403},
		{name: "claim does not exist", user: operatorUser, old: member, new: boundTo(member, ghost, true, true), wantCode: 403,
			wantMsg: []string{"does not exist"}},
		{name: "claim not stamped", user: operatorUser, old: member, new: boundTo(member, unstamped, true, true), wantCode: 403,
			wantMsg: []string{"no template-hash stamp"}},
		{name: "a user unbinds", user: someUser, old: boundTo(member, claim, true, true), new: member, wantCode: 403},
		{name: "operator unbinds", user: operatorUser, old: boundTo(member, claim, true, true), new: member, wantCode: 200},
		{name: "a user removes the ownerReference only", user: someUser, old: boundTo(member, claim, true, true), new: boundTo(member, claim, true, false), wantCode: 403},
		{name: "the garbage collector orphans the sandbox of a deleted claim", user: "system:serviceaccount:kube-system:generic-garbage-collector",
			old: boundTo(member, ghost, true, true), new: boundTo(member, ghost, true, false), wantCode: 200},
		{name: "a user removes a leftover label", user: someUser, old: boundTo(member, ghost, true, false), new: member, wantCode: 200},
		{name: "a user edits a bound sandbox", user: someUser, old: boundTo(member, claim, true, true),
			new: func() *agentsv1beta1.Sandbox {
				sb := boundTo(member, claim, true, true)
				sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
				return sb
			}(), wantCode: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := api.NewScheme()
			apiReader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim, other, unstamped).Build()
			cache := client.Reader(apiReader)
			if tc.cached != nil {
				cache = fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.cached...).Build()
			}
			w := &webhooks.SandboxWebhook{Cache: cache, APIReader: apiReader, OperatorUser: operatorUser}
			_, err := w.ValidateUpdate(request(tc.user, admissionv1.Update), tc.old, tc.new)
			if diff := cmp.Diff(tc.wantCode, code(err)); diff != "" {
				t.Fatalf("status code (-want +got):\n%s\nerror: %v", diff, err)
			}
			for _, part := range tc.wantMsg {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("message %q lacks %q", err.Error(), part)
				}
			}
		})
	}
}

// A stale cache entry (an older claim of the same name) is not trusted: the API server's
// claim decides.
func TestBindingGuardReadsThroughStaleCache(t *testing.T) {
	scheme := api.NewScheme()
	claim := stampedClaim("c1", "uid-new", goodHash)
	member := builders.MakeSandbox("m", "ns").Label(agentsv1beta1.LabelSandboxTemplateHash, goodHash).Obj()
	w := &webhooks.SandboxWebhook{
		Cache:        fake.NewClientBuilder().WithScheme(scheme).WithObjects(stampedClaim("c1", "uid-old", staleHash)).Build(),
		APIReader:    fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).Build(),
		OperatorUser: operatorUser,
	}
	if _, err := w.ValidateUpdate(request(operatorUser, admissionv1.Update), member, boundTo(member, claim, true, true)); err != nil {
		t.Errorf("binding refused: %v", err)
	}
}

func TestClaimStamping(t *testing.T) {
	scheme := api.NewScheme()
	tmpl := builders.MakeTemplate("tmpl", "ns").Obj()
	hash := agentsv1beta1.BlueprintHash(&tmpl.Spec.SandboxBlueprint)
	now := time.Date(2026, 11, 23, 4, 5, 6, 789, time.UTC)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		tmpl,
		builders.MakePool("pool", "ns", "tmpl").Obj(),
		builders.MakePool("orphan", "ns", "missing").Obj(),
	).Build()
	w := &webhooks.ClaimWebhook{Reader: reader, OperatorUser: operatorUser, Now: func() time.Time { return now }}
	observed := now.Format(time.RFC3339Nano)

	for _, tc := range []struct {
		name            string
		claim           *extv1beta1.SandboxClaim
		op              admissionv1.Operation
		wantCode        int32
		wantAnnotations map[string]string
	}{
		{name: "stamped", claim: builders.MakeClaim("c", "ns", "pool").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationSandboxTemplateHash: hash, agentsv1beta1.AnnotationWebhookFirstObservedAt: observed}},
		{name: "right stamp supplied", claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, hash).Obj(),
			op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationSandboxTemplateHash: hash, agentsv1beta1.AnnotationWebhookFirstObservedAt: observed}},
		{name: "forged stamp", claim: builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, staleHash).Obj(),
			op: admissionv1.Create, wantCode: 422},
		{name: "no pool", claim: builders.MakeClaim("c", "ns", "nopool").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: observed}},
		{name: "no template", claim: builders.MakeClaim("c", "ns", "orphan").Obj(), op: admissionv1.Create, wantCode: 200,
			wantAnnotations: map[string]string{agentsv1beta1.AnnotationWebhookFirstObservedAt: observed}},
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
