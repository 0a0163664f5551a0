package reconcilers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestClaimReconcileExpiry: a claim is requeued for its expiry and, once expired, ends as its
// shutdownPolicy says: Delete and DeleteForeground delete the claim (its Sandbox goes with it by
// garbage collection), Retain (the default) deletes only the Sandbox and keeps the claim
// Ready=False ClaimExpired.
func TestClaimReconcileExpiry(t *testing.T) {
	finishedAt := planNow.Add(30 * time.Second)
	tests := map[string]struct {
		claim           func(*builders.ClaimWrapper)
		sandboxFinished bool
		wantRequeue     time.Duration
		wantJournal     []string
		wantClaimGone   bool
	}{
		"Delete: the claim is deleted at its shutdownTime": {
			claim: func(w *builders.ClaimWrapper) {
				w.ShutdownTime(planNow.Add(time.Minute)).ShutdownPolicy(extv1beta1.ClaimShutdownPolicyDelete)
			},
			wantRequeue:   time.Minute,
			wantJournal:   []string{"delete SandboxClaim/c", "event Normal ClaimExpired SandboxClaim/c"},
			wantClaimGone: true,
		},
		"DeleteForeground: the claim is deleted at its shutdownTime": {
			claim: func(w *builders.ClaimWrapper) {
				w.ShutdownTime(planNow.Add(time.Minute)).ShutdownPolicy(extv1beta1.ClaimShutdownPolicyDeleteForeground)
			},
			wantRequeue:   time.Minute,
			wantJournal:   []string{"delete SandboxClaim/c", "event Normal ClaimExpired SandboxClaim/c"},
			wantClaimGone: true,
		},
		"Retain: the Sandbox is deleted, the claim kept": {
			claim: func(w *builders.ClaimWrapper) {
				w.ShutdownTime(planNow.Add(time.Minute)).ShutdownPolicy(extv1beta1.ClaimShutdownPolicyRetain)
			},
			wantRequeue: time.Minute,
			wantJournal: []string{"delete Sandbox/c", "patch SandboxClaim/c/status", "event Normal ClaimExpired SandboxClaim/c"},
		},
		"no policy means Retain": {
			claim:       func(w *builders.ClaimWrapper) { w.ShutdownTime(planNow.Add(time.Minute)) },
			wantRequeue: time.Minute,
			wantJournal: []string{"delete Sandbox/c", "patch SandboxClaim/c/status", "event Normal ClaimExpired SandboxClaim/c"},
		},
		"a TTL counts from the Sandbox's finish": {
			claim:           func(w *builders.ClaimWrapper) { w.TTLSecondsAfterFinished(60) },
			sandboxFinished: true,
			wantRequeue:     90 * time.Second,
			wantJournal:     []string{"delete Sandbox/c", "patch SandboxClaim/c/status", "event Normal ClaimExpired SandboxClaim/c"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl := testTemplate()
			// Its bookkeeping done (the sandbox-name annotation), so that only the expiry
			// decides when it is reconciled again.
			claim := testClaim(tmpl, tc.claim, func(w *builders.ClaimWrapper) { w.Annotation(agentsv1beta1.AnnotationSandboxName, "c") })
			own := readyMember(testPool(1), tmpl, "c", "10.0.0.9")
			own.Labels = map[string]string{agentsv1beta1.LabelClaimUID: string(claim.UID), agentsv1beta1.LabelLaunchType: agentsv1beta1.LaunchTypeCold}
			own.OwnerReferences = []metav1.OwnerReference{claimRef(claim)}
			if tc.sandboxFinished {
				own.Status.Conditions = append(own.Status.Conditions, metav1.Condition{
					Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodSucceeded,
					LastTransitionTime: metav1.NewTime(finishedAt),
				})
			}
			a := newFakeAPI(t, tmpl, testPool(1), claim, own, podOf(own))
			clk := clocktesting.NewFakeClock(planNow)
			r := newClaimReconciler(t, a, clk)

			if res := reconcileClaim(t, r); res.RequeueAfter != tc.wantRequeue {
				t.Errorf("before expiry: requeued after %v, want %v (the expiry)", res.RequeueAfter, tc.wantRequeue)
			}
			if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
				t.Errorf("before expiry: writes and events (-want +got):\n%s", diff)
			}

			clk.Step(tc.wantRequeue)
			if res := reconcileClaim(t, r); res.RequeueAfter != 0 {
				t.Errorf("at expiry: requeued after %v, want no requeue", res.RequeueAfter)
			}
			if diff := cmp.Diff(tc.wantJournal, a.Journal()); diff != "" {
				t.Errorf("at expiry: writes and events (-want +got):\n%s", diff)
			}
			got := &extv1beta1.SandboxClaim{}
			err := a.Get(context.Background(), claimKey, got)
			if tc.wantClaimGone {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("the expired claim: %v, want it deleted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			expiredAt := planNow.Add(tc.wantRequeue)
			want := []metav1.Condition{{
				Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonClaimExpired,
				Message:            fmt.Sprintf(messageClaimExpiredFmt, expiredAt.UTC().Format(time.RFC3339)),
				LastTransitionTime: metav1.NewTime(expiredAt),
			}}
			if tc.sandboxFinished {
				want = append(want, metav1.Condition{
					Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodSucceeded,
					LastTransitionTime: metav1.NewTime(finishedAt),
				})
			}
			wantStatus := extv1beta1.SandboxClaimStatus{Sandbox: extv1beta1.SandboxStatusRef{Name: "c"}, Conditions: want}
			if diff := cmp.Diff(wantStatus, got.Status); diff != "" {
				t.Errorf("expired claim status (-want +got):\n%s", diff)
			}

			// Expired stays expired: no second event, no write, no new Sandbox.
			clk.Step(time.Minute)
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("after expiry: writes and events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimExpiry(t *testing.T) {
	shutdown := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	finishedAt := shutdown.Add(-time.Hour)
	running := builders.MakeSandbox("sb", "ns").Obj()
	finished := builders.MakeSandbox("sb", "ns").Obj()
	finished.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(finishedAt)}}
	tests := map[string]struct {
		lifecycle *extv1beta1.Lifecycle
		sandbox   *agentsv1beta1.Sandbox
		wantAt    time.Time
		wantOK    bool
	}{
		"no lifecycle: never": {sandbox: finished},
		"shutdownTime": {
			lifecycle: &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: shutdown}},
			wantAt:    shutdown, wantOK: true,
		},
		"TTL before the sandbox finished: not yet": {
			lifecycle: &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](60)},
			sandbox:   running,
		},
		"TTL after finishing": {
			lifecycle: &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](60)},
			sandbox:   finished,
			wantAt:    finishedAt.Add(time.Minute), wantOK: true,
		},
		"the earlier of both": {
			lifecycle: &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: shutdown}, TTLSecondsAfterFinished: ptr.To[int32](7200)},
			sandbox:   finished,
			wantAt:    shutdown, wantOK: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at, ok := claimExpiry(claim(func(w *builders.ClaimWrapper) { w.Spec.Lifecycle = tc.lifecycle }), tc.sandbox)
			if ok != tc.wantOK || !at.Equal(tc.wantAt) {
				t.Errorf("claimExpiry = %v, %v; want %v, %v", at, ok, tc.wantAt, tc.wantOK)
			}
		})
	}
}
