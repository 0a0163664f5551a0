package reconcilers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The Reconcile tests of this file run the Sandbox controller on a fake API server with the
// production indexes (fakeclient_test.go), as the sandbox integration suite runs it on a real
// control plane.

var sandboxKey = types.NamespacedName{Namespace: "ns", Name: "sb"}

// sandbox is Sandbox "sb" with one container: the smallest a table needs.
func sandbox(mutate ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	sb := builders.MakeSandbox("sb", "ns").Image("img").UID("uid-1").Obj()
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

// testSandbox is Sandbox "sb" with pod metadata to propagate, a label its pod carries and
// its pod's name recorded, as the operator creates Sandboxes.
func testSandbox(mutate ...func(*builders.SandboxWrapper)) *agentsv1beta1.Sandbox {
	w := builders.MakeSandbox("sb", "ns").PodLabel("app", "agent").PodAnnotation("note", "x").
		Label(agentsv1beta1.LabelClaimUID, "c1").Label("team", "not-on-the-pod").
		Annotation(agentsv1beta1.AnnotationPodName, "sb").UID("sb-uid")
	for _, m := range mutate {
		m(w)
	}
	return w.Obj()
}

func sandboxOwner(sb *agentsv1beta1.Sandbox) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind(sandboxKind))}
}

// sandboxPod is the pod sb created earlier, scheduled and running; ready says whether it
// passes its readiness probe.
func sandboxPod(sb *agentsv1beta1.Sandbox, ready bool) *corev1.Pod {
	pod := desiredPod(sb, nil)
	pod.UID = "pod-uid"
	pod.OwnerReferences = sandboxOwner(sb)
	pod.Spec.NodeName = "node-1"
	readyStatus := corev1.ConditionFalse
	if ready {
		readyStatus = corev1.ConditionTrue
	}
	pod.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: readyStatus},
		},
	}
	return pod
}

func sandboxService(sb *agentsv1beta1.Sandbox) *corev1.Service {
	svc := desiredService(sb)
	svc.UID = "svc-uid"
	svc.OwnerReferences = sandboxOwner(sb)
	return svc
}

func condition(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(planNow)}
}

var (
	// sandboxSelector is the public status.selector: the name hash alone (the Service adds the
	// UID: TestDesiredServiceSelectsByUID).
	sandboxSelector = agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash("sb")
	notSuspended    = condition(agentsv1beta1.ConditionSuspended, metav1.ConditionFalse, agentsv1beta1.ReasonNotSuspended, messageNotSuspended)
	podScheduled    = condition(agentsv1beta1.ConditionPodScheduled, metav1.ConditionTrue, string(corev1.PodScheduled), "")
	sortConditions  = cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })
)

// withoutPodName is a Sandbox as a user creates it: its pod's name not recorded yet.
func withoutPodName(w *builders.SandboxWrapper) {
	delete(w.Annotations, agentsv1beta1.AnnotationPodName)
}

