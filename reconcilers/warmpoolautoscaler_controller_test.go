package reconcilers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// autoscalerTest is a Reconcile test of the autoscaler: a fake API server holding objs, the
// demand recorder and the clock.
type autoscalerTest struct {
	t   *testing.T
	api *fakeAPI
	r   *autoscalerReconciler
	clk *clocktesting.FakeClock
}

func newAutoscalerTest(t *testing.T, objs ...client.Object) *autoscalerTest {
	t.Helper()
	clk := clocktesting.NewFakeClock(wpaT0)
	a := newFakeAPI(t, objs...)
	m := newTestMetrics(t)
	return &autoscalerTest{t: t, api: a, clk: clk, r: &autoscalerReconciler{
		Client: m.WrapClient(a), APIReader: a, Recorder: a.Recorder(), Metrics: m, Clock: clk, Demand: demand.NewRecorder(clk),
	}}
}

// autoscaler is a defaulted autoscaler, as admission stores it.
func autoscaler(w *builders.AutoscalerWrapper) *autoscalingv1alpha1.WarmPoolAutoscaler {
	a := w.Obj()
	webhooks.DefaultAutoscaler(a)
	a.CreationTimestamp = metav1.NewTime(wpaT0.Add(-time.Hour))
	return a
}

func (at *autoscalerTest) reconcile(name string) ctrl.Result {
	at.t.Helper()
	res, err := at.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil {
		at.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// arrive records n claims of pool admitted now.
func (at *autoscalerTest) arrive(pool string, n int) {
	for i := range n {
		at.r.Demand.Admitted(types.NamespacedName{Namespace: "ns", Name: pool}, at.clk.Now().Add(time.Duration(i)))
	}
}

func (at *autoscalerTest) poolReplicas(name string) int32 {
	at.t.Helper()
	p := &extv1beta1.SandboxWarmPool{}
	if err := at.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, p); err != nil {
		at.t.Fatal(err)
	}
	return *p.Spec.Replicas
}

func (at *autoscalerTest) status(name string) autoscalingv1alpha1.WarmPoolAutoscalerStatus {
	at.t.Helper()
	a := &autoscalingv1alpha1.WarmPoolAutoscaler{}
	if err := at.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, a); err != nil {
		at.t.Fatal(err)
	}
	return a.Status
}

