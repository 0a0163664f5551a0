package reconcilers

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// aged is a pool member created age ago.
func aged(name, hash string, ready bool, age time.Duration) *agentsv1beta1.Sandbox {
	sb := poolMember(name, hash, ready, "1")
	sb.CreationTimestamp = metav1.NewTime(planNow.Add(-age))
	return sb
}

func failedMember(name string) *agentsv1beta1.Sandbox {
	sb := aged(name, "h1", false, time.Minute)
	sb.Status.Conditions = []metav1.Condition{
		{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonPodFailed},
		{Type: agentsv1beta1.ConditionFinished, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodFailed},
	}
	return sb
}

// A member the public agent-sandbox controller made (test/integration/takeover says what it
// writes) is taken over in place: one patch gives it sandgate's template hash and the
// template's pod metadata and removes that controller's labels, launch-type among them, which
// to the binding guard marks a Sandbox bound before. A refresh that loses a race with another
// writer (the Sandbox controller records the pod name and status of every member it finds at
// start) is tried again shortly, not left until something else wakes the pool.
func TestWarmPoolReconcileTakesOverPublicMembers(t *testing.T) {
	tmpl := builders.MakeTemplate("tmpl", "ns").PodLabel("app", "agent").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").UpdateStrategy(extv1beta1.RecreateUpdateStrategy).UID("pool-uid").Obj()
	member := newPoolMember(pool, tmpl, false)
	member.Name, member.UID = "pool-a", "uid-pool-a"
	public := map[string]string{
		agentsv1beta1.LabelSandboxTemplateHash: "d8550143",
		agentsv1beta1.LabelLaunchType:          agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.LabelCreatedBy:           agentsv1beta1.CreatedByController,
		labelPublicPodTemplateHash:             "70687bf8",
		agentsv1beta1.LabelWarmPoolSandbox:     agentsv1beta1.NameHash(pool.Name),
	}
	for k, v := range public {
		member.Labels[k] = v
		member.Spec.PodTemplate.ObjectMeta.Labels[k] = v
	}
	delete(member.Annotations, agentsv1beta1.AnnotationPodName)
	// The public controller's eviction mark, in the podTemplate.
	member.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{AnnotationSafeToEvict: "true"}
	member.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady,
		LastTransitionTime: metav1.NewTime(planNow),
	}}
	a := newFakeAPI(t, tmpl, pool, member)
	a.FailOnce("patch Sandbox/pool-a", apierrors.NewConflict(schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"},
		"pool-a", errors.New("the object has been modified")))
	clk := clocktesting.NewFakeClock(planNow)
	r := &warmPoolReconciler{Client: a, Metrics: newTestMetrics(t), Clock: clk,
		WarmPool: WarmPoolPolicy{ReadinessGracePeriod: time.Minute}.withDefaults(), pacing: newRefillPacing(),
		expected: newExpectations(clk), activity: newPoolActivity()}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pool"}}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatalf("Reconcile after a lost refresh: %v, want a requeue", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > retryAfterCacheCatchesUp {
		t.Errorf("Reconcile after a lost refresh asks for %+v, want a requeue within %s", res, retryAfterCacheCatchesUp)
	}
	if j := a.Journal(); !slices.Contains(j, "patch Sandbox/pool-a (conflict)") {
		t.Errorf("writes %v, want the refresh patch of pool-a (conflict)", j)
	}

	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	j := a.Journal()
	if !slices.Contains(j, "patch Sandbox/pool-a") {
		t.Errorf("writes %v, want the refresh patch of pool-a", j)
	}
	for _, entry := range j {
		if entry != "patch Sandbox/pool-a" && entry != "patch SandboxWarmPool/pool/status" {
			t.Errorf("unexpected write %q: the member is taken over, not replaced", entry)
		}
	}
	got := &agentsv1beta1.Sandbox{}
	if err := a.Get(context.Background(), client.ObjectKeyFromObject(member), got); err != nil {
		t.Fatal(err)
	}
	hash := policy.TemplateHash(tmpl)
	if got.Labels[agentsv1beta1.LabelSandboxTemplateHash] != hash || policy.SandboxHash(got) != hash {
		t.Errorf("member's template-hash label %q, content hash %s; want both %s", got.Labels[agentsv1beta1.LabelSandboxTemplateHash], policy.SandboxHash(got), hash)
	}
	for _, k := range []string{agentsv1beta1.LabelLaunchType, agentsv1beta1.LabelCreatedBy, labelPublicPodTemplateHash} {
		if v, ok := got.Labels[k]; ok {
			t.Errorf("member keeps the public controller's label %s=%s", k, v)
		}
	}
	if got.Labels[agentsv1beta1.LabelWarmPoolSandbox] != agentsv1beta1.NameHash(pool.Name) {
		t.Errorf("member lost its pool label: %v", got.Labels)
	}
	if got.Annotations[AnnotationSafeToEvict] != "true" {
		t.Errorf("member's annotations %v: the public controller's eviction mark did not move to the metadata", got.Annotations)
	}
}

