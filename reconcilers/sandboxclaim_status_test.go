package reconcilers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
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
		"its pod lost: the Sandbox's reason and words": {
			sandbox:    withReady(metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, "Pod sb (uid u1) was deleted; creating its replacement"),
			wantStatus: metav1.ConditionFalse, wantReason: agentsv1beta1.ReasonPodLost, wantMsg: "Pod sb (uid u1) was deleted; creating its replacement",
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

// TestClaimReadyMeansRoutable: a claim is reported Ready only once its Sandbox's pod carries
// what the binding gave the Sandbox (the claim's UID and pod metadata, no warm-pool label),
// which is what the sandbox-router and users' policies select on. A pod the cache does not show
// yet, or a failed pod patch, keeps the claim not Ready and brings it back; a pod that
// already carries them is not written.
func TestClaimReadyMeansRoutable(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd is slow")
	tests := map[string]struct {
		noPod        bool
		podFails     error
		podLabelled  bool
		wantJournal  []string
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantRequeue  bool
		wantErr      bool
		wantRecovery []string
	}{
		"the pod is labelled, then the claim is Ready": {
			wantJournal: []string{"bind Sandbox/m", "patch Pod/m", "patch SandboxClaim/c/status"},
			wantReady:   metav1.ConditionTrue,
		},
		"a pod that already carries the labels is not written": {
			podLabelled: true,
			wantJournal: []string{"bind Sandbox/m", "patch SandboxClaim/c/status"},
			wantReady:   metav1.ConditionTrue,
		},
		"no pod in the cache yet: not Ready, looked at again": {
			noPod:        true,
			wantJournal:  []string{"bind Sandbox/m", "patch SandboxClaim/c/status"},
			wantReady:    metav1.ConditionFalse,
			wantReason:   extv1beta1.ReasonSandboxNotReady,
			wantRequeue:  true,
			wantRecovery: []string{"patch Pod/m", "patch SandboxClaim/c/status"},
		},
		"the pod patch fails: not Ready, retried": {
			podFails:     unavailable,
			wantJournal:  []string{"bind Sandbox/m", "patch Pod/m (error)", "patch SandboxClaim/c/status"},
			wantReady:    metav1.ConditionFalse,
			wantReason:   extv1beta1.ReasonReconcilerError,
			wantErr:      true,
			wantRecovery: []string{"patch Pod/m", "patch SandboxClaim/c/status"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, pool := testTemplate(), testPool(1)
			claim := testClaim(tmpl, func(w *builders.ClaimWrapper) { w.PodLabel("sandbox.users.io/team", "a") })
			member := readyMember(pool, tmpl, "m", "10.0.0.1")
			member.Annotations[agentsv1beta1.AnnotationPodName] = "m"
			pod := podOf(member)
			if tc.podLabelled {
				bound := member.DeepCopy()
				bound.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
				delete(bound.Labels, agentsv1beta1.LabelWarmPoolSandbox)
				bound.Spec.PodTemplate.ObjectMeta.Labels["sandbox.users.io/team"] = "a"
				pod.Labels, pod.Annotations = podOf(bound).Labels, podOf(bound).Annotations
			}
			objs := []client.Object{tmpl, pool, claim, member}
			if !tc.noPod {
				objs = append(objs, pod)
			}
			a := newFakeAPI(t, objs...)
			if tc.podFails != nil {
				a.FailOnce("patch Pod/m", tc.podFails)
			}
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
			observeSandboxes(t, a, r.Index)

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: claimKey})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			if got := res.RequeueAfter > 0; got != tc.wantRequeue {
				t.Errorf("requeue after %v, want a requeue: %v", res.RequeueAfter, tc.wantRequeue)
			}
			if diff := cmp.Diff(tc.wantJournal, writesOf(a.Journal())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			ready := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady)
			if ready == nil || ready.Status != tc.wantReady {
				t.Fatalf("claim Ready = %+v, want %s", ready, tc.wantReady)
			}
			if tc.wantReady == metav1.ConditionTrue {
				got := &corev1.Pod{}
				if err := a.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "m"}, got); err != nil {
					t.Fatal(err)
				}
				if _, pooled := got.Labels[agentsv1beta1.LabelWarmPoolSandbox]; pooled || got.Labels[agentsv1beta1.LabelClaimUID] != string(claim.UID) || got.Labels["sandbox.users.io/team"] != "a" {
					t.Errorf("the claim is Ready and its pod's labels are %v: not what the router and policies select", got.Labels)
				}
				return
			}
			if ready.Reason != tc.wantReason {
				t.Errorf("Ready reason = %s, want %s", ready.Reason, tc.wantReason)
			}

			// The pod shows up (or the API server recovers): the next reconcile labels it and
			// reports the claim Ready.
			if tc.noPod {
				if err := a.Create(context.Background(), pod); err != nil {
					t.Fatal(err)
				}
				a.Journal()
			}
			reconcileClaim(t, r)
			if diff := cmp.Diff(tc.wantRecovery, writesOf(a.Journal())); diff != "" {
				t.Errorf("the next reconcile wrote (-want +got):\n%s", diff)
			}
			if !meta.IsStatusConditionTrue(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady) {
				t.Errorf("the claim is not Ready after its pod was labelled")
			}
		})
	}
}

