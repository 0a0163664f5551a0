package reconcilers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// unschedulablePod is the pod of sb as the scheduler leaves it when no node fits.
func unschedulablePod(sb *agentsv1beta1.Sandbox) *corev1.Pod {
	pod := podOf(sb)
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	}}
	return pod
}

func TestPodUnschedulable(t *testing.T) {
	sb := poolMember("m", "h1", false, "1")
	deleting := unschedulablePod(sb)
	deleting.DeletionTimestamp = &metav1.Time{Time: planNow}
	deleting.Finalizers = []string{"test"}
	scheduled := podOf(sb)
	scheduled.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	otherReason := unschedulablePod(sb)
	otherReason.Status.Conditions[0].Reason = "SchedulerError"
	tests := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"PodScheduled=False, Unschedulable":      {pod: unschedulablePod(sb), want: true},
		"no pod: replaced, not held":             {},
		"a pod being deleted is not held":        {pod: deleting},
		"a scheduled pod is not unschedulable":   {pod: scheduled},
		"another reason is not unschedulable":    {pod: otherReason},
		"no PodScheduled condition yet: not one": {pod: podOf(sb)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.pod != nil {
				objs = append(objs, tc.pod)
			}
			r := &warmPoolReconciler{Client: newFakeAPI(t, objs...)}
			if got := r.podUnschedulable(context.Background(), sb); got != tc.want {
				t.Errorf("podUnschedulable = %v, want %v", got, tc.want)
			}
		})
	}
}

// The refill counts a member's pod placed as the scheduler binds it (podPlaced), and the
// pod's placement wakes the member's pool: the member's status says so only with its Ready
// (startingUp). A bound Sandbox's pod, or a pod of another Sandbox of the name, wakes no pool.
func TestMemberPlacementIsReadFromItsPod(t *testing.T) {
	member := poolMember("m", "h1", false, "1")
	bound := poolMember("b", "h1", false, "1")
	bound.OwnerReferences = nil
	unplaced := podOf(member)
	placed := podOf(member)
	placed.Spec.NodeName = "node-1"
	ofBound := podOf(bound)
	ofBound.Spec.NodeName = "node-1"
	stranger := podOf(member)
	stranger.OwnerReferences[0].UID = "uid-another"

	r := &warmPoolReconciler{Client: newFakeAPI(t, member, bound, placed, ofBound)}
	ctx := context.Background()
	if !r.podPlaced(ctx, member) {
		t.Errorf("podPlaced = false for a member whose pod is on node-1")
	}
	if r.podPlaced(ctx, poolMember("gone", "h1", false, "1")) {
		t.Errorf("podPlaced = true for a member without a pod")
	}

	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}}
	if got := r.poolOfPlacedPod(ctx, placed); !slices.Equal(got, want) {
		t.Errorf("poolOfPlacedPod(member's pod) = %v, want %v", got, want)
	}
	for name, pod := range map[string]*corev1.Pod{"a bound Sandbox's pod": ofBound, "a pod of another Sandbox of the name": stranger} {
		if got := r.poolOfPlacedPod(ctx, pod); len(got) != 0 {
			t.Errorf("poolOfPlacedPod(%s) = %v, want none", name, got)
		}
	}

	for name, tc := range map[string]struct {
		old, cur *corev1.Pod
		want     bool
	}{
		"placed":              {unplaced, placed, true},
		"already on its node": {placed, placed, false},
		"not placed yet":      {unplaced, unplaced, false},
	} {
		if got := podPlacement.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("podPlacement(%s) = %v, want %v", name, got, tc.want)
		}
	}
}

// Past the grace period a stuck member is replaced and an unschedulable one held: the pool
// says so once (WarmPoolNotProgressing), looks again within the recheck interval, and says
// once that it progresses again when none is held any more.
func TestWarmPoolReconcileHoldsUnschedulableMembers(t *testing.T) {
	tmpl := builders.MakeTemplate("tmpl", "ns").Obj()
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Replicas(2).Obj()
	hash := policy.TemplateHash(tmpl)
	held := aged("held", hash, false, 10*time.Minute)
	stuck := aged("stuck", hash, false, 10*time.Minute)
	a := newFakeAPI(t, tmpl, pool, held, stuck, unschedulablePod(held), podOf(stuck))
	clk := clocktesting.NewFakeClock(planNow)
	const recheck = 30 * time.Second
	r := &warmPoolReconciler{Client: a, Recorder: a.Recorder(), Metrics: newTestMetrics(t), Clock: clk,
		WarmPool: WarmPoolPolicy{UnschedulableRecheckInterval: recheck}.withDefaults(), pacing: newRefillPacing(),
		expected: newExpectations(clk), activity: newPoolActivity()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	j := a.Journal()
	if !slices.Contains(j, "delete Sandbox/stuck") || slices.Contains(j, "delete Sandbox/held") {
		t.Errorf("writes %v, want the stuck member deleted and the unschedulable one kept", j)
	}
	if n := countPrefix(j, "create Sandbox/p-"); n != 1 {
		t.Errorf("writes %v: %d creates, want 1 (the stuck member's replacement; the held one counts)", j, n)
	}
	if n := countPrefix(j, "event Warning "+EventWarmPoolNotProgressing); n != 1 {
		t.Errorf("journal %v: %d %s events, want 1", j, n, EventWarmPoolNotProgressing)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > recheck {
		t.Errorf("RequeueAfter = %s, want within the recheck interval %s", res.RequeueAfter, recheck)
	}

	// The held member's pod is scheduled and it becomes Ready: the pool progresses again.
	ready := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), client.ObjectKeyFromObject(held), ready); err != nil {
		t.Fatal(err)
	}
	ready.Status.Conditions[0].Status = metav1.ConditionTrue
	if err := a.Status().Update(context.Background(), ready); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute) // past the expectations of the first reconcile's writes (no informer here)
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	j = a.Journal()
	if n := countPrefix(j, "event Normal "+EventWarmPoolProgressing); n != 1 {
		t.Errorf("journal %v: %d %s events, want 1", j, n, EventWarmPoolProgressing)
	}
}

func countPrefix(entries []string, prefix string) int {
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}