// Demand raises the pool through its /scale subresource, and only that: one scale write, the
// status, one ScaledUp event; a reconcile with nothing new writes nothing.
func TestAutoscalerScalesThePoolThroughItsScale(t *testing.T) {
	at := newAutoscalerTest(t, builders.MakePool("pool", "ns", "tmpl").Replicas(1).Obj(),
		autoscaler(builders.MakeAutoscaler("wpa", "ns", "pool").Min(1).Max(50).TargetSpare(2)))
	at.arrive("pool", 30) // 3/s over the short window, 5 s default start-up; all 30 within one start-up
	at.reconcile("wpa")
	if diff := cmp.Diff([]string{"patch SandboxWarmPool/pool/scale", "patch WarmPoolAutoscaler/wpa/status", "event Normal ScaledUp WarmPoolAutoscaler/wpa"},
		at.api.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	if got := at.poolReplicas("pool"); got != 32 {
		t.Errorf("pool replicas %d, want 32 (2 spare + the 30 that arrived within one start-up)", got)
	}
	s := at.status("wpa")
	if s.DesiredReplicas != 32 || s.CurrentReplicas != 32 || s.Demand == nil || s.Demand.ExpectedClaimsDuringStartup != 30 ||
		s.Demand.ShortWindowClaims != 30 || s.Demand.ClaimsPerSecond.String() != "3" || s.LastScaleTime == nil ||
		s.LastScaleReason == "" || s.ObservedGeneration != 0 {
		t.Errorf("status %+v, demand %+v", s, s.Demand)
	}
	if !meta.IsStatusConditionTrue(s.Conditions, autoscalingv1alpha1.ConditionReady) ||
		!meta.IsStatusConditionTrue(s.Conditions, autoscalingv1alpha1.ConditionAbleToScale) {
		t.Errorf("conditions %+v, want Ready and AbleToScale", s.Conditions)
	}
	if at.r.Metrics.AutoscalerScales("up") != 1 {
		t.Errorf("scales up counted %v, want 1", at.r.Metrics.AutoscalerScales("up"))
	}
	at.reconcile("wpa")
	if j := at.api.Journal(); len(j) != 0 {
		t.Errorf("a reconcile with nothing new wrote %v", j)
	}
}

// With an HPA on the pool the autoscaler writes nothing, says so with one condition and one
// event however often it reconciles, and resumes (one more event) once the HPA is gone.
func TestAutoscalerDoesNotFightAnHPA(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa", Namespace: "ns"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool", Name: "pool"},
			MaxReplicas:    5,
		},
	}
	at := newAutoscalerTest(t, builders.MakePool("pool", "ns", "tmpl").Replicas(1).Obj(),
		autoscaler(builders.MakeAutoscaler("wpa", "ns", "pool").Min(1).Max(50)), hpa)
	for range 4 {
		at.arrive("pool", 10)
		at.reconcile("wpa")
		at.clk.Step(100 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"patch WarmPoolAutoscaler/wpa/status", "event Warning ConflictingWriter WarmPoolAutoscaler/wpa"},
		at.api.Journal()); diff != "" {
		t.Errorf("writes and events (-want +got):\n%s", diff)
	}
	if got := at.poolReplicas("pool"); got != 1 {
		t.Errorf("pool replicas %d, want the 1 nobody but the HPA may change", got)
	}
	c := meta.FindStatusCondition(at.status("wpa").Conditions, autoscalingv1alpha1.ConditionAbleToScale)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != autoscalingv1alpha1.ReasonConflictingWriter {
		t.Fatalf("AbleToScale %+v, want False ConflictingWriter", c)
	}

	if err := at.api.Delete(context.Background(), hpa); err != nil {
		t.Fatal(err)
	}
	at.api.Journal()
	at.reconcile("wpa")
	journal := at.api.Journal()
	if diff := cmp.Diff([]string{"patch SandboxWarmPool/pool/scale", "patch WarmPoolAutoscaler/wpa/status"}, writesOf(journal)); diff != "" {
		t.Errorf("writes after the HPA went (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"event Normal ScaledUp WarmPoolAutoscaler/wpa", "event Normal ConflictResolved WarmPoolAutoscaler/wpa"},
		eventsOf(journal)); diff != "" {
		t.Errorf("events after the HPA went (-want +got):\n%s", diff)
	}
}

// Of two autoscalers of one pool the one created first scales it; the other stands down.
func TestAutoscalerSecondOfAPoolStandsDown(t *testing.T) {
	first := autoscaler(builders.MakeAutoscaler("first", "ns", "pool").Min(3).Max(50))
	second := autoscaler(builders.MakeAutoscaler("second", "ns", "pool").Min(9).Max(50))
	second.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(time.Minute))
	at := newAutoscalerTest(t, builders.MakePool("pool", "ns", "tmpl").Replicas(1).Obj(), first, second)
	at.reconcile("second")
	at.reconcile("first")
	if got := at.poolReplicas("pool"); got != 3 {
		t.Errorf("pool replicas %d, want first's minimum 3", got)
	}
	c := meta.FindStatusCondition(at.status("second").Conditions, autoscalingv1alpha1.ConditionAbleToScale)
	if c == nil || c.Reason != autoscalingv1alpha1.ReasonConflictingWriter {
		t.Errorf("second's AbleToScale %+v, want ConflictingWriter", c)
	}
}

