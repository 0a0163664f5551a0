package reconcilers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func TestTransitionEvents(t *testing.T) {
	status := func(conds ...metav1.Condition) *agentsv1beta1.SandboxStatus {
		return &agentsv1beta1.SandboxStatus{Conditions: conds}
	}
	ready := condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
	notReady := condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodRunningNotReady)
	suspended := condition(agentsv1beta1.ConditionSuspended, metav1.ConditionTrue, agentsv1beta1.ReasonPodTerminated, messagePodTerminated)
	terminating := condition(agentsv1beta1.ConditionSuspended, metav1.ConditionFalse, agentsv1beta1.ReasonPodTerminating, messagePodTerminating)
	suspending := condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspending)
	suspendedReady := condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspended)
	succeeded := condition(agentsv1beta1.ConditionFinished, metav1.ConditionTrue, agentsv1beta1.ReasonPodSucceeded, agentsv1beta1.MessagePodSucceeded)
	failed := condition(agentsv1beta1.ConditionFinished, metav1.ConditionTrue, agentsv1beta1.ReasonPodFailed, agentsv1beta1.MessagePodFailed)
	cases := map[string]struct {
		old, cur *agentsv1beta1.SandboxStatus
		want     []lifecycleEvent
	}{
		"no status yet, pod not ready": {status(), status(notSuspended, notReady), nil},
		"Ready becomes True": {status(notSuspended, notReady), status(notSuspended, ready),
			[]lifecycleEvent{{corev1.EventTypeNormal, "SandboxReady", "Ready", "Sandbox is ready: pod sb is Ready"}}},
		"Ready stays True (a pod status step after Ready)": {status(notSuspended, ready), status(notSuspended, podScheduled, ready), nil},
		"Ready goes False": {status(notSuspended, ready), status(notSuspended, notReady), nil},
		"the suspension starts": {status(notSuspended, ready), status(terminating, suspending),
			[]lifecycleEvent{{corev1.EventTypeNormal, "SandboxSuspended", "Suspend", "Sandbox suspended by its operatingMode: pod sb is deleted"}}},
		"the pod is gone": {status(terminating, suspending), status(suspended, suspendedReady), nil},
		"created suspended": {status(), status(suspended, suspendedReady),
			[]lifecycleEvent{{corev1.EventTypeNormal, "SandboxSuspended", "Suspend", "Sandbox suspended by its operatingMode: pod sb is deleted"}}},
		"still suspended": {status(suspended, suspendedReady), status(suspended, suspendedReady), nil},
		"the pod succeeded": {status(notSuspended, ready), status(notSuspended, notReady, succeeded),
			[]lifecycleEvent{{corev1.EventTypeNormal, "PodSucceeded", "PodExit", "Pod sb completed successfully"}}},
		"the pod failed": {status(notSuspended, ready), status(notSuspended, notReady, failed),
			[]lifecycleEvent{{corev1.EventTypeWarning, "PodFailed", "PodExit", "Pod sb failed"}}},
		"still finished": {status(notSuspended, notReady, failed), status(notSuspended, notReady, failed), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, transitionEvents(tc.old, tc.cur, "sb"), cmp.AllowUnexported(lifecycleEvent{})); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSandboxLifecycleEventsOncePerTransition walks a Sandbox through create → Ready →
// suspend → resume with a pod that starts in kubelet-like steps (scheduled, running, IP,
// Ready: one status update each, a reconcile after each, and a spare reconcile after every
// step): the public lifecycle events are sent once per transition, each after the write it
// reports. With the recorder of --disable-sandbox-events, none is sent.
func TestSandboxLifecycleEventsOncePerTransition(t *testing.T) {
	for name, disabled := range map[string]bool{"events on": false, "--disable-sandbox-events": true} {
		t.Run(name, func(t *testing.T) {
			sb := builders.MakeSandbox("sb", "ns").Image("img").UID("sb-uid").Obj()
			a := newFakeAPI(t, sb)
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
			if disabled {
				r.Recorder = noEvents{}
			}
			ctx := context.Background()
			// The watch: the pod's create and delete events reach the controller, as its
			// informer delivers them (they settle the expectations of its own writes).
			h := &podEventHandler{expected: r.expected, pods: r.pods, metrics: r.Metrics}
			var seen *corev1.Pod
			watch := func() {
				pod := &corev1.Pod{}
				err := a.Get(ctx, sandboxKey, pod)
				switch {
				case err == nil && (seen == nil || seen.UID != pod.UID):
					h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: pod}, newPodQueue())
					seen = pod
				case err != nil && seen != nil:
					h.Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: seen}, newPodQueue())
					seen = nil
				}
			}
			var got []string
			step := func() {
				t.Helper()
				for range 2 {
					reconcileSandbox(t, r)
					got = append(got, eventsOf(a.Journal())...)
					watch()
				}
			}
			podStep := func(mutate func(*corev1.Pod)) {
				t.Helper()
				pod := &corev1.Pod{}
				if err := a.Get(ctx, sandboxKey, pod); err != nil {
					t.Fatal(err)
				}
				mutate(pod)
				if err := a.Status().Update(ctx, pod); err != nil {
					t.Fatal(err)
				}
				step()
			}
			setMode := func(mode agentsv1beta1.OperatingMode) {
				t.Helper()
				cur := getSandbox(t, a)
				cur.Spec.OperatingMode = mode
				if err := a.Update(ctx, cur); err != nil {
					t.Fatal(err)
				}
				step()
			}
			start := func() {
				t.Helper()
				step() // the pod is created
				podStep(func(p *corev1.Pod) {
					p.Spec.NodeName = "node-1"
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
				})
				podStep(func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
				})
				podStep(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.5"}} })
				podStep(func(p *corev1.Pod) {
					p.Status.Conditions = append(p.Status.Conditions,
						corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
						corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
				})
			}

			start()
			setMode(agentsv1beta1.OperatingModeSuspended) // deletes the pod, which the fake removes at once
			step()
			setMode(agentsv1beta1.OperatingModeRunning)
			// The pod of setMode's reconcile is created; start's first step finds it there.
			start()

			var want []string
			if !disabled {
				want = []string{
					"event Normal SandboxPodCreated Sandbox/sb",
					"event Normal SandboxReady Sandbox/sb",
					"event Normal SandboxSuspended Sandbox/sb",
					"event Normal SandboxPodCreated Sandbox/sb",
					"event Normal SandboxReady Sandbox/sb",
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusSelectorIsThePublicOne: status.selector is the name hash alone, as the public API
// and its clients have it, from the Sandbox's first pod on; a Sandbox an older sandgate wrote
// with its UID in the selector is given the public value. What selects the pod for traffic is
// the Service's selector, which adds the UID.
func TestStatusSelectorIsThePublicOne(t *testing.T) {
	public := agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash("sb")
	r := &sandboxReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}

	sb := testSandbox()
	r.setStatus(sb, sandboxPod(sb, true), nil, false)
	if sb.Status.Selector != public {
		t.Errorf("with its pod: selector %q, want %q", sb.Status.Selector, public)
	}

	sb = testSandbox(func(w *builders.SandboxWrapper) { w.OperatingMode(agentsv1beta1.OperatingModeSuspended) })
	r.setStatus(sb, nil, nil, false)
	if sb.Status.Selector != "" {
		t.Errorf("never had a pod: selector %q, want none", sb.Status.Selector)
	}
	sb.Status.Selector = public + "," + agentsv1beta1.LabelSandboxUID + "=sb-uid"
	r.setStatus(sb, nil, nil, false)
	if sb.Status.Selector != public {
		t.Errorf("written by an older sandgate: selector %q, want %q", sb.Status.Selector, public)
	}

	want := map[string]string{agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"), agentsv1beta1.LabelSandboxUID: "sb-uid"}
	if diff := cmp.Diff(want, desiredService(sb).Spec.Selector); diff != "" {
		t.Errorf("Service selector (-want +got):\n%s", diff)
	}
}

// TestUnknownPodState: the public controller's conditions when the pod's state is not known:
// its own pod has no PodScheduled condition yet, or the pod could not be looked up.
func TestUnknownPodState(t *testing.T) {
	r := &sandboxReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}
	conds := func(sb *agentsv1beta1.Sandbox) map[string][3]string {
		got := map[string][3]string{}
		for _, c := range sb.Status.Conditions {
			got[c.Type] = [3]string{string(c.Status), c.Reason, c.Message}
		}
		return got
	}

	sb := testSandbox()
	pod := sandboxPod(sb, false)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending}
	r.setStatus(sb, pod, nil, false)
	want := map[string][3]string{
		agentsv1beta1.ConditionSuspended:    {"False", agentsv1beta1.ReasonNotSuspended, "Sandbox is not suspended"},
		agentsv1beta1.ConditionPodScheduled: {"Unknown", "PodSchedulingUnknown", "Pod has not reported a PodScheduled condition yet"},
		agentsv1beta1.ConditionReady:        {"False", agentsv1beta1.ReasonDependenciesNotReady, "Pod exists with phase: Pending"},
	}
	if diff := cmp.Diff(want, conds(sb)); diff != "" {
		t.Errorf("a pod not scheduled yet: conditions (-want +got):\n%s", diff)
	}

	sb = testSandbox(func(w *builders.SandboxWrapper) { w.OperatingMode(agentsv1beta1.OperatingModeSuspended) })
	r.setStatus(sb, nil, nil, true)
	want = map[string][3]string{
		agentsv1beta1.ConditionSuspended:    {"Unknown", agentsv1beta1.ReasonPodStateUnknown, "Pod state is unknown. Sandbox suspension cannot be confirmed"},
		agentsv1beta1.ConditionPodScheduled: {"Unknown", "PodSchedulingUnknown", "Pod state is unknown. Pod scheduling cannot be determined"},
		agentsv1beta1.ConditionReady:        {"False", agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspended"},
	}
	if diff := cmp.Diff(want, conds(sb)); diff != "" {
		t.Errorf("the pod could not be looked up: conditions (-want +got):\n%s", diff)
	}
}
