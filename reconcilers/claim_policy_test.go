package reconcilers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
	"github.com/sandgate-dev/sandgate/test/policycases"
)

// TestClaimReconcileNotServed: a claim whose pool or template is missing, whose pod metadata
// uses reserved keys, that expired before it was served or whose Sandbox is gone gets
// Ready=False with the reason, and no Sandbox.
func TestClaimReconcileNotServed(t *testing.T) {
	tests := map[string]struct {
		objs       []client.Object
		claim      *extv1beta1.SandboxClaim
		wantReason string
		wantMsg    string
		// wantSandboxName is status.sandbox.name, which a claim that was bound keeps.
		wantSandboxName string
		wantEvents      []string
	}{
		"no pool": {
			claim:      builders.MakeClaim("c", "ns", "nopool").Obj(),
			wantReason: extv1beta1.ReasonWarmPoolNotFound, wantMsg: "SandboxWarmPool nopool not found",
		},
		"the pool's template is missing": {
			objs:       []client.Object{builders.MakePool("orphan", "ns", "missing").Obj()},
			claim:      builders.MakeClaim("c", "ns", "orphan").Obj(),
			wantReason: extv1beta1.ReasonTemplateNotFound, wantMsg: "SandboxTemplate missing not found",
		},
		"a reserved pod label": {
			objs:       []client.Object{testTemplate(), testPool(1)},
			claim:      testClaim(testTemplate(), func(w *builders.ClaimWrapper) { w.PodLabel(agentsv1beta1.LabelClaimUID, "someone-else") }),
			wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg:    "spec.additionalPodMetadata.labels[agents.x-k8s.io/claim-uid]: Forbidden: keys of the agents.x-k8s.io, sandgate.dev, kubernetes.io and k8s.io domains and their subdomains are reserved",
		},
		"expired before it was served: no Sandbox": {
			objs:       []client.Object{testTemplate(), testPool(0)},
			claim:      testClaim(testTemplate(), func(w *builders.ClaimWrapper) { w.ShutdownTime(planNow.Add(-time.Second)) }),
			wantReason: extv1beta1.ReasonClaimExpired,
			wantMsg:    fmt.Sprintf(messageClaimExpiredFmt, planNow.Add(-time.Second).Format(time.RFC3339)),
			wantEvents: []string{"event Normal ClaimExpired SandboxClaim/c"},
		},
		"its Sandbox is gone: SandboxMissing, never served again": {
			objs: []client.Object{testTemplate(), testPool(0)},
			claim: func() *extv1beta1.SandboxClaim {
				c := testClaim(testTemplate())
				c.Status.Sandbox.Name = "c"
				return c
			}(),
			wantReason: extv1beta1.ReasonSandboxMissing, wantMsg: "Sandbox c not found", wantSandboxName: "c",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := tc.claim
			claim.UID = "claim-uid"
			a := newFakeAPI(t, append(tc.objs, claim)...)
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))

			if res := reconcileClaim(t, r); res != (ctrl.Result{}) {
				t.Errorf("result = %+v, want none: a watch wakes the claim", res)
			}
			if diff := cmp.Diff(append([]string{"patch SandboxClaim/c/status"}, tc.wantEvents...), a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			want := extv1beta1.SandboxClaimStatus{
				Sandbox:    extv1beta1.SandboxStatusRef{Name: tc.wantSandboxName},
				Conditions: readyCondition(metav1.ConditionFalse, tc.wantReason, tc.wantMsg),
			}
			if diff := cmp.Diff(want, getClaim(t, a).Status); diff != "" {
				t.Errorf("claim status (-want +got):\n%s", diff)
			}
			reconcileClaim(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("a second reconcile wrote (-want +got):\n%s", diff)
			}
		})
	}
}

// The claim controller applies the claim injection rule of the one table the rule's and
// admission's tests iterate too (test/policycases): Ready=False with the case's reason exactly
// when the case has problems, naming their fields, and otherwise the claim's Sandbox, built as
// policy.ClaimBlueprint says. With TestClaimCreateAppliesTheClaimRule (webhooks), this shows
// that a claim admission accepts is never rejected by the controller, and the reverse.
func TestClaimReconcileAppliesTheClaimRule(t *testing.T) {
	for name, tc := range policycases.Cases() {
		t.Run(name, func(t *testing.T) {
			pool := builders.MakePool(policycases.Pool, policycases.Namespace, tc.Template.Name).Replicas(0).Obj()
			pool.UID = "pool-uid"
			claim := tc.Claim
			claim.UID = "claim-uid"
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, agentsv1beta1.AnnotationSandboxTemplateHash, policy.TemplateHash(tc.Template))
			a := newFakeAPI(t, tc.Template, pool, claim)
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))

			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(claim)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}

			got := &extv1beta1.SandboxClaim{}
			if err := a.Get(context.Background(), client.ObjectKeyFromObject(claim), got); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.ConditionReady)
			if ready == nil {
				t.Fatalf("no Ready condition: %+v", got.Status)
			}
			own := claimSandboxes(t, a, claim.UID)
			if len(tc.WantErrors) > 0 {
				if ready.Status != metav1.ConditionFalse || ready.Reason != tc.WantReason {
					t.Errorf("Ready = %s %s, want False %s", ready.Status, ready.Reason, tc.WantReason)
				}
				for _, e := range tc.WantErrors {
					if !strings.Contains(ready.Message, e.Field+": ") {
						t.Errorf("Ready message %q does not name %s", ready.Message, e.Field)
					}
				}
				if len(own) != 0 {
					t.Errorf("a claim the rule rejects got Sandbox %s", own[0].Name)
				}
				if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
					t.Errorf("writes and events (-want +got):\n%s", diff)
				}
				return
			}
			if ready.Reason != extv1beta1.ReasonSandboxNotReady {
				t.Errorf("Ready reason = %s (%s), want %s: the claim is served", ready.Reason, ready.Message, extv1beta1.ReasonSandboxNotReady)
			}
			if len(own) != 1 {
				t.Fatalf("Sandboxes of the claim: %d, want 1", len(own))
			}
			wantBP, _ := policy.ClaimBlueprint(tc.Template, claim)
			if diff := cmp.Diff(wantBP, own[0].Spec.SandboxBlueprint); diff != "" {
				t.Errorf("the Sandbox's blueprint is not policy.ClaimBlueprint's (-want +got):\n%s", diff)
			}
		})
	}
}