func TestPlanPool(t *testing.T) {
	const timeout = 5 * time.Minute
	tests := map[string]struct {
		members  []*agentsv1beta1.Sandbox
		replicas int
		strategy extv1beta1.UpdateStrategyType
		// unschedulable are the members whose pods are; maxBatch bounds surplus deletes.
		unschedulable []string
		maxBatch      int
		// podAges, when set, are the ages of the members' pods by member name (the cache's
		// view); a member not in it has no pod. Unset, the grace runs from the member's
		// creation.
		podAges     map[string]time.Duration
		wantCreate  int
		wantDelete  []string
		wantRecheck time.Duration
		wantHeld    int
	}{
		"an empty pool is filled": {
			replicas: 3, wantCreate: 3,
		},
		"a full pool is left alone": {
			members:  []*agentsv1beta1.Sandbox{aged("a", "h1", true, time.Hour), aged("b", "h1", true, time.Hour)},
			replicas: 2,
		},
		"scale-down deletes not-ready members first, then the newest": {
			members: []*agentsv1beta1.Sandbox{
				aged("old", "h1", true, time.Hour), aged("new", "h1", true, time.Minute),
				aged("mid", "h1", true, 30*time.Minute), aged("starting", "h1", false, time.Second),
			},
			replicas:    2,
			wantDelete:  []string{"new", "starting"},
			wantRecheck: timeout - time.Second + graceRequeueSlack, // computed before scale-down; a spare wake-up
		},
		"scale-down under OnReplenish deletes stale members before current ones": {
			members:    []*agentsv1beta1.Sandbox{aged("stale", "h0", true, time.Minute), aged("current", "h1", true, time.Hour)},
			replicas:   1,
			strategy:   extv1beta1.OnReplenishUpdateStrategy,
			wantDelete: []string{"stale"},
		},
		"OnReplenish keeps stale members": {
			members:  []*agentsv1beta1.Sandbox{aged("stale", "h0", true, time.Hour), aged("current", "h1", true, time.Hour)},
			replicas: 2,
			strategy: extv1beta1.OnReplenishUpdateStrategy,
		},
		"Recreate replaces stale members at once": {
			members:    []*agentsv1beta1.Sandbox{aged("stale", "h0", true, time.Hour), aged("current", "h1", true, time.Hour)},
			replicas:   2,
			strategy:   extv1beta1.RecreateUpdateStrategy,
			wantDelete: []string{"stale"},
			wantCreate: 1,
		},
		"failed members are replaced": {
			members:    []*agentsv1beta1.Sandbox{failedMember("failed"), aged("ok", "h1", true, time.Hour)},
			replicas:   2,
			wantDelete: []string{"failed"},
			wantCreate: 1,
		},
		"members not ready past the grace period are replaced; the others are rechecked when their time is up": {
			members: []*agentsv1beta1.Sandbox{aged("late", "h1", false, timeout+time.Second), aged("young", "h1", false, timeout-time.Minute),
				aged("just", "h1", false, timeout)},
			replicas:    3,
			wantDelete:  []string{"late"},
			wantCreate:  1,
			wantRecheck: graceRequeueSlack,
		},
		"unschedulable members past the grace period are held, not replaced": {
			members: []*agentsv1beta1.Sandbox{aged("stuck", "h1", false, timeout+time.Second), aged("pending", "h1", false, timeout+time.Hour),
				aged("ok", "h1", true, time.Hour)},
			unschedulable: []string{"pending", "young"},
			replicas:      3,
			wantDelete:    []string{"stuck"},
			wantCreate:    1,
			wantHeld:      1,
		},
		"a member still without a pod is queued, not stuck: kept past the grace period and looked at a grace period later": {
			members:     []*agentsv1beta1.Sandbox{aged("queued", "h1", false, timeout+time.Hour), aged("ok", "h1", true, time.Hour)},
			podAges:     map[string]time.Duration{"ok": time.Hour},
			replicas:    2,
			wantRecheck: timeout + graceRequeueSlack,
		},
		"the grace runs from the pod's creation": {
			members:     []*agentsv1beta1.Sandbox{aged("late-pod", "h1", false, timeout+time.Hour), aged("stuck", "h1", false, timeout+time.Hour)},
			podAges:     map[string]time.Duration{"late-pod": time.Minute, "stuck": timeout + time.Second},
			replicas:    2,
			wantDelete:  []string{"stuck"},
			wantCreate:  1,
			wantRecheck: timeout - time.Minute + graceRequeueSlack,
		},
		"surplus deletes are bounded by the batch size": {
			members: []*agentsv1beta1.Sandbox{aged("a", "h1", true, time.Hour), aged("b", "h1", true, 2*time.Hour),
				aged("c", "h1", true, 3*time.Hour), aged("d", "h1", true, 4*time.Hour)},
			replicas:   0,
			maxBatch:   2,
			wantDelete: []string{"a", "b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rules := poolRules{grace: timeout, maxBatch: tc.maxBatch, unschedulable: func(sb *agentsv1beta1.Sandbox) bool {
				return slices.Contains(tc.unschedulable, sb.Name)
			}}
			if tc.podAges != nil {
				rules.podCreated = func(sb *agentsv1beta1.Sandbox) (time.Time, bool) {
					age, ok := tc.podAges[sb.Name]
					return planNow.Add(-age), ok
				}
			}
			plan := planPool(tc.members, tc.replicas, version{hash: "h1", spec: "another spec"}, tc.strategy, planNow, rules)
			var deleted []string
			for _, sb := range plan.delete {
				deleted = append(deleted, sb.Name)
			}
			sort.Strings(deleted)
			sort.Strings(tc.wantDelete)
			if diff := cmp.Diff(tc.wantDelete, deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			if plan.create != tc.wantCreate {
				t.Errorf("create = %d, want %d", plan.create, tc.wantCreate)
			}
			if plan.recheckAfter != tc.wantRecheck {
				t.Errorf("recheckAfter = %s, want %s", plan.recheckAfter, tc.wantRecheck)
			}
			if plan.held != tc.wantHeld {
				t.Errorf("held = %d, want %d", plan.held, tc.wantHeld)
			}
		})
	}
}

