package reconcilers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The Reconcile tests of a lost pod (sandbox_podloss.go) run on the fake API server of
// fakeclient_test.go: a Sandbox reported Ready on its pod "pod-uid", whose pod goes.

// reportedReady is testSandbox as the controller leaves it once its pod (sandboxPod) is Ready.
func reportedReady(mutate ...func(*builders.SandboxWrapper)) *agentsv1beta1.Sandbox {
	sb := testSandbox(mutate...)
	sb.Status = agentsv1beta1.SandboxStatus{
		Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
		Conditions: []metav1.Condition{
			notSuspended, podScheduled,
			condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
		},
	}
	return sb
}

func getSandbox(t *testing.T, a *fakeAPI) *agentsv1beta1.Sandbox {
	t.Helper()
	sb := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), sandboxKey, sb); err != nil {
		t.Fatal(err)
	}
	return sb
}

func readyOf(t *testing.T, a *fakeAPI) metav1.Condition {
	t.Helper()
	sb := getSandbox(t, a)
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if c == nil {
		t.Fatalf("no Ready condition: %+v", sb.Status.Conditions)
	}
	return *c
}

// wantReady compares status, reason and message of the Sandbox's Ready condition.
func wantReady(t *testing.T, a *fakeAPI, status metav1.ConditionStatus, reason, msg string) {
	t.Helper()
	c := readyOf(t, a)
	if diff := cmp.Diff([3]string{string(status), reason, msg}, [3]string{string(c.Status), c.Reason, c.Message}); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
}

// makeReady makes the pod of the Sandbox's name Running and Ready, as the kubelet does.
func makeReady(t *testing.T, a *fakeAPI) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := a.Get(context.Background(), sandboxKey, pod); err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName = "node-2"
	if err := a.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIPs: []corev1.PodIP{{IP: "10.0.0.6"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
	}
	if err := a.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	return pod
}

func deletePod(t *testing.T, a *fakeAPI) {
	t.Helper()
	if err := a.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}); err != nil {
		t.Fatal(err)
	}
	a.Journal()
}

func evictedByAPI(pod *corev1.Pod) {
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: disruptionByEvictionAPI, Message: "Eviction API: evicting",
	})
}

// lostPod is a Sandbox reported Ready, seen so by its controller, whose pod was then deleted,
// with the loss reconciled (written, no replacement yet).
func lostPod(t *testing.T) (*fakeAPI, *sandboxReconciler) {
	t.Helper()
	sb := reportedReady()
	a := newFakeAPI(t, sb, sandboxPod(sb, true))
	r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
	reconcileSandbox(t, r)
	deletePod(t, a)
	reconcileSandbox(t, r) // the loss
	return a, r
}

func newPodQueue() queue {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
}