// Without its pool the autoscaler says so and writes nothing else.
func TestAutoscalerWithoutItsPool(t *testing.T) {
	at := newAutoscalerTest(t, autoscaler(builders.MakeAutoscaler("wpa", "ns", "missing")))
	at.reconcile("wpa")
	c := meta.FindStatusCondition(at.status("wpa").Conditions, autoscalingv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != autoscalingv1alpha1.ReasonPoolNotFound {
		t.Errorf("Ready %+v, want False PoolNotFound", c)
	}
	if diff := cmp.Diff([]string{"patch WarmPoolAutoscaler/wpa/status"}, at.api.Journal()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Whoever last set spec.replicas owns it in the managedFields; the autoscaler's own writes are
// recognized, and a fieldset without the field is no owner.
func TestReplicasOwner(t *testing.T) {
	entry := func(manager string, at time.Time, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: ptr.To(metav1.NewTime(at)), FieldsV1: metav1.NewFieldsV1(fields)}
	}
	replicasSet := `{"f:spec":{"f:replicas":{}}}`
	type want struct {
		manager string
		at      time.Time
		ok      bool
	}
	cases := map[string]struct {
		entries []metav1.ManagedFieldsEntry
		want    want
	}{
		"nobody": {entries: []metav1.ManagedFieldsEntry{entry("kubectl", wpaT0, `{"f:spec":{"f:sandboxTemplateRef":{}}}`)}},
		"the autoscaler": {entries: []metav1.ManagedFieldsEntry{
			entry("kubectl", wpaT0, `{"f:spec":{"f:sandboxTemplateRef":{}}}`), entry(AutoscalerFieldManager, wpaT0.Add(time.Minute), replicasSet)},
			want: want{AutoscalerFieldManager, wpaT0.Add(time.Minute), true}},
		"another writer": {entries: []metav1.ManagedFieldsEntry{entry("kube-controller-manager", wpaT0, replicasSet)},
			want: want{"kube-controller-manager", wpaT0, true}},
		"a label named replicas is not the field": {entries: []metav1.ManagedFieldsEntry{
			entry("kubectl", wpaT0, `{"f:metadata":{"f:labels":{"f:replicas":{}}}}`)}},
		"shared by server-side apply: the latest": {entries: []metav1.ManagedFieldsEntry{
			entry(AutoscalerFieldManager, wpaT0, replicasSet), entry("gitops", wpaT0.Add(time.Second), replicasSet)},
			want: want{"gitops", wpaT0.Add(time.Second), true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, at, ok := replicasOwner(tc.entries)
			if diff := cmp.Diff(tc.want, want{m, at, ok}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// poolReader answers Gets of the pool with pool, counting them: the API server as the
// autoscaler reads managedFields from it.
type poolReader struct {
	pool  *extv1beta1.SandboxWarmPool
	reads int
}

func (p *poolReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	p.reads++
	p.pool.DeepCopyInto(obj.(*extv1beta1.SandboxWarmPool))
	return nil
}

func (p *poolReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// Another field manager's write of the replicas, after the autoscaler's last scale, holds the
// autoscaler off for the hold (from when it was first seen: writes through /scale carry no
// time), read from the API server once, not at every reconcile; then the autoscaler takes
// the field back. The pool's creator, before the autoscaler ever scaled, is no conflict.
func TestForeignReplicasWriterIsHonouredForAHold(t *testing.T) {
	scaleWrite := metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)}
	pool := builders.MakePool("pool", "ns", "tmpl").Replicas(7).Obj()
	pool.ManagedFields = []metav1.ManagedFieldsEntry{scaleWrite}
	reader := &poolReader{pool: pool}
	r := &autoscalerReconciler{APIReader: reader}
	wpa := autoscaler(builders.MakeAutoscaler("wpa", "ns", "pool").ScaleDown(60, "", 0))
	rules := autoscalerRulesOf(&wpa.Spec)
	st := &autoscalerState{verified: 3, verifiedOK: true}

	if c, err := r.foreignReplicasWriter(context.Background(), wpa, pool, st, rules, wpaT0); c != nil || err != nil {
		t.Fatalf("before the autoscaler ever scaled: %+v %v, want no conflict", c, err)
	}
	wpa.Status.LastScaleTime = ptrTime(wpaT0.Add(-time.Minute))
	c, err := r.foreignReplicasWriter(context.Background(), wpa, pool, st, rules, wpaT0)
	if err != nil || c == nil || !c.until.Equal(wpaT0.Add(time.Minute)) {
		t.Fatalf("got %+v %v, want a conflict until one scale-down window from now", c, err)
	}
	if c, _ := r.foreignReplicasWriter(context.Background(), wpa, pool, st, rules, wpaT0.Add(59*time.Second)); c == nil || reader.reads != 1 {
		t.Errorf("within the hold: %+v after %d reads, want the conflict, read once", c, reader.reads)
	}
	if c, _ := r.foreignReplicasWriter(context.Background(), wpa, pool, st, rules, wpaT0.Add(time.Minute)); c != nil || !st.verifiedOK || st.verified != 7 {
		t.Errorf("after the hold: %+v (verified %d), want none and 7 accepted until the autoscaler writes", c, st.verified)
	}
	pool.ManagedFields[0].Manager = AutoscalerFieldManager
	pool.Spec.Replicas = ptr.To[int32](9)
	if c, _ := r.foreignReplicasWriter(context.Background(), wpa, pool, st, rules, wpaT0.Add(2*time.Minute)); c != nil {
		t.Errorf("the autoscaler's own write: %+v, want no conflict", c)
	}
}