// TestClaimReadyReportsTheClaimsGeneration: a bound claim's Ready condition carries the
// claim's own generation, never its Sandbox's, as the public controller's does since v1.0
// (kubernetes-sigs/agent-sandbox#1317; v0.5 forwarded the Sandbox's). A claim whose spec
// changed after it was reported Ready, or one the public controller reported with its
// Sandbox's generation, gets one status write that changes observedGeneration and nothing
// else (the transition time is kept); a claim already reported at its generation is not
// written.
func TestClaimReadyReportsTheClaimsGeneration(t *testing.T) {
	since := metav1.NewTime(planNow.Add(-time.Hour))
	tests := map[string]struct {
		reportedAt  int64
		wantJournal []string
	}{
		"reported at the Sandbox's generation (v0.5)":            {reportedAt: 7, wantJournal: []string{"patch SandboxClaim/c/status"}},
		"reported before a claim-only spec change":               {reportedAt: 1, wantJournal: []string{"patch SandboxClaim/c/status"}},
		"reported at the claim's generation (v1.0, or sandgate)": {reportedAt: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tmpl, pool := testTemplate(), testPool(1)
			c := claim(func(w *builders.ClaimWrapper) {
				w.Generation = 2
				w.Annotation(agentsv1beta1.AnnotationSandboxName, "m").StatusSandbox("m")
			})
			sb := readyMember(pool, tmpl, "m", "10.0.0.1")
			sb.Generation = 7
			sb.Status.Conditions[0].ObservedGeneration = 7
			sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, extv1beta1.GroupVersion.WithKind(policy.ClaimKind.Kind))}
			delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox)
			delete(sb.Labels, agentsv1beta1.LabelSandboxTemplateHash)
			sb.Labels[agentsv1beta1.LabelClaimUID] = string(c.UID)
			c.Status.Sandbox.PodIPs = sb.Status.PodIPs
			c.Status.Conditions = []metav1.Condition{{
				Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: tc.reportedAt,
				Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, LastTransitionTime: since,
			}}
			a := newFakeAPI(t, tmpl, pool, c, sb, podOf(sb))
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
			observeSandboxes(t, a, r.Index)

			reconcileClaim(t, r)
			if diff := cmp.Diff(tc.wantJournal, writesOf(a.Journal())); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			want := []metav1.Condition{{
				Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2,
				Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, LastTransitionTime: since,
			}}
			got := getClaim(t, a)
			if diff := cmp.Diff(want, got.Status.Conditions, cmpopts.EquateApproxTime(time.Second)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			reconcileClaim(t, r)
			if writes := writesOf(a.Journal()); len(writes) > 0 {
				t.Errorf("the next reconcile wrote %v, want nothing", writes)
			}
		})
	}
}

// Claims of a pool that never pause hold a bound claim's sandbox-name annotation back at most
// MaxBookkeepingDelay after it became Ready: before that the reconcile writes nothing and asks
// to look again no later than the bound, at it the annotation is written.
func TestSteadyClaimsDoNotHoldBookkeepingForEver(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(1)
	c := claim(func(w *builders.ClaimWrapper) { w.StatusSandbox("m") })
	sb := readyMember(pool, tmpl, "m", "10.0.0.1")
	bindReady(c, sb, planNow.Add(-2*time.Second))
	a := newFakeAPI(t, tmpl, pool, c, sb, podOf(sb))
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	r.BookkeepingDelay, r.MaxBookkeepingDelay = time.Second, 3*time.Second
	observeSandboxes(t, a, r.Index)
	poolKey := types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.WarmPoolRef.Name}

	r.activity.touch(poolKey, clk.Now()) // another claim of the pool, just now
	res := reconcileClaim(t, r)
	if writes := writesOf(a.Journal()); len(writes) > 0 {
		t.Errorf("2s after Ready, claims arriving: wrote %v, want nothing yet", writes)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Errorf("2s after Ready: requeue after %s, want within the 1s left of the bound", res.RequeueAfter)
	}
	clk.Step(time.Second)
	r.activity.touch(poolKey, clk.Now()) // claims still arriving
	reconcileClaim(t, r)
	if got := getClaim(t, a).Annotations[agentsv1beta1.AnnotationSandboxName]; got != sb.Name {
		t.Errorf("3s after Ready, claims still arriving: sandbox-name is %q, want %s", got, sb.Name)
	}
}

