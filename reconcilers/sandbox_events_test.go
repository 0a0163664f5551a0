package reconcilers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func TestPodWake(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	with := func(m func(*corev1.Pod)) *corev1.Pod { p := base(); m(p); return p }
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		old, cur *corev1.Pod
		want     string
	}{
		"nothing that matters": {base(), with(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), wakeIgnored},
		"containers ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.ContainersReady, corev1.ConditionTrue)}
		}), wakeIgnored},
		"initialized": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue)}
		}), wakeIgnored},
		"scheduled":   {base(), with(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), wakeDelayed},
		"ip assigned": {base(), with(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}} }), wakeDelayed},
		// Claims take no starting member whose pod fits nowhere: they must learn it at once.
		"unschedulable": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}), wakeImmediate},
		// The scheduler's retries rewrite the message: progress, not a new state.
		"still unschedulable": {with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
		}), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/4 nodes are available"}}
		}), wakeDelayed},
		"scheduled after all": {with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}), with(func(p *corev1.Pod) {
			p.Spec.NodeName = "n1"
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue)}
		}), wakeImmediate},
		"running":          {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), wakeDelayed},
		"deletion started": {base(), with(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), wakeDelayed},
		"ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), wakeImmediate},
		"not ready anymore": {with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), base(), wakeImmediate},
		"succeeded": {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), wakeImmediate},
		"failed":    {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), wakeImmediate},
		// A relist shows a pod deleted and recreated meanwhile as an update: another pod.
		"another pod under the name": {base(), with(func(p *corev1.Pod) { p.UID = "other" }), wakeImmediate},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podWake(tc.old, tc.cur); got != tc.want {
				t.Errorf("podWake = %q, want %q", got, tc.want)
			}
		})
	}
}

// A claim's Sandbox, cold-started or a member it bound, is served before the members a pool
// is refilling, whatever the order their events came in; and the events of a Sandbox's pod
// take the Sandbox's place. Measured with the public rapid-burst recipe, a burst's cold
// starts otherwise waited behind hundreds of refill members in this queue.
func TestClaimSandboxesGoBeforePoolMembers(t *testing.T) {
	ctx := context.Background()
	q := controllerQueue(queueOptions(controller.Options{}))
	defer q.ShutDown()
	prio := &sandboxPriorities{}
	h := &sandboxEventHandler{priorities: prio}
	pods := &podEventHandler{expected: newExpectations(clock.RealClock{}), pods: newPodMemories(), metrics: newTestMetrics(t), priorities: prio}

	var members []*agentsv1beta1.Sandbox
	for i := range 5 {
		m := poolMember(fmt.Sprintf("member-%d", i), "h1", false, "1")
		members = append(members, m)
		h.Create(ctx, event.CreateEvent{Object: m}, q)
	}
	claimObj := builders.MakeClaim("c", "ns", "pool").UID("claim-uid").Obj()
	cold := builders.MakeSandbox("c", "ns").ControlledBy(claimObj, extv1beta1.GroupVersion.WithKind(claimKind)).Obj()
	h.Create(ctx, event.CreateEvent{Object: cold}, q)
	// A claim binds member-3 while it waits in the queue.
	bound := members[3].DeepCopy()
	bound.OwnerReferences = cold.OwnerReferences
	h.Update(ctx, event.UpdateEvent{ObjectOld: members[3], ObjectNew: bound}, q)

	var got []string
	for range 6 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
		q.Forget(req)
	}
	want := []string{"c", "member-3", "member-0", "member-1", "member-2", "member-4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}

	// Pod events: the pool member's pod waits behind the bound member's, whose pod still
	// carries the pool's label (the claim's route write removes it once the claim is Ready).
	pods.Create(ctx, event.CreateEvent{Object: podOf(members[1])}, q)
	pods.Create(ctx, event.CreateEvent{Object: podOf(members[3])}, q)
	got = nil
	for range 2 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
		q.Forget(req)
	}
	if diff := cmp.Diff([]string{"member-3", "member-1"}, got); diff != "" {
		t.Errorf("pod events served (-want +got):\n%s", diff)
	}
}
