package reconcilers

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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
	"github.com/sandgate-dev/sandgate/test/builders"
)

// A member the public agent-sandbox controller made (test/integration/takeover says what it
// writes) is taken over in place: one patch gives it sandgate's template hash and the
// template's pod metadata and removes that controller's labels, launch-type among them, which
// to the binding guard marks a Sandbox bound before. A refresh that loses a race with another
// writer (the Sandbox controller records the pod name and status of every member it finds at
// start) is tried again shortly, not left until something else wakes the pool.
func TestWarmPoolReconcileTakesOverPublicMembers(t *testing.T) {
	tmpl := builders.MakeTemplate("tmpl", "ns").PodLabel("app", "agent").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj()
	pool.UID = "pool-uid"
	member := newPoolMember(pool, tmpl)
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
	member.Status.Conditions = []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady,
		LastTransitionTime: metav1.NewTime(planNow),
	}}
	a := newFakeAPI(t, tmpl, pool, member)
	a.FailOnce("patch Sandbox/pool-a", apierrors.NewConflict(schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"},
		"pool-a", errors.New("the object has been modified")))
	clk := clocktesting.NewFakeClock(planNow)
	r := &warmPoolReconciler{Client: a, Metrics: newTestMetrics(t), Clock: clk, MemberReadyTimeout: time.Minute,
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
}
