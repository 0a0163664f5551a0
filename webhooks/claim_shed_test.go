package webhooks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestShedDecision(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration, creator string) webhooks.WaitingClaim {
		return webhooks.WaitingClaim{Since: now.Add(-d), Creator: creator}
	}
	const maxWait = 5 * time.Second
	for _, tc := range []struct {
		name    string
		waiting []webhooks.WaitingClaim
		creator string
		want    webhooks.Shed
	}{
		{name: "nothing waits", creator: "a", want: webhooks.Shed{}},
		{name: "a burst the operator keeps up with", creator: "a",
			waiting: []webhooks.WaitingClaim{ago(4*time.Second, "a"), ago(time.Second, "a"), ago(0, "a")},
			want:    webhooks.Shed{Oldest: 4 * time.Second, Waiting: 3}},
		{name: "exactly the limit is not past it", creator: "a",
			waiting: []webhooks.WaitingClaim{ago(maxWait, "a")},
			want:    webhooks.Shed{Oldest: maxWait, Waiting: 1}},
		{name: "a backlog past the limit refuses its creator", creator: "a",
			waiting: []webhooks.WaitingClaim{ago(6*time.Second, "a"), ago(time.Second, "a")},
			want:    webhooks.Shed{Refuse: true, Oldest: 6 * time.Second, Waiting: 2, Mine: 2, Share: 2}},
		{name: "a creator with nothing waiting is admitted while another floods", creator: "b",
			waiting: []webhooks.WaitingClaim{ago(9*time.Second, "a"), ago(8*time.Second, "a"), ago(time.Second, "a")},
			want:    webhooks.Shed{Oldest: 9 * time.Second, Waiting: 3, Share: 3}},
		{name: "a creator below its fair share is admitted", creator: "b",
			waiting: []webhooks.WaitingClaim{ago(9*time.Second, "a"), ago(8*time.Second, "a"), ago(7*time.Second, "a"), ago(time.Second, "b")},
			want:    webhooks.Shed{Oldest: 9 * time.Second, Waiting: 4, Mine: 1, Share: 2}},
		{name: "a creator at its fair share is refused", creator: "b",
			waiting: []webhooks.WaitingClaim{ago(9*time.Second, "a"), ago(8*time.Second, "a"), ago(2*time.Second, "b"), ago(time.Second, "b")},
			want:    webhooks.Shed{Refuse: true, Oldest: 9 * time.Second, Waiting: 4, Mine: 2, Share: 2}},
		{name: "the flooding creator is refused", creator: "a",
			waiting: []webhooks.WaitingClaim{ago(9*time.Second, "a"), ago(8*time.Second, "a"), ago(7*time.Second, "a"), ago(time.Second, "b")},
			want:    webhooks.Shed{Refuse: true, Oldest: 9 * time.Second, Waiting: 4, Mine: 3, Share: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webhooks.ShedDecision(now, maxWait, tc.waiting, tc.creator)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// A claim waits for the operator from its admission until the operator binds it or gives it
// a Ready condition: a claim the controller refused (a missing template) or whose pod is slow
// has been handled and holds nothing shut, and a deleted claim is forgotten.
func TestClaimShedCountsOnlyClaimsWaitingForTheOperator(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	shed := &webhooks.ClaimShed{MaxWait: 5 * time.Second, Now: func() time.Time { return now }}
	admittedAt := now.Add(-10 * time.Second).Format(time.RFC3339Nano)
	waiting := builders.MakeClaim("waiting", "ns", "pool").Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, admittedAt).
		Annotation(agentsv1beta1.AnnotationCreator, someUser).Obj()
	handled := builders.MakeClaim("handled", "ns", "pool").Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, admittedAt).
		Annotation(agentsv1beta1.AnnotationCreator, someUser).Obj()
	handled.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "TemplateNotFound"}}
	bound := builders.MakeClaim("bound", "ns", "pool").Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, admittedAt).
		Annotation(agentsv1beta1.AnnotationCreator, someUser).StatusSandbox("sb").Obj()
	fresh := builders.MakeClaim("new", "ns", "pool").Obj()

	shed.Observe(handled)
	shed.Observe(bound)
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("claims the operator handled refused a new claim: %v", err)
	}
	shed.Observe(waiting)
	err := shed.Admit(someUser, fresh)
	var status apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &status) {
		t.Fatalf("a claim waiting 10s past a 5s limit did not refuse a new claim with 429: %v", err)
	}
	if d := status.Status().Details; d == nil || d.RetryAfterSeconds != 5 || d.Kind != "SandboxClaim" {
		t.Errorf("refusal details = %+v, want kind SandboxClaim and retryAfterSeconds 5", d)
	}
	shed.Forget("ns", "waiting")
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("a deleted claim still refused a new claim: %v", err)
	}
	shed.Observe(waiting)
	waiting.Status.Sandbox.Name = "sb2"
	shed.Observe(waiting)
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("a claim bound since still refused a new claim: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	for in, want := range map[time.Duration]int32{0: 1, 300 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 5 * time.Second: 5} {
		if got := webhooks.RetryAfter(in); got != want {
			t.Errorf("RetryAfter(%s) = %d, want %d", in, got, want)
		}
	}
}

// The stamping webhook sheds before anything else is decided for the claim (a refused claim
// reserves nothing in a ClaimPolicy's ledger), and never a dry run.
func TestClaimStampingShedsWhileTheOperatorIsBehind(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj())
	shed := &webhooks.ClaimShed{MaxWait: 2 * time.Second, Now: func() time.Time { return now }}
	w := &webhooks.ClaimWebhook{APIReader: reader, OperatorUser: operatorUser, Now: func() time.Time { return now }, Shed: shed}
	shed.Observe(builders.MakeClaim("old", "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
		Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, now.Add(-3*time.Second).Format(time.RFC3339Nano)).Obj())

	if got := code(w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj())); got != 429 {
		t.Errorf("a new claim of the creator of the backlog: code %d, want 429", got)
	}
	if err := w.Default(request("other@example.com", admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj()); err != nil {
		t.Errorf("a creator with nothing waiting was refused: %v", err)
	}
	dryRun := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: someUser}, DryRun: ptr.To(true)}})
	if err := w.Default(dryRun, builders.MakeClaim("c", "ns", "pool").Obj()); err != nil {
		t.Errorf("a dry run was refused: %v", err)
	}
}