// TestLostPodIsWrittenBeforeItsReplacement: a Sandbox reported Ready whose pod is deleted or
// evicted says so in a status write of its own, Ready=False PodLost naming the pod, its UID
// and how it went, before the replacement is created; the replacement is created by the next
// reconcile; the status stays PodLost until the replacement is Ready, then Ready=True, and the
// Warning event naming the lost pod and its replacement follows that status write, once.
func TestLostPodIsWrittenBeforeItsReplacement(t *testing.T) {
	tests := map[string]struct {
		// seen: this process reported the pod Ready (it knows its UID); otherwise the
		// controller starts after the pod went, and knows it only from the status.
		seen bool
		// goes takes the pod away; h is the Sandbox's pod watch.
		goes      func(t *testing.T, a *fakeAPI, h *podEventHandler)
		wantLost  string
		wantEvent string
	}{
		"deleted, while this process runs": {
			seen:      true,
			goes:      func(t *testing.T, a *fakeAPI, _ *podEventHandler) { deletePod(t, a) },
			wantLost:  "Pod sb (uid pod-uid) was deleted; creating its replacement",
			wantEvent: "Pod sb (uid pod-uid) was deleted; replaced by pod sb (uid uid-1); its processes and memory are gone",
		},
		"deleted while the operator was down (or its cache never saw it): the status said Ready": {
			goes:      func(t *testing.T, a *fakeAPI, _ *podEventHandler) { deletePod(t, a) },
			wantLost:  "Pod sb (uid unknown) was deleted; creating its replacement",
			wantEvent: "Pod sb (uid unknown) was deleted; replaced by pod sb (uid uid-1); its processes and memory are gone",
		},
		"evicted through the Eviction API: the watch's last sight of the pod says so": {
			seen: true,
			goes: func(t *testing.T, a *fakeAPI, h *podEventHandler) {
				pod := &corev1.Pod{}
				if err := a.Get(context.Background(), sandboxKey, pod); err != nil {
					t.Fatal(err)
				}
				evictedByAPI(pod)
				deletePod(t, a)
				h.Delete(context.Background(), event.TypedDeleteEvent[client.Object]{Object: pod}, newPodQueue())
			},
			wantLost:  "Pod sb (uid pod-uid) was evicted (Eviction API: evicting); creating its replacement",
			wantEvent: "Pod sb (uid pod-uid) was evicted (Eviction API: evicting); replaced by pod sb (uid uid-1); its processes and memory are gone",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sb := reportedReady()
			a := newFakeAPI(t, sb, sandboxPod(sb, true))
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
			h := &podEventHandler{expected: r.expected, pods: r.pods, metrics: r.Metrics}
			if tc.seen {
				reconcileSandbox(t, r)
				if w := a.Journal(); len(w) != 0 {
					t.Fatalf("the Ready Sandbox wrote %v", w)
				}
			}

			tc.goes(t, a, h)
			res := reconcileSandbox(t, r)
			if diff := cmp.Diff([]string{"patch Sandbox/sb/status"}, a.Journal()); diff != "" {
				t.Errorf("the reconcile that sees the loss: writes and events (-want +got):\n%s", diff)
			}
			if res.RequeueAfter != lossRecordedRequeue {
				t.Errorf("requeue after %s, want %s: the replacement comes next", res.RequeueAfter, lossRecordedRequeue)
			}
			wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, tc.wantLost)
			if got := getSandbox(t, a); len(got.Status.PodIPs) != 0 || got.Status.NodeName != "" {
				t.Errorf("the lost pod's IPs and node still reported: %v %q", got.Status.PodIPs, got.Status.NodeName)
			}

			reconcileSandbox(t, r)
			if diff := cmp.Diff([]string{"create Pod/sb", "event Normal SandboxPodCreated Sandbox/sb"}, a.Journal()); diff != "" {
				t.Errorf("the next reconcile: writes and events (-want +got):\n%s", diff)
			}
			wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, tc.wantLost)

			makeReady(t, a)
			reconcileSandbox(t, r)
			if diff := cmp.Diff([]string{"patch Sandbox/sb/status", "event Warning PodLost Sandbox/sb", "event Normal SandboxReady Sandbox/sb"}, a.Journal()); diff != "" {
				t.Errorf("the replacement Ready: writes and events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"Created pod sb", tc.wantEvent, "Sandbox is ready: pod sb is Ready"}, a.Notes()); diff != "" {
				t.Errorf("event notes (-want +got):\n%s", diff)
			}
			wantReady(t, a, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)

			reconcileSandbox(t, r)
			if w := a.Journal(); len(w) != 0 {
				t.Errorf("after the replacement: wrote %v, want nothing", w)
			}
		})
	}
}

