package reconcilers

import (
	"context"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// What wakes a WarmPoolAutoscaler, and what feeds its demand estimate:
//   - its own spec changes (not its status writes);
//   - a claim of its pool: admitted (the demand recorder's wake-up, through a channel,
//     before the claim is stored) or created (the claim informer: counted when this process
//     did not admit it, after a failover for every claim in the cache);
//   - its pool: created, deleted (its demand is forgotten), or its spec changed (another
//     writer of the replicas);
//   - another autoscaler of its pool created or deleted, and an HPA targeting its pool
//     (the writers it must not fight);
//   - the pool's members, which wake nothing but measure the start-up time.
//
// Timers only follow decisions already taken: a scale-down held by its window, a paced
// step, a schedule's next boundary, the demand estimate falling as arrivals age out.

// autoscalerWakeBuffer bounds the pools with a wake-up in flight.
const autoscalerWakeBuffer = 1024

// memberSeenFresh is how soon after its creationTimestamp a member must be seen for the time
// it was seen to stand for its creation (finer than the timestamp's second).
const memberSeenFresh = 2 * time.Second

// SetupWithManager registers the controller, its watches and the demand recorder's wake-up.
func (r *autoscalerReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.wake = make(chan event.GenericEvent, autoscalerWakeBuffer)
	r.Demand.SetNotify(r.notify)
	spawned := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).
		Named(autoscalerControllerName).
		WithOptions(opts).
		For(&autoscalingv1alpha1.WarmPoolAutoscaler{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&autoscalingv1alpha1.WarmPoolAutoscaler{}, handler.EnqueueRequestsFromMapFunc(r.autoscalersOfSamePool),
			builder.WithPredicates(spawned)).
		Watches(&extv1beta1.SandboxWarmPool{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
				r.enqueue(ctx, q, r.autoscalersOf(ctx, e.Object))
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
				r.enqueue(ctx, q, r.autoscalersOf(ctx, e.ObjectNew))
			},
			DeleteFunc: r.poolDeleted,
		}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&extv1beta1.SandboxClaim{}, handler.Funcs{CreateFunc: r.claimCreated}).
		Watches(&agentsv1beta1.Sandbox{}, handler.Funcs{CreateFunc: r.memberCreated, UpdateFunc: r.memberUpdated, DeleteFunc: r.memberDeleted}).
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, handler.EnqueueRequestsFromMapFunc(r.autoscalersOfHPATarget)).
		WatchesRawSource(source.Channel(r.wake, handler.EnqueueRequestsFromMapFunc(r.woken))).
		Complete(r)
}

// notify is the demand recorder's wake-up for an arrival at pool: one event in flight per
// pool, so a burst of claims is one wake-up per reconcile, not one per claim. Non-blocking:
// it runs on the webhook's path.
func (r *autoscalerReconciler) notify(pool types.NamespacedName) {
	if _, inFlight := r.wakePending.LoadOrStore(pool, struct{}{}); inFlight {
		return
	}
	obj := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name}}
	select {
	case r.wake <- event.GenericEvent{Object: obj}:
	default:
		// Full: a thousand pools wait already. The claim's informer create wakes this one.
		r.wakePending.Delete(pool)
	}
}

