package reconcilers

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestTemplateCreationWakesWaitingClaims: creating a missing template wakes, through its
// pools, the claims waiting for it with TemplateNotFound, at once rather than at a periodic
// requeue, as the public controller does since v1.0 (kubernetes-sigs/agent-sandbox#1315).
// Bound claims and claims of another template's pools are not woken.
func TestTemplateCreationWakesWaitingClaims(t *testing.T) {
	waiting := func(name, pool string) *extv1beta1.SandboxClaim {
		c := builders.MakeClaim(name, "ns", pool).Obj()
		c.Status.Conditions = []metav1.Condition{{
			Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: extv1beta1.ReasonTemplateNotFound, Message: "SandboxTemplate tmpl not found",
		}}
		return c
	}
	a := newFakeAPI(t,
		builders.MakePool("pool", "ns", "tmpl").Obj(),
		builders.MakePool("second", "ns", "tmpl").Obj(),
		builders.MakePool("other", "ns", "other-tmpl").Obj(),
		waiting("a", "pool"), waiting("b", "second"), waiting("c", "other"),
		builders.MakeClaim("bound", "ns", "pool").StatusSandbox("sb").Obj(),
	)
	r := newClaimReconciler(t, a, nil)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()

	h := handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfTemplate)
	h.Create(context.Background(), event.CreateEvent{Object: builders.MakeTemplate("tmpl", "ns").Obj()}, q)

	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("claims woken (-want +got):\n%s", diff)
	}
}