// TestSlowReplacementIsNamedWhileNotReady: a replacement that takes its time is named in the
// PodLost message with its own progress, and the event naming both pods follows the status
// write that names it; Ready=True later sends no second event.
func TestSlowReplacementIsNamedWhileNotReady(t *testing.T) {
	a, r := lostPod(t)
	reconcileSandbox(t, r) // the replacement
	a.Journal()
	a.Notes()

	reconcileSandbox(t, r) // the replacement's progress delay passed; it is still pending
	if diff := cmp.Diff([]string{"patch Sandbox/sb/status", "event Warning PodLost Sandbox/sb"}, a.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost,
		"Pod sb (uid pod-uid) was deleted; replaced by pod sb (uid uid-1); Pod exists with phase: ")
	a.Notes()

	makeReady(t, a)
	reconcileSandbox(t, r)
	if diff := cmp.Diff([]string{"patch Sandbox/sb/status", "event Normal SandboxReady Sandbox/sb"}, a.Journal()); diff != "" {
		t.Errorf("the replacement Ready: writes and events (-want +got):\n%s", diff)
	}
	wantReady(t, a, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
}

// TestPodOfAnotherUID: a pod of the Sandbox's name that is not the one it reported Ready
// (the watch missed the deletion: a relist shows the new pod as an update of the old) is a
// loss too, known by UID while the process runs and by the reported IPs and node after a
// restart. The replacement exists already, so the status write that reports the loss names it
// and the event follows it; the Ready=True that follows sends no second one.
func TestPodOfAnotherUID(t *testing.T) {
	tests := map[string]struct {
		seen        bool
		replacement func(*corev1.Pod)
		wantLost    string
	}{
		"known by UID: a Ready pod the Sandbox never reported": {
			seen:        true,
			replacement: func(*corev1.Pod) {},
			wantLost:    "Pod sb (uid pod-uid) was deleted; replaced by pod sb (uid pod-2); Pod is Ready",
		},
		"after a restart: a pending pod where the status reported a running one": {
			replacement: func(p *corev1.Pod) {
				p.Spec.NodeName = ""
				p.Status = corev1.PodStatus{Phase: corev1.PodPending}
			},
			wantLost: "Pod sb (uid unknown) was deleted; replaced by pod sb (uid pod-2); Pod exists with phase: Pending",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sb := reportedReady()
			a := newFakeAPI(t, sb, sandboxPod(sb, true))
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
			if tc.seen {
				reconcileSandbox(t, r)
			}
			deletePod(t, a)
			other := sandboxPod(sb, true)
			other.UID = "pod-2"
			tc.replacement(other)
			if err := a.Create(context.Background(), other); err != nil {
				t.Fatal(err)
			}
			a.Journal()

			if res := reconcileSandbox(t, r); res.RequeueAfter != lossRecordedRequeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, lossRecordedRequeue)
			}
			if diff := cmp.Diff([]string{"patch Sandbox/sb/status", "event Warning PodLost Sandbox/sb"}, a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, tc.wantLost)

			makeReady(t, a)
			reconcileSandbox(t, r)
			if diff := cmp.Diff([]string{"patch Sandbox/sb/status", "event Normal SandboxReady Sandbox/sb"}, a.Journal()); diff != "" {
				t.Errorf("Ready again: writes and events (-want +got):\n%s", diff)
			}
			wantReady(t, a, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
		})
	}
}

// TestEvictedPodIsReplaced: a pod the kubelet evicted (phase Failed, reason Evicted) is a
// loss, not the end of the Sandbox: Ready=False PodLost rather than the contract's PodFailed,
// no Finished condition (which would start a bound claim's ttlSecondsAfterFinished), then the
// evicted pod is deleted and replaced. A pod the API server is evicting is waited for.
func TestEvictedPodIsReplaced(t *testing.T) {
	t.Run("evicted by the kubelet", func(t *testing.T) {
		sb := reportedReady()
		pod := sandboxPod(sb, false)
		pod.Status.Phase, pod.Status.Reason, pod.Status.Message = corev1.PodFailed, podReasonEvicted, "The node was low on resource: memory. "
		a := newFakeAPI(t, sb, pod)
		r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))

		reconcileSandbox(t, r)
		if diff := cmp.Diff([]string{"patch Sandbox/sb/status"}, a.Journal()); diff != "" {
			t.Errorf("writes and events (-want +got):\n%s", diff)
		}
		wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost,
			"Pod sb (uid pod-uid) was evicted by its node (The node was low on resource: memory.); deleting it")
		if c := meta.FindStatusCondition(getSandbox(t, a).Status.Conditions, agentsv1beta1.ConditionFinished); c != nil {
			t.Errorf("Finished %+v for an evicted pod", c)
		}
		reconcileSandbox(t, r)
		if diff := cmp.Diff([]string{"delete Pod/sb"}, a.Journal()); diff != "" {
			t.Errorf("after the loss is written: writes and events (-want +got):\n%s", diff)
		}
		reconcileSandbox(t, r)
		if diff := cmp.Diff([]string{"create Pod/sb", "event Normal SandboxPodCreated Sandbox/sb"}, a.Journal()); diff != "" {
			t.Errorf("once it is gone: writes and events (-want +got):\n%s", diff)
		}
	})
	t.Run("being evicted through the API", func(t *testing.T) {
		sb := reportedReady()
		pod := sandboxPod(sb, true)
		evictedByAPI(pod)
		pod.Finalizers = []string{"test/hold"}
		pod.DeletionTimestamp = &metav1.Time{Time: planNow}
		a := newFakeAPI(t, sb, pod)
		r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
		reconcileSandbox(t, r)
		if diff := cmp.Diff([]string{"patch Sandbox/sb/status"}, a.Journal()); diff != "" {
			t.Errorf("writes and events (-want +got):\n%s", diff)
		}
		wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost,
			"Pod sb (uid pod-uid) was evicted (Eviction API: evicting); waiting for it to terminate")
		reconcileSandbox(t, r)
		if w := a.Journal(); len(w) != 0 {
			t.Errorf("while it terminates: wrote %v, want nothing", w)
		}
	})
}

