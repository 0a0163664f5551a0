package reconcilers

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
)

var planNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

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

func TestPlanPool(t *testing.T) {
	const timeout = 5 * time.Minute
	tests := map[string]struct {
		members     []*agentsv1beta1.Sandbox
		replicas    int
		strategy    extv1beta1.UpdateStrategyType
		wantCreate  int
		wantDelete  []string
		wantRecheck time.Duration
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
			wantRecheck: timeout - time.Second, // computed before scale-down; a spare wake-up
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
		"members not ready in time are replaced; the others are rechecked when their time is up": {
			members:     []*agentsv1beta1.Sandbox{aged("late", "h1", false, timeout), aged("young", "h1", false, timeout-time.Minute)},
			replicas:    2,
			wantDelete:  []string{"late"},
			wantCreate:  1,
			wantRecheck: time.Minute,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan := planPool(tc.members, tc.replicas, version{hash: "h1", spec: "another spec"}, tc.strategy, planNow, timeout)
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
		})
	}
}

func TestNewPoolMember(t *testing.T) {
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Namespace: "ns"}}
	tmpl.Spec.PodTemplate.Spec.Containers = sandbox().Spec.PodTemplate.Spec.Containers
	sb := newPoolMember(pool, tmpl)

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
	if key, isMember, _ := memberKeyOf(sb); !isMember || key.Pool != "pool" {
		t.Errorf("the warm index does not see a new member as one: %v %v", key, isMember)
	}
}

func TestRefillDelay(t *testing.T) {
	policy := RefillPolicy{QuietPeriod: time.Second, LowWaterPercent: 25}
	members := func(ready, notReady int) []*agentsv1beta1.Sandbox {
		var out []*agentsv1beta1.Sandbox
		for i := range ready + notReady {
			out = append(out, poolMember(fmt.Sprintf("m%d", i), "h1", i < ready, "1"))
		}
		return out
	}
	for name, tc := range map[string]struct {
		policy    RefillPolicy
		claimedAt time.Duration // before planNow; negative: never
		members   []*agentsv1beta1.Sandbox
		want      time.Duration
	}{
		"no claim yet: refill now":                   {policy: policy, claimedAt: -1, members: members(2, 0)},
		"claims arriving: wait out the quiet period": {policy: policy, claimedAt: 300 * time.Millisecond, members: members(5, 0), want: 700 * time.Millisecond},
		"claims paused: refill now":                  {policy: policy, claimedAt: 2 * time.Second, members: members(5, 0)},
		"below the low-water mark: refill now":       {policy: policy, claimedAt: 0, members: members(2, 3)},
		"at the low-water mark: wait":                {policy: policy, claimedAt: 0, members: members(3, 0), want: time.Second},
		"deferral off: refill now":                   {claimedAt: 0, members: members(10, 0)},
		"no replicas: a mark of 0 is never undercut": {policy: policy, claimedAt: 0, members: nil, want: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			replicas := 10
			if tc.members == nil {
				replicas = 0
			}
			got := refillDelay(tc.policy, planNow.Add(-tc.claimedAt), tc.claimedAt >= 0, planNow, tc.members, replicas)
			if got != tc.want {
				t.Errorf("refillDelay = %s, want %s", got, tc.want)
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
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "ns", UID: "pool-uid"}}
	old := newPoolMember(pool, tmpl)
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
			plan := planPool([]*agentsv1beta1.Sandbox{old}, 1, tc.current, tc.strategy, planNow, time.Minute)
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
	existing := sandbox()
	existing.Name, existing.Namespace = "pool-abcde", "ns"
	r := &warmPoolReconciler{Client: newFakeAPI(t, existing)}
	named := func(name string) *agentsv1beta1.Sandbox {
		return &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	}
	used := map[string]bool{"pool-fghij": true}
	for name, want := range map[string]bool{"pool-abcde": true, "pool-fghij": true, "pool-klmno": false} {
		if got := r.nameTaken(context.Background(), named(name), used); got != want {
			t.Errorf("nameTaken(%s) = %t, want %t", name, got, want)
		}
	}
}