func reconcileSandbox(t *testing.T, r *sandboxReconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: sandboxKey})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// TestSandboxReconcile: the pod is created from the podTemplate with the labels a pod carries,
// the Sandbox's Ready mirrors the pod's, suspension deletes the pod; each in one reconcile,
// whose writes and public lifecycle events are exactly the ones listed, and a second
// reconcile writes (and reports) nothing.
func TestSandboxReconcile(t *testing.T) {
	suspended := func(w *builders.SandboxWrapper) { w.OperatingMode(agentsv1beta1.OperatingModeSuspended) }
	tests := map[string]struct {
		sandbox *agentsv1beta1.Sandbox
		pod     func(*agentsv1beta1.Sandbox) *corev1.Pod
		// wantPod is the pod's labels and annotations afterwards; nil when it must be gone.
		wantPod     *metav1.ObjectMeta
		wantResult  ctrl.Result
		wantJournal []string
		wantEvents  []string
		wantStatus  agentsv1beta1.SandboxStatus
		// wantNext are the writes of a second reconcile: none unless the first changed the
		// world the status reports.
		wantNext []string
	}{
		"a new Sandbox: its pod is created from the podTemplate and its name recorded; the status waits for the pod to move": {
			sandbox: testSandbox(withoutPodName),
			wantPod: &metav1.ObjectMeta{
				Labels: map[string]string{
					"app":                              "agent",
					agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
					agentsv1beta1.LabelSandboxUID:      "sb-uid",
					agentsv1beta1.LabelClaimUID:        "c1",
				},
				Annotations: map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`},
			},
			wantResult:  ctrl.Result{RequeueAfter: DefaultPodProgressDelay},
			wantJournal: []string{"create Pod/sb", "patch Sandbox/sb"},
			wantEvents:  []string{"event Normal SandboxPodCreated Sandbox/sb"},
		},
		"a ready pod: Ready=True with its IPs and node": {
			sandbox: testSandbox(),
			pod:     func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, true) },
			wantPod: &metav1.ObjectMeta{
				Labels: map[string]string{
					"app":                              "agent",
					agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
					agentsv1beta1.LabelSandboxUID:      "sb-uid",
					agentsv1beta1.LabelClaimUID:        "c1",
				},
				Annotations: map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`},
			},
			wantJournal: []string{"patch Sandbox/sb/status"},
			wantEvents:  []string{"event Normal SandboxReady Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{
				Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
				Conditions: []metav1.Condition{
					notSuspended, podScheduled,
					condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
				},
			},
		},
		"a running pod not ready: Ready=False": {
			sandbox: testSandbox(),
			pod:     func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, false) },
			wantPod: &metav1.ObjectMeta{
				Labels: map[string]string{
					"app":                              "agent",
					agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
					agentsv1beta1.LabelSandboxUID:      "sb-uid",
					agentsv1beta1.LabelClaimUID:        "c1",
				},
				Annotations: map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`},
			},
			wantJournal: []string{"patch Sandbox/sb/status"},
			wantStatus: agentsv1beta1.SandboxStatus{
				Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
				Conditions: []metav1.Condition{
					notSuspended, podScheduled,
					condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodRunningNotReady),
				},
			},
		},
		"the pod's metadata follows the Sandbox: a bound Sandbox's pod leaves the pool": {
			sandbox: testSandbox(func(w *builders.SandboxWrapper) { w.Label(agentsv1beta1.LabelClaimUID, "c2") }),
			pod: func(sb *agentsv1beta1.Sandbox) *corev1.Pod {
				pod := sandboxPod(sb, true)
				pod.Labels[agentsv1beta1.LabelClaimUID] = "c1"
				pod.Labels[agentsv1beta1.LabelWarmPoolSandbox] = "pool-hash"
				pod.Labels["set-by-someone"] = "kept"
				return pod
			},
			wantPod: &metav1.ObjectMeta{
				Labels: map[string]string{
					"app":                              "agent",
					agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
					agentsv1beta1.LabelSandboxUID:      "sb-uid",
					agentsv1beta1.LabelClaimUID:        "c2",
					"set-by-someone":                   "kept",
				},
				Annotations: map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`},
			},
			wantJournal: []string{"patch Pod/sb", "patch Sandbox/sb/status"},
			wantEvents:  []string{"event Normal SandboxReady Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{
				Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
				Conditions: []metav1.Condition{
					notSuspended, podScheduled,
					condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
				},
			},
		},
		// Shows a bug (issue 13 report): recordPodName patches sb in place, and the API server's
		// reply replaces the status reconcile has set so far (the selector).
		"a user's Sandbox adopts the pod made for it: the pod's name recorded, the status written once, with its selector": {
			sandbox: testSandbox(withoutPodName),
			pod: func(sb *agentsv1beta1.Sandbox) *corev1.Pod {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil // built for it (its UID stamp, its spec), then orphaned
				return pod
			},
			wantPod: &metav1.ObjectMeta{
				Labels: map[string]string{
					"app":                              "agent",
					agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
					agentsv1beta1.LabelSandboxUID:      "sb-uid",
					agentsv1beta1.LabelClaimUID:        "c1",
				},
				Annotations: map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`},
			},
			wantJournal: []string{"patch Pod/sb", "patch Sandbox/sb", "patch Sandbox/sb/status"},
			wantEvents:  []string{"event Normal SandboxReady Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{
				Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
				Conditions: []metav1.Condition{
					notSuspended, podScheduled,
					condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
				},
			},
		},
		"suspended with a running pod: the pod is deleted": {
			sandbox:     testSandbox(suspended),
			pod:         func(sb *agentsv1beta1.Sandbox) *corev1.Pod { return sandboxPod(sb, true) },
			wantJournal: []string{"delete Pod/sb", "patch Sandbox/sb/status"},
			wantEvents:  []string{"event Normal SandboxSuspended Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{
				// The pod terminates gracefully: until it is gone it keeps its IPs and node.
				Selector: sandboxSelector, PodIPs: []string{"10.0.0.5"}, NodeName: "node-1",
				Conditions: []metav1.Condition{
					condition(agentsv1beta1.ConditionSuspended, metav1.ConditionFalse, agentsv1beta1.ReasonPodTerminating, messagePodTerminating),
					podScheduled,
					condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspending),
				},
			},
			// The pod is gone: Suspended=True, the next case.
			wantNext: []string{"patch Sandbox/sb/status"},
		},
		"suspended and the pod gone: Suspended=True, no pod created": {
			sandbox:     testSandbox(suspended),
			wantJournal: []string{"patch Sandbox/sb/status"},
			wantEvents:  []string{"event Normal SandboxSuspended Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{
				// Never had a pod: no selector yet, as the public controller writes it.
				Conditions: []metav1.Condition{
					condition(agentsv1beta1.ConditionSuspended, metav1.ConditionTrue, agentsv1beta1.ReasonPodTerminated, messagePodTerminated),
					condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspended),
				},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.sandbox}
			if tc.pod != nil {
				objs = append(objs, tc.pod(tc.sandbox))
			}
			a := newFakeAPI(t, objs...)
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))

			if diff := cmp.Diff(tc.wantResult, reconcileSandbox(t, r)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			journal := a.Journal()
			if diff := cmp.Diff(tc.wantJournal, writesOf(journal)); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, eventsOf(journal)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			got := &agentsv1beta1.Sandbox{}
			if err := a.Get(context.Background(), sandboxKey, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantStatus, got.Status, sortConditions); diff != "" {
				t.Errorf("Sandbox status (-want +got):\n%s", diff)
			}

			pod := &corev1.Pod{}
			err := a.Get(context.Background(), sandboxKey, pod)
			if tc.wantPod == nil {
				if !apierrors.IsNotFound(err) {
					t.Errorf("the pod: %v, want it gone", err)
				}
			} else {
				if err != nil {
					t.Fatalf("the pod: %v", err)
				}
				// Which view of the Sandbox the metadata is from: podmetadata_test.go.
				delete(pod.Annotations, annotationPodMetadataFrom)
				if diff := cmp.Diff(*tc.wantPod, metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}); diff != "" {
					t.Errorf("pod metadata (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(sandboxOwner(got), pod.OwnerReferences); diff != "" {
					t.Errorf("pod owners (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(got.Spec.PodTemplate.Spec.Containers, pod.Spec.Containers); diff != "" {
					t.Errorf("pod containers are not the podTemplate's (-want +got):\n%s", diff)
				}
				if name := got.Annotations[agentsv1beta1.AnnotationPodName]; name != pod.Name {
					t.Errorf("the Sandbox's %s annotation is %q, want its pod's name %s", agentsv1beta1.AnnotationPodName, name, pod.Name)
				}
			}

			if tc.wantPod != nil && tc.pod == nil {
				return // the pod was just created: its events, not a second reconcile, come next
			}
			reconcileSandbox(t, r)
			if diff := cmp.Diff(tc.wantNext, a.Journal()); diff != "" {
				t.Errorf("a second reconcile wrote (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSandboxReconcileExpiry: a Sandbox is requeued for its shutdownTime; then its pod and
// Service are deleted, and the Sandbox too (Delete), or its status is cut down to Ready=False
// SandboxExpired with what it last said of its suspension and of how its pod ended (Retain).
func TestSandboxReconcileExpiry(t *testing.T) {
	expired := condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired, messageSandboxExpired)
	expired.LastTransitionTime = metav1.NewTime(planNow.Add(time.Hour))
	tests := map[string]struct {
		policy       agentsv1beta1.ShutdownPolicy
		podSucceeded bool
		wantBefore   []string
		wantWrites   []string
		wantEvents   []string
		wantDeleted  bool
		wantStatus   agentsv1beta1.SandboxStatus
	}{
		"Delete: pod, Service and Sandbox deleted": {
			policy:      agentsv1beta1.ShutdownPolicyDelete,
			wantBefore:  []string{"patch Sandbox/sb/status", "event Normal SandboxReady Sandbox/sb"},
			wantWrites:  []string{"delete Pod/sb", "delete Service/sb", "delete Sandbox/sb"},
			wantDeleted: true,
		},
		"Retain: pod and Service deleted, the Sandbox kept Ready=False SandboxExpired": {
			policy:     agentsv1beta1.ShutdownPolicyRetain,
			wantBefore: []string{"patch Sandbox/sb/status", "event Normal SandboxReady Sandbox/sb"},
			wantWrites: []string{"delete Pod/sb", "delete Service/sb", "patch Sandbox/sb/status"},
			wantEvents: []string{"event Normal SandboxExpired Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{notSuspended, expired}},
		},
		"Retain keeps how the pod ended": {
			policy:       agentsv1beta1.ShutdownPolicyRetain,
			podSucceeded: true,
			wantBefore:   []string{"patch Sandbox/sb/status", "event Normal PodSucceeded Sandbox/sb"},
			wantWrites:   []string{"delete Pod/sb", "delete Service/sb", "patch Sandbox/sb/status"},
			wantEvents:   []string{"event Normal SandboxExpired Sandbox/sb"},
			wantStatus: agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{
				notSuspended,
				// Ready was False already (PodSucceeded): its transition time stays.
				condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired, messageSandboxExpired),
				condition(agentsv1beta1.ConditionFinished, metav1.ConditionTrue, agentsv1beta1.ReasonPodSucceeded, agentsv1beta1.MessagePodSucceeded),
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sb := testSandbox(func(w *builders.SandboxWrapper) {
				w.Service(true).ShutdownTime(planNow.Add(time.Hour)).ShutdownPolicy(tc.policy)
			})
			pod := sandboxPod(sb, true)
			if tc.podSucceeded {
				pod.Status.Phase = corev1.PodSucceeded
			}
			a := newFakeAPI(t, sb, pod, sandboxService(sb))
			clk := clocktesting.NewFakeClock(planNow)
			r := newSandboxReconciler(t, a, clk)

			if diff := cmp.Diff(ctrl.Result{RequeueAfter: time.Hour}, reconcileSandbox(t, r)); diff != "" {
				t.Errorf("before expiry: result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBefore, a.Journal()); diff != "" {
				t.Errorf("before expiry: writes and events (-want +got):\n%s", diff)
			}

			clk.Step(time.Hour)
			if diff := cmp.Diff(ctrl.Result{}, reconcileSandbox(t, r)); diff != "" {
				t.Errorf("at expiry: result (-want +got):\n%s", diff)
			}
			journal := a.Journal()
			if diff := cmp.Diff(tc.wantWrites, writesOf(journal)); diff != "" {
				t.Errorf("at expiry: writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, eventsOf(journal)); diff != "" {
				t.Errorf("at expiry: events (-want +got):\n%s", diff)
			}
			for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
				if err := a.Get(context.Background(), sandboxKey, obj); !apierrors.IsNotFound(err) {
					t.Errorf("%s after expiry: %v, want it gone", kindOf(obj), err)
				}
			}
			got := &agentsv1beta1.Sandbox{}
			err := a.Get(context.Background(), sandboxKey, got)
			if tc.wantDeleted {
				if !apierrors.IsNotFound(err) {
					t.Errorf("the expired Sandbox: %v, want it deleted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantStatus, got.Status, sortConditions); diff != "" {
				t.Errorf("expired Sandbox status (-want +got):\n%s", diff)
			}

			// Expired stays expired: no pod again, no write, no second event.
			clk.Step(time.Minute)
			reconcileSandbox(t, r)
			if diff := cmp.Diff([]string(nil), a.Journal()); diff != "" {
				t.Errorf("after expiry: writes and events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSandboxEventsFollowTheStatusWrite: an event that reports a status change is sent once,
// after the status write that records the change succeeded (the house rule the claim
// controller keeps too): a status write that fails (409 here) and is retried does not send
// the event twice, and no event announces a status nobody can read.
//
// Shows a bug (issue 13 report): expire and multiplePods send their events before Reconcile
// writes the status.
func TestSandboxEventsFollowTheStatusWrite(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}, "sb", errors.New("the object has been modified"))
	tests := map[string]struct {
		objs        func(sb *agentsv1beta1.Sandbox) []client.Object
		sandbox     *agentsv1beta1.Sandbox
		wantJournal []string
	}{
		"expired, Retain": {
			sandbox: testSandbox(func(w *builders.SandboxWrapper) {
				w.Service(true).ShutdownTime(planNow.Add(-time.Second)).ShutdownPolicy(agentsv1beta1.ShutdownPolicyRetain)
			}),
			objs: func(sb *agentsv1beta1.Sandbox) []client.Object {
				return []client.Object{sandboxPod(sb, true), sandboxService(sb)}
			},
			wantJournal: []string{
				"delete Pod/sb", "delete Service/sb", "patch Sandbox/sb/status (conflict)",
				"patch Sandbox/sb/status", "event Normal SandboxExpired Sandbox/sb",
			},
		},
		"two pods controlled by the Sandbox": {
			sandbox: testSandbox(),
			objs: func(sb *agentsv1beta1.Sandbox) []client.Object {
				second := sandboxPod(sb, true)
				second.Name, second.UID = "sb-2", "pod-2-uid"
				return []client.Object{sandboxPod(sb, true), second}
			},
			wantJournal: []string{
				"patch Sandbox/sb/status (conflict)",
				"patch Sandbox/sb/status", "event Warning MultiplePods Sandbox/sb",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newFakeAPI(t, append(tc.objs(tc.sandbox), tc.sandbox)...)
			a.FailOnce("patch Sandbox/sb/status", conflict)
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))

			reconcileSandbox(t, r) // the status write fails: retried
			reconcileSandbox(t, r)
			if diff := cmp.Diff(tc.wantJournal, a.Journal()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
		})
	}
}

// laggingCache answers reads of one Sandbox with an older copy of it, as an informer that has
// not delivered the latest write yet does.
type laggingCache struct {
	client.Client
	old *agentsv1beta1.Sandbox
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if sb, ok := obj.(*agentsv1beta1.Sandbox); ok && c.old != nil && key == client.ObjectKeyFromObject(c.old) {
		c.old.DeepCopyInto(sb)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestSandboxStatusFromACacheBehindItsOwnWrite: a reconcile that starts before the cache shows
// the controller's own last status write (a pod event or a requeue comes first) computes from
// that write, not from the older copy. From the older copy the status differs again in its
// transition times, and writing it a second time changes the Sandbox's resourceVersion under
// a claim that is binding it as a ready warm member: the bind fails with 409 (issue 12's CI
// run: "patch sandboxes conflict:1", 151 status writes for 150 Sandboxes).
func TestSandboxStatusFromACacheBehindItsOwnWrite(t *testing.T) {
	sb := testSandbox()
	pod := sandboxPod(sb, true)
	a := newFakeAPI(t, sb, pod)
	clk := clocktesting.NewFakeClock(planNow)
	r := newSandboxReconciler(t, a, clk)
	before := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), sandboxKey, before); err != nil {
		t.Fatal(err)
	}
	cache := &laggingCache{Client: r.Client}
	r.Client = cache

	reconcileSandbox(t, r)
	if diff := cmp.Diff([]string{"patch Sandbox/sb/status"}, writesOf(a.Journal())); diff != "" {
		t.Fatalf("the first reconcile wrote (-want +got):\n%s", diff)
	}
	written := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), sandboxKey, written); err != nil {
		t.Fatal(err)
	}

	// Two seconds on, the cache still shows the Sandbox without that status.
	clk.Step(2 * time.Second)
	cache.old = before
	reconcileSandbox(t, r)
	if got := writesOf(a.Journal()); len(got) != 0 {
		t.Errorf("a reconcile on the older copy wrote %v, want nothing: the status is what the last write said", got)
	}
	now := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), sandboxKey, now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != written.ResourceVersion {
		t.Errorf("resourceVersion %s after the reconcile on the older copy, want %s unchanged", now.ResourceVersion, written.ResourceVersion)
	}

	// Still behind, but the pod has stopped being ready: that change is written, once, from
	// the last written status (Ready moves with a new transition time; the rest stays).
	pod = sandboxPod(sb, false)
	if err := a.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	reconcileSandbox(t, r)
	if diff := cmp.Diff([]string{"patch Sandbox/sb/status"}, writesOf(a.Journal())); diff != "" {
		t.Errorf("a change while the cache is behind wrote (-want +got):\n%s", diff)
	}
	if err := a.Get(context.Background(), sandboxKey, now); err != nil {
		t.Fatal(err)
	}
	notReady := condition(agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodRunningNotReady)
	notReady.LastTransitionTime = metav1.NewTime(clk.Now())
	want := []metav1.Condition{notReady, notSuspended, podScheduled}
	if diff := cmp.Diff(want, now.Status.Conditions, sortConditions, cmpopts.IgnoreFields(metav1.Condition{}, "ObservedGeneration")); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	// The cache catches up: nothing to write, and nothing of the write is kept.
	cache.old = nil
	reconcileSandbox(t, r)
	if got := writesOf(a.Journal()); len(got) != 0 {
		t.Errorf("a reconcile on the caught-up cache wrote %v", got)
	}
	if n := len(r.written.m); n != 0 {
		t.Errorf("%d status writes still kept after the cache showed them", n)
	}
}

// TestReadiness: Ready and its message as the public controller computes them (its messages
// are compared by clients and by the public project's own end-to-end tests).
func TestReadiness(t *testing.T) {
	running := func(ready bool, ip string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
		if ip != "" {
			p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		return p
	}
	svc := &corev1.Service{}
	withService := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) })
	suspended := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended })
	type want struct {
		ready           bool
		reason, message string
	}
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		pod  *corev1.Pod
		svc  *corev1.Service
		want want
	}{
		"no pod":            {sandbox(), nil, nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod does not exist"}},
		"pending":           {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod exists with phase: Pending"}},
		"running not ready": {sandbox(), running(false, "10.0.0.1"), nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Running but not Ready"}},
		"ready without ip":  {sandbox(), running(true, ""), nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Ready but has no podIPs yet"}},
		"ready":             {sandbox(), running(true, "10.0.0.1"), nil, want{true, agentsv1beta1.ReasonDependenciesReady, "Pod is Ready"}},
		"ready with service": {withService, running(true, "10.0.0.1"), svc,
			want{true, agentsv1beta1.ReasonDependenciesReady, "Pod is Ready; Service Exists"}},
		"ready, service missing": {withService, running(true, "10.0.0.1"), nil,
			want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Ready; Service does not exist"}},
		"pending, with its service": {withService, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, svc,
			want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod exists with phase: Pending; Service Exists"}},
		"no pod, service missing": {withService, nil, nil,
			want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod does not exist; Service does not exist"}},
		"ready, service not asked for but kept": {sandbox(), running(true, "10.0.0.1"), svc,
			want{true, agentsv1beta1.ReasonDependenciesReady, "Pod is Ready; Service Exists"}},
		"succeeded":  {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, nil, want{false, agentsv1beta1.ReasonPodSucceeded, "Pod completed successfully"}},
		"failed":     {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, nil, want{false, agentsv1beta1.ReasonPodFailed, "Pod failed"}},
		"suspending": {suspended, running(true, "10.0.0.1"), nil, want{false, agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspending"}},
		"suspended":  {suspended, nil, nil, want{false, agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspended"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ready, reason, msg := readiness(tc.sb, tc.pod, tc.svc)
			if diff := cmp.Diff(tc.want, want{ready, reason, msg}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("readiness (-want +got):\n%s", diff)
			}
		})
	}
}

// Suspended with someone else's pod of the Sandbox's name: the public project's messages, and
// nothing of that pod's scheduling reported as the Sandbox's.
func TestSuspendedWithAForeignPod(t *testing.T) {
	r := &sandboxReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended })
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: sb.Namespace},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.9"}}, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	r.setStatus(sb, foreign, nil, false)
	got := map[string][3]string{}
	for _, c := range sb.Status.Conditions {
		got[c.Type] = [3]string{string(c.Status), c.Reason, c.Message}
	}
	want := map[string][3]string{
		agentsv1beta1.ConditionSuspended: {"False", agentsv1beta1.ReasonPodNotOwned, "Refused to delete pod because it is not owned by this sandbox"},
		agentsv1beta1.ConditionReady:     {"False", agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspending"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestSandboxCreatesItsPodOnceWhileItsCacheLags: a Sandbox woken again before the cache shows
// the pod it created (a requeue, a label the binding wrote) does not create the pod again,
// which the API server would answer 409 AlreadyExists. When the cache falls so far behind
// that the expectations lapse (the TTL drops them unmet), a pod the cache does not show is
// read from the API server before it is created: no create is sent for the pod that exists
// there, and one is for a pod that is gone.
func TestSandboxCreatesItsPodOnceWhileItsCacheLags(t *testing.T) {
	sb := testSandbox()
	cache := newFakeAPI(t, sb)
	server := newFakeAPI(t, sb.DeepCopy(), sandboxPod(sb, false)) // has the pod all along
	clk := clocktesting.NewFakeClock(planNow)
	r := newSandboxReconciler(t, cache, clk)
	r.APIReader = server
	reconcile := func(step string) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: sandboxKey})
		if err != nil {
			t.Fatalf("%s: Reconcile: %v", step, err)
		}
		return res
	}
	podCreates := func() (n int) {
		for _, e := range cache.Journal() {
			if strings.HasPrefix(e, "create Pod/") {
				n++
			}
		}
		return n
	}
	// hidePod makes the cache not show the pod: its create event has not arrived.
	hidePod := func() {
		t.Helper()
		if err := cache.Delete(context.Background(), sandboxPod(sb, false)); err != nil {
			t.Fatalf("hiding the pod from the cache: %v", err)
		}
		cache.Journal()
	}

	reconcile("first reconcile")
	if n := podCreates(); n != 1 {
		t.Fatalf("first reconcile: %d pod creates, want 1", n)
	}
	hidePod()

	// Woken again at once, and again a little later: the pod is in flight.
	reconcile("second reconcile")
	clk.Step(30 * time.Second)
	if res := reconcile("third reconcile"); res.RequeueAfter == 0 {
		t.Errorf("no requeue while the pod is in flight: the Sandbox must come back to report it")
	}
	if n := podCreates(); n != 0 {
		t.Errorf("%d pod creates while the pod it created is in flight, want 0", n)
	}

	// Past the TTL the expectations lapse: the API server is asked, and it has the pod.
	clk.Step(expectationsTTL)
	if res := reconcile("reconcile past the TTL"); res.RequeueAfter == 0 {
		t.Errorf("no requeue: the Sandbox must come back once its cache shows the pod")
	}
	if n := podCreates(); n != 0 {
		t.Errorf("%d pod creates past the TTL although the API server has the pod, want 0", n)
	}
	if !r.expected.hasLapsed(sandboxKey) {
		t.Errorf("expectations past their TTL: want them marked lapsed")
	}

	// The pod is gone from the API server too: it is created again, and the cache is
	// trusted as before (the new create is expected).
	if err := server.Delete(context.Background(), sandboxPod(sb, false)); err != nil {
		t.Fatal(err)
	}
	reconcile("reconcile once the pod is gone")
	if n := podCreates(); n != 1 {
		t.Errorf("%d pod creates once the pod is gone, want 1", n)
	}
	if r.expected.hasLapsed(sandboxKey) {
		t.Errorf("still lapsed after a new expected write")
	}
}

// TestStartingPodIsReportedWithItsReadyOrAfterTheDelay: a pod's start-up steps (scheduled,
// node, IPs, Running) are written with its Ready, or once the pod is StartupReportDelay old,
// whatever wakes the Sandbox before: one status write per Sandbox started instead of one per
// step. What someone acts on is written at once: Ready, a pod that fits on no node, a Ready
// Sandbox's pod no longer Ready.
func TestStartingPodIsReportedWithItsReadyOrAfterTheDelay(t *testing.T) {
	const age = time.Second
	young := func(sb *agentsv1beta1.Sandbox, ready bool) *corev1.Pod {
		pod := sandboxPod(sb, ready)
		pod.CreationTimestamp = metav1.NewTime(planNow.Add(-age))
		return pod
	}
	wantJournal := func(t *testing.T, a *fakeAPI, what string, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, a.Journal()); diff != "" {
			t.Errorf("%s: writes and events (-want +got):\n%s", what, diff)
		}
	}
	start := func(t *testing.T, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) (*fakeAPI, *sandboxReconciler, *clocktesting.FakeClock) {
		a := newFakeAPI(t, sb, pod)
		clk := clocktesting.NewFakeClock(planNow)
		return a, newSandboxReconciler(t, a, clk), clk
	}

	t.Run("starting: written once the pod is the delay old", func(t *testing.T) {
		sb := testSandbox()
		a, r, clk := start(t, sb, young(sb, false))
		res := reconcileSandbox(t, r)
		if w := a.Journal(); len(w) != 0 {
			t.Errorf("a pod %v old, starting: wrote %v, want nothing yet", age, w)
		}
		if want := StartupReportDelay - age; res.RequeueAfter != want {
			t.Errorf("RequeueAfter = %v, want %v (when the pod is the delay old)", res.RequeueAfter, want)
		}
		clk.Step(StartupReportDelay - age)
		reconcileSandbox(t, r)
		wantJournal(t, a, "the delay passed", []string{"patch Sandbox/sb/status"})
		wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodRunningNotReady)
		if got := getSandbox(t, a).Status.NodeName; got != "node-1" {
			t.Errorf("status.nodeName = %q, want node-1", got)
		}
	})

	t.Run("ready: written at once", func(t *testing.T) {
		sb := testSandbox()
		a, r, _ := start(t, sb, young(sb, true))
		reconcileSandbox(t, r)
		wantJournal(t, a, "writes", []string{"patch Sandbox/sb/status", "event Normal SandboxReady Sandbox/sb"})
		wantReady(t, a, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
	})

	t.Run("unschedulable: written at once", func(t *testing.T) {
		sb := testSandbox()
		pod := young(sb, false)
		pod.Spec.NodeName = ""
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"},
		}}
		a, r, _ := start(t, sb, pod)
		reconcileSandbox(t, r)
		wantJournal(t, a, "writes", []string{"patch Sandbox/sb/status"})
		if c := meta.FindStatusCondition(getSandbox(t, a).Status.Conditions, agentsv1beta1.ConditionPodScheduled); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("PodScheduled = %+v, want False", c)
		}
	})

	t.Run("an unbound pool member's placement waits too: its pool reads the pod", func(t *testing.T) {
		sb := testSandbox(func(w *builders.SandboxWrapper) {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool",
				Name: "pool", UID: "pool-uid", Controller: ptr.To(true)}}
			delete(w.Labels, agentsv1beta1.LabelClaimUID)
		})
		a, r, _ := start(t, sb, young(sb, false))
		reconcileSandbox(t, r)
		wantJournal(t, a, "placed, not Ready", nil)
	})

	t.Run("a Ready Sandbox's pod no longer Ready: written at once", func(t *testing.T) {
		sb := testSandbox()
		sb.Status = agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{
			condition(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady),
		}}
		a, r, _ := start(t, sb, young(sb, false))
		reconcileSandbox(t, r)
		wantJournal(t, a, "writes", []string{"patch Sandbox/sb/status"})
		wantReady(t, a, metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, agentsv1beta1.MessagePodRunningNotReady)
	})
}