// TestLossWithAFailingReplacement: an error building the replacement is told in the PodLost
// message, which stays the record: the retry builds it and the event still names both pods.
func TestLossWithAFailingReplacement(t *testing.T) {
	a, r := lostPod(t)
	a.Journal()

	a.FailOnce("create Pod/sb", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "sb", errors.New("exceeded quota")))
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: sandboxKey}); err == nil {
		t.Fatal("Reconcile: no error for a failed create")
	}
	if diff := cmp.Diff([]string{"create Pod/sb (forbidden)", "patch Sandbox/sb/status", "event Warning SandboxPodCreateFailed Sandbox/sb"}, a.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost,
		`Pod sb (uid pod-uid) was deleted; creating pod: pods "sb" is forbidden: exceeded quota`)

	reconcileSandbox(t, r)
	makeReady(t, a)
	reconcileSandbox(t, r)
	// The refused create took uid-1.
	if diff := cmp.Diff([]string{
		`Failed to create pod sb: pods "sb" is forbidden: exceeded quota`,
		"Created pod sb",
		"Pod sb (uid pod-uid) was deleted; replaced by pod sb (uid uid-2); its processes and memory are gone",
		"Sandbox is ready: pod sb is Ready",
	}, a.Notes()); diff != "" {
		t.Errorf("event notes (-want +got):\n%s", diff)
	}
	wantReady(t, a, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
}

// TestNotALoss: a pod that goes because the Sandbox is suspended, shut down or deleted, that
// the controller deleted itself, that had finished, or that was never reported Ready, is no
// loss: no PodLost, no PodLost event.
func TestNotALoss(t *testing.T) {
	suspend := func(w *builders.SandboxWrapper) { w.OperatingMode(agentsv1beta1.OperatingModeSuspended) }
	tests := map[string]struct {
		sandbox *agentsv1beta1.Sandbox
		pod     func(*agentsv1beta1.Sandbox) *corev1.Pod
		// then changes the world after a first reconcile; the second is checked.
		then       func(t *testing.T, a *fakeAPI, r *sandboxReconciler)
		wantWrites []string
		wantReason string
	}{
		"suspended: the controller deletes the pod": {
			sandbox:    reportedReady(suspend),
			pod:        func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, true) },
			then:       func(*testing.T, *fakeAPI, *sandboxReconciler) {},
			wantWrites: []string{"patch Sandbox/sb/status"}, // Suspended=True: the pod is gone
			wantReason: agentsv1beta1.ReasonSandboxSuspended,
		},
		"suspended, then resumed before the status said so: the controller's own deletion": {
			sandbox: reportedReady(),
			pod:     func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, true) },
			then: func(t *testing.T, a *fakeAPI, r *sandboxReconciler) {
				sb := getSandbox(t, a)
				sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended
				if err := a.Update(context.Background(), sb); err != nil {
					t.Fatal(err)
				}
				a.FailOnce("patch Sandbox/sb/status", apierrors.NewServiceUnavailable("etcd is slow"))
				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: sandboxKey}); err == nil {
					t.Fatal("Reconcile: the status write did not fail")
				}
				sb = getSandbox(t, a)
				sb.Spec.OperatingMode = agentsv1beta1.OperatingModeRunning
				if err := a.Update(context.Background(), sb); err != nil {
					t.Fatal(err)
				}
				if ready := readyOf(t, a); ready.Status != metav1.ConditionTrue {
					t.Fatalf("the status moved on: %+v", ready)
				}
			},
			wantWrites: []string{"create Pod/sb", "event Normal SandboxPodCreated Sandbox/sb"},
			wantReason: agentsv1beta1.ReasonDependenciesReady, // as the status last said
		},
		"shut down at its shutdownTime": {
			sandbox: reportedReady(func(w *builders.SandboxWrapper) {
				w.ShutdownTime(planNow.Add(time.Second)).ShutdownPolicy(agentsv1beta1.ShutdownPolicyRetain)
			}),
			pod:        func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, true) },
			then:       func(*testing.T, *fakeAPI, *sandboxReconciler) {},
			wantWrites: []string{"delete Pod/sb", "patch Sandbox/sb/status", "event Normal SandboxExpired Sandbox/sb"},
			wantReason: agentsv1beta1.ReasonSandboxExpired,
		},
		"a pod that failed on its own: PodFailed, Finished, not replaced": {
			sandbox: reportedReady(),
			pod: func(sb *agentsv1beta1.Sandbox) *corev1.Pod {
				pod := sandboxPod(sb, false)
				pod.Status.Phase, pod.Status.Reason = corev1.PodFailed, "Error"
				return pod
			},
			then:       func(*testing.T, *fakeAPI, *sandboxReconciler) {},
			wantReason: agentsv1beta1.ReasonPodFailed,
		},
		"a pod never reported Ready is deleted: it is rebuilt": {
			sandbox: testSandbox(),
			pod:     func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, false) },
			then: func(t *testing.T, a *fakeAPI, _ *sandboxReconciler) {
				deletePod(t, a)
			},
			wantWrites: []string{"create Pod/sb", "event Normal SandboxPodCreated Sandbox/sb"},
			wantReason: agentsv1beta1.ReasonDependenciesNotReady,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newFakeAPI(t, tc.sandbox, tc.pod(tc.sandbox))
			clk := clocktesting.NewFakeClock(planNow)
			r := newSandboxReconciler(t, a, clk)
			reconcileSandbox(t, r)
			clk.Step(time.Second)
			tc.then(t, a, r)
			a.Journal()
			reconcileSandbox(t, r)
			journal := a.Journal()
			if diff := cmp.Diff(tc.wantWrites, journal); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			if got := readyOf(t, a); got.Reason != tc.wantReason {
				t.Errorf("Ready %s %s %q, want reason %s", got.Status, got.Reason, got.Message, tc.wantReason)
			}
		})
	}

	t.Run("the Sandbox is being deleted", func(t *testing.T) {
		sb := reportedReady()
		sb.Finalizers = []string{"test/hold"}
		sb.DeletionTimestamp = &metav1.Time{Time: planNow}
		a := newFakeAPI(t, sb)
		r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
		reconcileSandbox(t, r)
		if w := a.Journal(); len(w) != 0 {
			t.Errorf("wrote %v, want nothing", w)
		}
	})
}