// A template change of pod metadata only is taken on in place: the members are refreshed,
// not replaced, under either strategy; a change of anything else replaces them under Recreate.
func TestPlanPoolRefreshesMetadataOnlyChanges(t *testing.T) {
	tmpl := builders.MakeTemplate("tmpl", "ns").PodLabel("team", "a").Obj()
	relabelled := builders.MakeTemplate("tmpl", "ns").PodLabel("team", "b").Obj()
	reimaged := builders.MakeTemplate("tmpl", "ns").PodLabel("team", "a").Image("registry.example/agent:2").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").UID("pool-uid").Obj()
	old := newPoolMember(pool, tmpl, false)
	old.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue}}
	at := func(t *extv1beta1.SandboxTemplate) version {
		bp := policy.TemplateBlueprint(t)
		return version{hash: agentsv1beta1.BlueprintHash(&bp), spec: policy.SpecHash(&bp), template: t.Name}
	}
	for name, tc := range map[string]struct {
		current                 version
		strategy                extv1beta1.UpdateStrategyType
		wantRefresh, wantDelete int
	}{
		"metadata only, Recreate":    {current: at(relabelled), strategy: extv1beta1.RecreateUpdateStrategy, wantRefresh: 1},
		"metadata only, OnReplenish": {current: at(relabelled), strategy: extv1beta1.OnReplenishUpdateStrategy, wantRefresh: 1},
		"image, Recreate":            {current: at(reimaged), strategy: extv1beta1.RecreateUpdateStrategy, wantDelete: 1},
		"image, OnReplenish":         {current: at(reimaged), strategy: extv1beta1.OnReplenishUpdateStrategy},
		"unchanged":                  {current: at(tmpl), strategy: extv1beta1.RecreateUpdateStrategy},
		"another template of the same spec, Recreate": {current: at(builders.MakeTemplate("other", "ns").PodLabel("team", "a").Obj()),
			strategy: extv1beta1.RecreateUpdateStrategy, wantDelete: 1},
	} {
		t.Run(name, func(t *testing.T) {
			plan := planPool([]*agentsv1beta1.Sandbox{old}, 1, tc.current, tc.strategy, planNow, poolRules{grace: time.Minute})
			if len(plan.refresh) != tc.wantRefresh || len(plan.delete) != tc.wantDelete || plan.create != tc.wantDelete {
				t.Errorf("refresh %d, delete %d, create %d; want refresh %d, delete and create %d",
					len(plan.refresh), len(plan.delete), plan.create, tc.wantRefresh, tc.wantDelete)
			}
		})
	}
}

