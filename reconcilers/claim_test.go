package reconcilers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func claim(mutate ...func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid"}}
	c.Spec.WarmPoolRef.Name = "pool"
	for _, m := range mutate {
		m(c)
	}
	return c
}

func TestBindPatch(t *testing.T) {
	member := poolMember("pool-abc", "h1", true, "42")
	tests := map[string]struct {
		claim *extv1beta1.SandboxClaim
		want  string
	}{
		"plain claim: owner, labels, precondition, nothing else": {
			claim: claim(),
			want: `{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/launch-type":"warm","agents.x-k8s.io/warm-pool-sandbox":null},` +
				`"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"c","uid":"claim-uid","controller":true,"blockOwnerDeletion":true}],` +
				`"resourceVersion":"42"}}`,
		},
		"creator and pod metadata ride along in the same patch": {
			claim: claim(func(c *extv1beta1.SandboxClaim) {
				c.Labels = map[string]string{agentsv1beta1.LabelCreatedBy: "my-script"}
				c.Spec.AdditionalPodMetadata.Labels = map[string]string{"team": "a"}
			}),
			want: `{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/created-by":"unknown","agents.x-k8s.io/launch-type":"warm","agents.x-k8s.io/warm-pool-sandbox":null},` +
				`"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"c","uid":"claim-uid","controller":true,"blockOwnerDeletion":true}],` +
				`"resourceVersion":"42"},"spec":{"podTemplate":{"metadata":{"labels":{"team":"a"}}}}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(bindPatch(tc.claim, member))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("bind patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimExpiry(t *testing.T) {
	shutdown := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	finishedAt := shutdown.Add(-time.Hour)
	finished := func(sb *agentsv1beta1.Sandbox) {
		sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(finishedAt)}}
	}
	tests := map[string]struct {
		lifecycle *extv1beta1.Lifecycle
		sandbox   *agentsv1beta1.Sandbox
		wantAt    time.Time
		wantOK    bool
	}{
		"no lifecycle: never": {sandbox: sandbox(finished)},
		"shutdownTime": {
			lifecycle: &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: shutdown}},
			wantAt:    shutdown, wantOK: true,
		},
		"TTL before the sandbox finished: not yet": {
			lifecycle: &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](60)},
			sandbox:   sandbox(),
		},
		"TTL after finishing": {
			lifecycle: &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](60)},
			sandbox:   sandbox(finished),
			wantAt:    finishedAt.Add(time.Minute), wantOK: true,
		},
		"the earlier of both": {
			lifecycle: &extv1beta1.Lifecycle{ShutdownTime: &metav1.Time{Time: shutdown}, TTLSecondsAfterFinished: ptr.To[int32](7200)},
			sandbox:   sandbox(finished),
			wantAt:    shutdown, wantOK: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at, ok := claimExpiry(claim(func(c *extv1beta1.SandboxClaim) { c.Spec.Lifecycle = tc.lifecycle }), tc.sandbox)
			if ok != tc.wantOK || !at.Equal(tc.wantAt) {
				t.Errorf("claimExpiry = %v, %v; want %v, %v", at, ok, tc.wantAt, tc.wantOK)
			}
		})
	}
}

func TestCreatedBy(t *testing.T) {
	tests := map[string]struct {
		claim         *extv1beta1.SandboxClaim
		wantCreatedBy string
	}{
		"plain": {claim: claim()},
		"known creator": {
			claim: claim(func(c *extv1beta1.SandboxClaim) {
				c.Labels = map[string]string{agentsv1beta1.LabelCreatedBy: "python-client"}
			}),
			wantCreatedBy: "python-client",
		},
		"unknown creator": {
			claim:         claim(func(c *extv1beta1.SandboxClaim) { c.Labels = map[string]string{agentsv1beta1.LabelCreatedBy: "curl"} }),
			wantCreatedBy: agentsv1beta1.CreatedByUnknown,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := createdBy(tc.claim); got != tc.wantCreatedBy {
				t.Errorf("createdBy = %q, want %q", got, tc.wantCreatedBy)
			}
		})
	}
}

func TestMirror(t *testing.T) {
	r := &claimReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}
	r.init()
	withReady := func(status metav1.ConditionStatus, reason, msg string) *agentsv1beta1.Sandbox {
		return sandbox(func(sb *agentsv1beta1.Sandbox) {
			sb.Status.PodIPs = []string{"10.244.0.7"}
			sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: status, Reason: reason, Message: msg}}
		})
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
			sandbox:    sandbox(),
			wantStatus: metav1.ConditionFalse, wantReason: extv1beta1.ReasonSandboxNotReady, wantMsg: messageSandboxNotReady,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := claim(func(c *extv1beta1.SandboxClaim) { c.Generation = 3 })
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