func TestPodLossMessageRoundTrip(t *testing.T) {
	tests := map[string]podLoss{
		"known":            {pod: "sb", uid: "u1", how: "deleted"},
		"unknown UID":      {pod: "sb", how: "evicted (Eviction API: evicting)"},
		"with replacement": {pod: "sb", uid: "u1", how: "preempted", replacement: "sb-x", replacementUID: "u2"},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			c := &metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: agentsv1beta1.ReasonPodLost, Message: want.message("creating pod: it failed; twice")}
			got := recordedLoss(c)
			if got == nil {
				t.Fatalf("%q not parsed", c.Message)
			}
			if diff := cmp.Diff(want, *got, cmp.AllowUnexported(podLoss{})); diff != "" {
				t.Errorf("parsed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFate(t *testing.T) {
	disruption := func(reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}
		}
	}
	failed := func(reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, reason, msg }
	}
	tests := map[string]struct {
		mutate        []func(*corev1.Pod)
		want          string
		wantDisrupted bool
	}{
		"deleted":         {want: "deleted"},
		"eviction API":    {mutate: []func(*corev1.Pod){disruption(disruptionByEvictionAPI, "Eviction API: evicting")}, want: "evicted (Eviction API: evicting)"},
		"preempted":       {mutate: []func(*corev1.Pod){disruption(corev1.PodReasonPreemptionByScheduler, "")}, want: "preempted"},
		"kubelet evicted": {mutate: []func(*corev1.Pod){failed(podReasonEvicted, "low on memory; really")}, want: "evicted by its node (low on memory, really)", wantDisrupted: true},
		"node shutdown": {
			mutate:        []func(*corev1.Pod){disruption(corev1.PodReasonTerminationByKubelet, "node shutdown"), failed("Terminated", "")},
			want:          "terminated by its node (node shutdown)",
			wantDisrupted: true,
		},
		"failed on its own": {mutate: []func(*corev1.Pod){failed("Error", "exit 1")}, want: "failed (exit 1)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			for _, m := range tc.mutate {
				m(p)
			}
			if got := fate(p); got != tc.want {
				t.Errorf("fate = %q, want %q", got, tc.want)
			}
			if got := disrupted(p); got != tc.wantDisrupted {
				t.Errorf("disrupted = %v, want %v", got, tc.wantDisrupted)
			}
		})
	}
}
