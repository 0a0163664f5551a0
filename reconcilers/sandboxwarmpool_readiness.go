package reconcilers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// WarmPoolPolicy is the public agent-sandbox controller's warm pool settings, with its
// meaning (v0.5.6, extensions/controllers/sandboxwarmpool_controller.go); the zero value is
// its defaults.
type WarmPoolPolicy struct {
	// DisableEviction leaves the pods of idle members unmarked; by default they carry
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "true" until a claim takes them
	// (AnnotationSafeToEvict).
	DisableEviction bool
	// ReadinessGracePeriod is how long a member may stay not Ready after its pod was created
	// before it is replaced, or
	// held when its pod is unschedulable; 0 means DefaultReadinessGracePeriod.
	ReadinessGracePeriod time.Duration
	// UnschedulableRecheckInterval is how often a pool holding unschedulable members past the
	// grace period looks at them again; 0 means DefaultUnschedulableRecheckInterval.
	UnschedulableRecheckInterval time.Duration
	// MaxBatchSize bounds the members one reconcile creates, and the surplus members it
	// deletes; 0 means DefaultMaxBatchSize.
	MaxBatchSize int
	// MaxRefillRate paces a pool's creates (per second, per pool) with a token bucket holding
	// at most one second of them; 0 leaves them unpaced.
	MaxRefillRate float64
	// ReplenishDelay defers a pool's creates after members leave it, re-armed by every
	// departure; 0 turns it off. It adds to RefillPolicy's quiet period, it does not replace it.
	ReplenishDelay time.Duration
}

// The public controller's defaults of WarmPoolPolicy.
const (
	DefaultReadinessGracePeriod         = 5 * time.Minute
	DefaultUnschedulableRecheckInterval = time.Minute
	DefaultMaxBatchSize                 = 300
)

// withDefaults fills in the zero fields.
func (p WarmPoolPolicy) withDefaults() WarmPoolPolicy {
	if p.ReadinessGracePeriod <= 0 {
		p.ReadinessGracePeriod = DefaultReadinessGracePeriod
	}
	if p.UnschedulableRecheckInterval <= 0 {
		p.UnschedulableRecheckInterval = DefaultUnschedulableRecheckInterval
	}
	if p.MaxBatchSize <= 0 {
		p.MaxBatchSize = DefaultMaxBatchSize
	}
	return p
}

// Readiness grace and the unschedulable hold, as the public controller has them but for when the
// grace starts: a member not Ready for longer than the grace period (counted from its pod's
// creation, graceStart: the public controller counts from the member's) is stuck and replaced,
// unless its pod is unschedulable (PodScheduled=False, reason Unschedulable): a replacement
// would be just as unschedulable, and deleting and recreating it under a capacity shortfall
// only churns the API server and the scheduler. Such a member is held, still counted towards
// replicas, and looked at again every UnschedulableRecheckInterval; the pool says so with a
// WarmPoolNotProgressing Warning event, and with WarmPoolProgressing once none is held. A
// member whose pod is missing or being deleted is not unschedulable: it is replaced.

// Events of the unschedulable hold, one per transition (the public controller's reasons).
const (
	EventWarmPoolNotProgressing = "WarmPoolNotProgressing"
	EventWarmPoolProgressing    = "WarmPoolProgressing"
)

// graceRequeueSlack lands the look at a member whose grace runs out after the deadline, and
// graceRequeueJitter spreads the looks of pools filled together (the public controller's 2s
// and +50%).
const (
	graceRequeueSlack  = 2 * time.Second
	graceRequeueJitter = 0.5
)

// graceRecheck is when to look at a pool whose first not-ready member's grace (and slack)
// ends in left.
func graceRecheck(left time.Duration) time.Duration {
	return wait.Jitter(left, graceRequeueJitter)
}

// memberPod is the member's pod as the cache shows it, if it has one that is not being
// deleted.
func (r *warmPoolReconciler) memberPod(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Pod, bool) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: podNameFor(sb)}, pod); err != nil {
		return nil, false
	}
	if !pod.DeletionTimestamp.IsZero() || !isControlledBy(pod, sb) {
		return nil, false
	}
	return pod, true
}

// podPlaced reports whether the member's pod, as the cache shows it, is on a node.
func (r *warmPoolReconciler) podPlaced(ctx context.Context, sb *agentsv1beta1.Sandbox) bool {
	pod, ok := r.memberPod(ctx, sb)
	return ok && pod.Spec.NodeName != ""
}

// podPlacement passes the pod updates that place a pod on a node.
var podPlacement = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		cur, okCur := e.ObjectNew.(*corev1.Pod)
		return okOld && okCur && old.Spec.NodeName == "" && cur.Spec.NodeName != ""
	},
}

// poolOfPlacedPod maps a placed pod to the pool of the unbound member that controls it.
func (r *warmPoolReconciler) poolOfPlacedPod(ctx context.Context, obj client.Object) []reconcile.Request {
	ref := policy.ControllerOf(obj, policy.SandboxKind)
	if ref == nil {
		return nil
	}
	sb := &agentsv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, sb); err != nil || sb.UID != ref.UID {
		return nil
	}
	pool := policy.ControllerOf(sb, policy.PoolKind)
	if pool == nil {
		return nil // bound, or no member
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: sb.Namespace, Name: pool.Name}}}
}

// podCreated is when the member's pod was created, and false when it has none.
func (r *warmPoolReconciler) podCreated(ctx context.Context, sb *agentsv1beta1.Sandbox) (time.Time, bool) {
	pod, ok := r.memberPod(ctx, sb)
	if !ok {
		return time.Time{}, false
	}
	return pod.CreationTimestamp.Time, true
}

// podUnschedulable reports whether the member's pod, as the cache shows it, is unschedulable.
func (r *warmPoolReconciler) podUnschedulable(ctx context.Context, sb *agentsv1beta1.Sandbox) bool {
	pod, ok := r.memberPod(ctx, sb)
	if !ok {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// noteHold sends an event when the pool starts or stops holding unschedulable members.
func (r *warmPoolReconciler) noteHold(pool *extv1beta1.SandboxWarmPool, held, replicas int) {
	nn := client.ObjectKeyFromObject(pool)
	_, was := r.holding.Load(nn)
	switch {
	case held > 0 && !was:
		r.holding.Store(nn, true)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, EventWarmPoolNotProgressing, "Reconciling", "%s", fmt.Sprintf(
				"%d/%d sandboxes are unschedulable past the %s readiness grace period; holding them instead of replacing (replacements would be equally unschedulable)",
				held, replicas, r.WarmPool.ReadinessGracePeriod))
		}
	case held == 0 && was:
		r.holding.Delete(nn)
		if r.Recorder != nil {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, EventWarmPoolProgressing, "Reconciling", "Warm pool is progressing again")
		}
	}
}