// Under steady traffic one bound claim per pool looks for the pause its bookkeeping waits
// for; the others sleep until their bound and are woken when it sees the pause, so that the
// waiting costs no reconcile a second per claim.
func TestOneClaimPerPoolLooksForThePause(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(2)
	objs := []client.Object{tmpl, pool}
	for _, name := range []string{"c", "d"} {
		c := builders.MakeClaim(name, "ns", "pool").UID(types.UID(name + "-uid")).StatusSandbox("m-" + name).Obj()
		sb := readyMember(pool, tmpl, "m-"+name, "10.0.0.1")
		bindReady(c, sb, planNow.Add(-2*time.Second))
		objs = append(objs, c, sb, podOf(sb))
	}
	a := newFakeAPI(t, objs...)
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	r.BookkeepingDelay, r.MaxBookkeepingDelay = time.Second, 10*time.Second
	observeSandboxes(t, a, r.Index)
	poolKey := types.NamespacedName{Namespace: "ns", Name: "pool"}
	reconcile := func(name string) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
		if err != nil {
			t.Fatalf("Reconcile %s: %v", name, err)
		}
		return res
	}

	r.activity.touch(poolKey, clk.Now()) // claims arriving
	if res := reconcile("c"); res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Errorf("the first waiting claim: requeue after %s, want within the quiet period: it looks", res.RequeueAfter)
	}
	if res := reconcile("d"); res.RequeueAfter != 8*time.Second {
		t.Errorf("the second waiting claim: requeue after %s, want 8s, at its bound: it sleeps", res.RequeueAfter)
	}
	if writes := writesOf(a.Journal()); len(writes) > 0 {
		t.Fatalf("claims arriving: wrote %v, want nothing yet", writes)
	}

	clk.Step(time.Second) // the pool's claims paused
	reconcile("c")
	select {
	case ev := <-r.bookkeepingWake:
		if ev.Object.GetName() != "d" {
			t.Errorf("woke %s, want d", ev.Object.GetName())
		}
	default:
		t.Fatalf("the claim that saw the pause woke no one; d sleeps until its bound")
	}
	reconcile("d")
	for _, name := range []string{"c", "d"} {
		got := &extv1beta1.SandboxClaim{}
		if err := a.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations[agentsv1beta1.AnnotationSandboxName] != "m-"+name {
			t.Errorf("claim %s: sandbox-name %q after the pause, want m-%s", name, got.Annotations[agentsv1beta1.AnnotationSandboxName], name)
		}
	}
}

// bindReady binds the ready member sb to claim c, as the claim controller leaves them, and
// reports c Ready since readyAt, its sandbox-name annotation not written yet.
func bindReady(c *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, readyAt time.Time) {
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, extv1beta1.GroupVersion.WithKind(policy.ClaimKind.Kind))}
	delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox)
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(c.UID)
	c.Status.Sandbox.PodIPs = sb.Status.PodIPs
	c.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: c.Generation,
		Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, LastTransitionTime: metav1.NewTime(readyAt),
	}}
}

// boundToReadySandbox is claim "c" reported Ready on its Sandbox "m", whose status is
// sandboxReady, with the pod "m" carrying the claim's labels.
func boundToReadySandbox(t *testing.T, sandboxReady metav1.Condition) (*fakeAPI, *claimReconciler) {
	t.Helper()
	tmpl, pool := testTemplate(), testPool(1)
	c := claim(func(w *builders.ClaimWrapper) {
		w.Annotation(agentsv1beta1.AnnotationSandboxName, "m").StatusSandbox("m")
	})
	sb := readyMember(pool, tmpl, "m", "10.0.0.1")
	sb.Annotations[agentsv1beta1.AnnotationPodName] = "m"
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, extv1beta1.GroupVersion.WithKind(policy.ClaimKind.Kind))}
	delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox)
	delete(sb.Annotations, AnnotationSafeToEvict)
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(c.UID)
	sb.Status.Conditions = []metav1.Condition{sandboxReady}
	c.Status.Sandbox.PodIPs = sb.Status.PodIPs
	c.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: c.Generation,
		Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, LastTransitionTime: metav1.NewTime(planNow.Add(-time.Minute)),
	}}
	a := newFakeAPI(t, tmpl, pool, c, sb, podOf(sb))
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	observeSandboxes(t, a, r.Index)
	return a, r
}

