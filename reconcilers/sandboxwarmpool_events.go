package reconcilers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// memberEventHandler wakes the pool that controls (or controlled) a Sandbox when the
// Sandbox's part in the pool changes: created, deleted, ready or not, bound away, relabelled.
// It also tells the pool's expectations what the informer has seen.
type memberEventHandler struct {
	expected *expectations
}

func poolOf(obj client.Object) (types.NamespacedName, bool) {
	ref := policy.ControllerOf(obj, policy.PoolKind)
	if ref == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

func (h *memberEventHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	if pool, ok := poolOf(e.Object); ok {
		h.expected.observe(pool, createItem(sandboxKind, e.Object.GetName()))
		q.Add(reconcile.Request{NamespacedName: pool})
	}
}

func (h *memberEventHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	oldSb, okOld := e.ObjectOld.(*agentsv1beta1.Sandbox)
	cur, okCur := e.ObjectNew.(*agentsv1beta1.Sandbox)
	if !okOld || !okCur {
		return
	}
	membership := controllerUID(oldSb) == controllerUID(cur) && memberFailed(oldSb) == memberFailed(cur) &&
		oldSb.Labels[agentsv1beta1.LabelSandboxTemplateHash] == cur.Labels[agentsv1beta1.LabelSandboxTemplateHash] &&
		oldSb.DeletionTimestamp.IsZero() == cur.DeletionTimestamp.IsZero()
	// Placement frees room for the refill to start another member (startingRoom), as Ready
	// does: the pod's placement wakes the pool (poolOfPlacedPod); a node in the status, which
	// comes with Ready or 5 s later (startingUp), does too.
	readiness := meta.IsStatusConditionTrue(oldSb.Status.Conditions, agentsv1beta1.ConditionReady) ==
		meta.IsStatusConditionTrue(cur.Status.Conditions, agentsv1beta1.ConditionReady) &&
		(oldSb.Status.NodeName == "") == (cur.Status.NodeName == "")
	if membership && readiness {
		return
	}
	for _, obj := range []client.Object{oldSb, cur} {
		pool, ok := poolOf(obj)
		switch {
		case !ok:
		case membership || boundAway(oldSb, cur):
			// Only readiness or placement changed, which only status.readyReplicas and the
			// refill's room show, or a claim took
			// the member, which the pool answers only once claims pause (see RefillPolicy):
			// the wake-up waits, so that a burst of claims, or the members becoming ready
			// after a refill, cost the pool one status write between them rather than one
			// each.
			q.AddAfter(reconcile.Request{NamespacedName: pool}, memberReadinessDelay)
		default:
			q.Add(reconcile.Request{NamespacedName: pool})
		}
	}
}

// boundAway reports whether a claim took the member: its controller went from a pool to a
// claim.
func boundAway(old, cur *agentsv1beta1.Sandbox) bool {
	return policy.ControllerOf(old, policy.PoolKind) != nil && policy.ControllerOf(cur, policy.ClaimKind) != nil
}

// memberReadinessDelay is how long a pool's wake-up for a member's readiness change waits to
// coalesce with others (see memberEventHandler.Update).
const memberReadinessDelay = time.Second

func (h *memberEventHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	if pool, ok := poolOf(e.Object); ok {
		h.expected.observe(pool, deleteItem(e.Object.GetName()))
		q.Add(reconcile.Request{NamespacedName: pool})
	}
}

func (h *memberEventHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	if pool, ok := poolOf(e.Object); ok {
		q.Add(reconcile.Request{NamespacedName: pool})
	}
}