func TestMapPatch(t *testing.T) {
	got := mapPatch(map[string]string{"keep": "1", "gone": "x"}, map[string]string{"keep": "2", "new": "y"})
	want := map[string]any{"keep": "2", "gone": nil, "new": "y"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mapPatch (-want +got):\n%s", diff)
	}
}

// A new member's name is one the namespace does not have yet, nor the batch being created:
// the API server would refuse a taken one with 409.
func TestMemberNameTaken(t *testing.T) {
	existing := builders.MakeSandbox("pool-abcde", "ns").Obj()
	r := &warmPoolReconciler{Client: newFakeAPI(t, existing)}
	named := func(name string) *agentsv1beta1.Sandbox { return builders.MakeSandbox(name, "ns").Obj() }
	used := map[string]bool{"pool-fghij": true}
	for name, want := range map[string]bool{"pool-abcde": true, "pool-fghij": true, "pool-klmno": false} {
		if got := r.nameTaken(context.Background(), named(name), used); got != want {
			t.Errorf("nameTaken(%s) = %t, want %t", name, got, want)
		}
	}
}

func TestNewPoolMember(t *testing.T) {
	pool := builders.MakePool("pool", "ns", "tmpl").UID("pool-uid").Obj()
	tmpl := builders.MakeTemplate("tmpl", "ns").Obj()
	sb := newPoolMember(pool, tmpl, false)

	wantLabels := map[string]string{
		agentsv1beta1.LabelWarmPoolSandbox:        agentsv1beta1.NameHash("pool"),
		agentsv1beta1.LabelSandboxTemplateHash:    policy.TemplateHash(tmpl),
		agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash("tmpl"),
	}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if !regexp.MustCompile(`^pool-[a-z0-9]{5}$`).MatchString(sb.Name) || sb.Namespace != "ns" {
		t.Errorf("name %q, namespace %q: want pool-<5 random characters> in ns", sb.Name, sb.Namespace)
	}
	if got := policy.SandboxHash(sb); got != sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] {
		t.Errorf("the member hashes to %s, its label says %s", got, sb.Labels[agentsv1beta1.LabelSandboxTemplateHash])
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != "pool-uid" || ref.Kind != warmPoolKind {
		t.Errorf("controller = %+v, want the pool", ref)
	}
	if key, isMember, _ := policy.MemberKeyOf(sb); !isMember || key.Pool != "pool" {
		t.Errorf("the warm index does not see a new member as one: %v %v", key, isMember)
	}
}