// woken maps a wake-up to the pool's autoscalers. The pool's next arrival sends another
// wake-up from here on: the reconcile it causes comes after this one.
func (r *autoscalerReconciler) woken(ctx context.Context, obj client.Object) []reconcile.Request {
	r.wakePending.Delete(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	return r.autoscalersOf(ctx, obj)
}

func (r *autoscalerReconciler) enqueue(_ context.Context, q queue, reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// poolDeleted forgets the pool's demand and wakes its autoscalers (PoolNotFound).
func (r *autoscalerReconciler) poolDeleted(ctx context.Context, e event.DeleteEvent, q queue) {
	r.Demand.Forget(types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
	r.enqueue(ctx, q, r.autoscalersOf(ctx, e.Object))
}

// autoscalersOf maps a pool to its autoscalers.
func (r *autoscalerReconciler) autoscalersOf(ctx context.Context, pool client.Object) []reconcile.Request {
	return r.autoscalersOfPool(ctx, pool.GetNamespace(), pool.GetName())
}

func (r *autoscalerReconciler) autoscalersOfPool(ctx context.Context, ns, pool string) []reconcile.Request {
	var list autoscalingv1alpha1.WarmPoolAutoscalerList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexes.AutoscalerPool: pool}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the autoscalers of a pool", "pool", klog.KRef(ns, pool))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, a := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
	}
	return reqs
}

// autoscalersOfSamePool wakes the other autoscalers of a pool when one comes or goes: the
// first one created scales it.
func (r *autoscalerReconciler) autoscalersOfSamePool(ctx context.Context, obj client.Object) []reconcile.Request {
	a, ok := obj.(*autoscalingv1alpha1.WarmPoolAutoscaler)
	if !ok {
		return nil
	}
	return r.autoscalersOfPool(ctx, a.Namespace, a.Spec.PoolRef.Name)
}

// autoscalersOfHPATarget wakes the autoscalers of the pool an HPA targets (before and after
// an update: both are mapped).
func (r *autoscalerReconciler) autoscalersOfHPATarget(ctx context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, pool := range hpaTargetPools(obj) {
		reqs = append(reqs, r.autoscalersOfPool(ctx, obj.GetNamespace(), pool)...)
	}
	return reqs
}

// claimCreated counts a claim the informer shows: the merge rule of internal/demand decides
// whether it is new (another replica admitted it, or it was admitted before this process
// led), and only a new arrival wakes the pool's autoscalers (the admission's wake-up did).
func (r *autoscalerReconciler) claimCreated(ctx context.Context, e event.CreateEvent, q queue) {
	claim, ok := e.Object.(*extv1beta1.SandboxClaim)
	if !ok || claim.Spec.WarmPoolRef.Name == "" {
		return
	}
	at, ok := claimTimestamp(claim, agentsv1beta1.AnnotationWebhookFirstObservedAt)
	if !ok {
		at = claim.CreationTimestamp.Time
	}
	pool := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}
	if r.Demand.Created(pool, at) {
		r.enqueue(ctx, q, r.autoscalersOfPool(ctx, pool.Namespace, pool.Name))
	}
}

// memberPool is the pool that controls sb, if any.
func memberPool(sb client.Object) (types.NamespacedName, bool) {
	ref := policy.ControllerOf(sb, policy.PoolKind)
	if ref == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: sb.GetNamespace(), Name: ref.Name}, true
}

func sandboxReady(obj client.Object) (*metav1.Condition, bool) {
	sb, ok := obj.(*agentsv1beta1.Sandbox)
	if !ok {
		return nil, false
	}
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return c, c != nil && c.Status == metav1.ConditionTrue
}

// memberCreated starts measuring a member seen as it was created, or measures one seen Ready
// already (the informer's listing after a failover: its Ready transition time).
func (r *autoscalerReconciler) memberCreated(_ context.Context, e event.CreateEvent, _ queue) {
	pool, ok := memberPool(e.Object)
	if !ok {
		return
	}
	created := e.Object.GetCreationTimestamp().Time
	if cond, ready := sandboxReady(e.Object); ready {
		r.Demand.MemberReady(pool, e.Object.GetUID(), created, cond.LastTransitionTime.Time)
		return
	}
	seen := r.Clock.Now()
	if seen.Sub(created) > memberSeenFresh {
		seen = created
	}
	r.Demand.MemberStarting(pool, e.Object.GetUID(), seen)
}

// memberUpdated measures a member that turned Ready, as it is seen, and forgets one a claim
// took before it was Ready.
func (r *autoscalerReconciler) memberUpdated(_ context.Context, e event.UpdateEvent, _ queue) {
	oldPool, wasMember := memberPool(e.ObjectOld)
	pool, isMember := memberPool(e.ObjectNew)
	if !isMember {
		if wasMember {
			r.Demand.MemberGone(oldPool, e.ObjectNew.GetUID())
		}
		return
	}
	if _, wasReady := sandboxReady(e.ObjectOld); !wasReady {
		if _, ready := sandboxReady(e.ObjectNew); ready {
			r.Demand.MemberReady(pool, e.ObjectNew.GetUID(), e.ObjectNew.GetCreationTimestamp().Time, r.Clock.Now())
		}
	}
}

func (r *autoscalerReconciler) memberDeleted(_ context.Context, e event.DeleteEvent, _ queue) {
	if pool, ok := memberPool(e.Object); ok {
		r.Demand.MemberGone(pool, e.Object.GetUID())
	}
}