func setSandboxReady(t *testing.T, a *fakeAPI, ready metav1.Condition) *agentsv1beta1.Sandbox {
	t.Helper()
	sb := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "m"}, sb); err != nil {
		t.Fatal(err)
	}
	sb.Status.Conditions = []metav1.Condition{ready}
	if err := a.Status().Update(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	return sb
}

func claimReady(t *testing.T, a *fakeAPI) [3]string {
	t.Helper()
	c := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady)
	if c == nil {
		t.Fatal("the claim has no Ready condition")
	}
	return [3]string{string(c.Status), c.Reason, c.Message}
}

var (
	sandboxReadyTrue = metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, LastTransitionTime: metav1.NewTime(planNow)}
	sandboxPodLost = metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: agentsv1beta1.ReasonPodLost, Message: "Pod m (uid u1) was deleted; creating its replacement", LastTransitionTime: metav1.NewTime(planNow)}
)

// TestClaimReportsItsSandboxsLostPod: a bound claim's Ready goes False with the Sandbox's
// PodLost reason and message while the Sandbox reports the loss, with a Warning event, once;
// and True again when the Sandbox is Ready on its replacement.
func TestClaimReportsItsSandboxsLostPod(t *testing.T) {
	a, r := boundToReadySandbox(t, sandboxPodLost)

	reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"patch SandboxClaim/c/status", "event Warning PodLost SandboxClaim/c"}, a.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([3]string{"False", agentsv1beta1.ReasonPodLost, sandboxPodLost.Message}, claimReady(t, a)); diff != "" {
		t.Errorf("claim Ready (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Sandbox m lost its pod: " + sandboxPodLost.Message}, a.Notes()); diff != "" {
		t.Errorf("event notes (-want +got):\n%s", diff)
	}
	reconcileClaim(t, r)
	if w := a.Journal(); len(w) != 0 {
		t.Errorf("the loss reported: the next reconcile wrote %v", w)
	}

	setSandboxReady(t, a, sandboxReadyTrue)
	reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
		t.Errorf("Ready again: writes and events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([3]string{"True", agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady}, claimReady(t, a)); diff != "" {
		t.Errorf("claim Ready (-want +got):\n%s", diff)
	}
}

// TestClaimReportsALossItsSandboxRecoveredFrom: the Sandbox watch delivered the Sandbox's
// PodLost, but by the time the claim looks the Sandbox is Ready again on its replacement (a
// kubelet that starts pods in milliseconds, a claim queue behind a burst): the claim still
// goes Ready=False PodLost first, then Ready=True in the reconcile that follows at once, as
// the Sandbox's watchers saw it; and it does so once.
func TestClaimReportsALossItsSandboxRecoveredFrom(t *testing.T) {
	a, r := boundToReadySandbox(t, sandboxReadyTrue)
	h := &claimSandboxHandler{index: r.Index, losses: r.losses}
	q := newPodQueue()
	ready := setSandboxReady(t, a, sandboxReadyTrue)
	lost := ready.DeepCopy()
	lost.Status.Conditions = []metav1.Condition{sandboxPodLost}
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: ready, ObjectNew: lost}, q)
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: lost, ObjectNew: ready}, q)
	if q.Len() != 1 {
		t.Errorf("%d claims woken, want c", q.Len())
	}

	res := reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"patch SandboxClaim/c/status", "event Warning PodLost SandboxClaim/c"}, a.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([3]string{"False", agentsv1beta1.ReasonPodLost, sandboxPodLost.Message}, claimReady(t, a)); diff != "" {
		t.Errorf("claim Ready (-want +got):\n%s", diff)
	}
	if res.RequeueAfter != lossRecordedRequeue {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, lossRecordedRequeue)
	}

	reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"patch SandboxClaim/c/status"}, a.Journal()); diff != "" {
		t.Errorf("the next reconcile: writes and events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([3]string{"True", agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady}, claimReady(t, a)); diff != "" {
		t.Errorf("claim Ready (-want +got):\n%s", diff)
	}
	reconcileClaim(t, r)
	if w := a.Journal(); len(w) != 0 {
		t.Errorf("the loss reported once: the next reconcile wrote %v", w)
	}
}
