package reconcilers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
)

func TestMirror(t *testing.T) {
	r := &claimReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}
	r.init()
	withReady := func(status metav1.ConditionStatus, reason, msg string) *agentsv1beta1.Sandbox {
		sb := builders.MakeSandbox("sb", "ns").Obj()
		sb.Status.PodIPs = []string{"10.244.0.7"}
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: status, Reason: reason, Message: msg}}
		return sb
	}
	tests := map[string]struct {
		sandbox    *agentsv1beta1.Sandbox
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		"ready mirrors the sandbox": {
			sandbox:    withReady(metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
			wantStatus: metav1.ConditionTrue, wantReason: agentsv1beta1.ReasonDependenciesReady, wantMsg: agentsv1beta1.MessagePodReady,
		},
		"not ready": {
			sandbox:    withReady(metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodDoesNotExist),
			wantStatus: metav1.ConditionFalse, wantReason: extv1beta1.ReasonSandboxNotReady, wantMsg: agentsv1beta1.MessagePodDoesNotExist,
		},
		"expired": {
			sandbox:    withReady(metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired, "gone"),
			wantStatus: metav1.ConditionFalse, wantReason: extv1beta1.ReasonSandboxExpired, wantMsg: "gone",
		},
		"no status yet": {
			sandbox:    builders.MakeSandbox("sb", "ns").Obj(),
			wantStatus: metav1.ConditionFalse, wantReason: extv1beta1.ReasonSandboxNotReady, wantMsg: messageSandboxNotReady,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := claim(func(w *builders.ClaimWrapper) { w.Generation = 3 })
			r.mirror(c, tc.sandbox)
			want := []metav1.Condition{{
				Type: agentsv1beta1.ConditionReady, Status: tc.wantStatus, Reason: tc.wantReason, Message: tc.wantMsg,
				ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(planNow),
			}}
			if diff := cmp.Diff(want, c.Status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			wantRef := extv1beta1.SandboxStatusRef{Name: tc.sandbox.Name, PodIPs: tc.sandbox.Status.PodIPs}
			if diff := cmp.Diff(wantRef, c.Status.Sandbox); diff != "" {
				t.Errorf("status.sandbox (-want +got):\n%s", diff)
			}
		})
	}
}
