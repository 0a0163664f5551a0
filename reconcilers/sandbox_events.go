package reconcilers

import (
	"context"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandgate-dev/sandgate/api/policy"
)

// Decisions on pod events, the values of sandgate_sandbox_pod_events_total's label.
const (
	wakeImmediate = "immediate"
	wakeDelayed   = "delayed"
	wakeIgnored   = "ignored"
)

// DefaultPodProgressDelay is the default sandboxReconciler.PodProgressDelay: long enough for
// a pod's start-up steps to coalesce, short enough that the steps of a slow-starting pod show
// up promptly once StartupReportDelay has passed.
const DefaultPodProgressDelay = time.Second

// StartupReportDelay is how old a starting pod must be before its Sandbox's status shows the
// pod's start-up steps (startingUp): the pod start-up latency Kubernetes holds itself to (SIG
// Scalability's SLO: 5 s at the 99th percentile for a pod whose image is on the node), so that
// a pod that starts as the SLO says has its steps (scheduled, node, IPs, Running) written
// once, with its Ready; one that takes longer (an image pull) shows them 5 s in.
const StartupReportDelay = 5 * time.Second

// podWake classifies a pod update by what it can change in the Sandbox's status:
//   - immediate: readiness, termination (phase Succeeded/Failed) — what users wait for — and
//     a pod becoming unschedulable (PodScheduled turning False), which claims act on: they
//     take no starting member whose pod fits on no node (startable);
//   - delayed: start-up progress (scheduled, node, IPs, phase Pending→Running), and every
//     change of a pod being deleted: status shows it, but it is never worth a reconcile of
//     its own when the Ready transition (or the pod's removal) follows within the delay;
//   - ignored: everything else (ContainersReady, Initialized, container statuses, labels
//     the controller itself patched, resourceVersion-only resyncs).
func podWake(old, cur *corev1.Pod) string {
	// A new UID under the same name is another pod: the watch missed a deletion (a relist).
	urgent := podReady(old) != podReady(cur) || terminal(old) != terminal(cur) || old.UID != cur.UID ||
		unschedulable(old) != unschedulable(cur)
	progress := old.Status.Phase != cur.Status.Phase ||
		old.Spec.NodeName != cur.Spec.NodeName ||
		!reflect.DeepEqual(old.Status.PodIPs, cur.Status.PodIPs) || old.Status.PodIP != cur.Status.PodIP ||
		!equality.Semantic.DeepEqual(podCondition(old, corev1.PodScheduled), podCondition(cur, corev1.PodScheduled)) ||
		old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero() ||
		controllerUID(old) != controllerUID(cur)
	switch {
	case !urgent && !progress:
		return wakeIgnored
	case urgent && cur.DeletionTimestamp.IsZero():
		return wakeImmediate
	default:
		return wakeDelayed
	}
}

// unschedulable reports whether the scheduler found no node for p (PodScheduled False). The
// scheduler's later retries change only the condition's message, which is progress.
func unschedulable(p *corev1.Pod) bool {
	return podCondition(p, corev1.PodScheduled)[0] == string(corev1.ConditionFalse)
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podCondition returns the parts of a pod condition the Sandbox mirrors.
func podCondition(p *corev1.Pod, typ corev1.PodConditionType) [3]string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return [3]string{string(c.Status), c.Reason, c.Message}
		}
	}
	return [3]string{}
}

// sandboxRequest maps a child to the Sandbox that controls it.
func sandboxRequest(obj client.Object) (reconcile.Request, bool) {
	ref := policy.ControllerOf(obj, policy.SandboxKind)
	if ref == nil {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}, true
}

// sandboxPriorities says at which priority a Sandbox's reconciles are queued: an unbound
// pool member's in the background, every other Sandbox's (a claim's, whether cold-started or
// bound from the pool, and a Sandbox of its own) on the claim path. A pool refilling hundreds
// of members must not hold up the Sandbox a claim waits for (queue.go). The events of a
// Sandbox's pod and Service take the Sandbox's priority, as its own last event told it: a
// bound member's pod still carries the pool's label until its claim is Ready.
type sandboxPriorities struct {
	background sync.Map // types.NamespacedName of an unbound pool member → struct{}
}

// observe records what sb is and returns its priority.
func (p *sandboxPriorities) observe(sb client.Object) int {
	nn := types.NamespacedName{Namespace: sb.GetNamespace(), Name: sb.GetName()}
	if policy.ControllerOf(sb, policy.PoolKind) != nil {
		p.background.Store(nn, struct{}{})
		return priorityBackground
	}
	p.background.Delete(nn)
	return priorityClaimPath
}

// of is the priority of the named Sandbox's reconciles.
func (p *sandboxPriorities) of(nn types.NamespacedName) int {
	if p == nil {
		return priorityClaimPath
	}
	if _, ok := p.background.Load(nn); ok {
		return priorityBackground
	}
	return priorityClaimPath
}

func (p *sandboxPriorities) forget(nn types.NamespacedName) { p.background.Delete(nn) }

// sandboxEventHandler queues a Sandbox's own events, as controller-runtime's
// EnqueueRequestForObject does, at the Sandbox's priority.
type sandboxEventHandler struct {
	priorities *sandboxPriorities
}

func requestFor(obj client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

func (h *sandboxEventHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	addWithPriority(q, requestFor(e.Object), h.priorities.observe(e.Object), 0)
}

func (h *sandboxEventHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	addWithPriority(q, requestFor(e.ObjectNew), h.priorities.observe(e.ObjectNew), 0)
}

func (h *sandboxEventHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	req := requestFor(e.Object)
	h.priorities.forget(req.NamespacedName)
	addWithPriority(q, req, priorityClaimPath, 0)
}

func (h *sandboxEventHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	req := requestFor(e.Object)
	addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
}

// podEventHandler wakes the controlling Sandbox of a pod as podWake decides. With
// controller-runtime's priority queue a delayed wake-up merges with any earlier one for the
// same Sandbox, so a pod's start-up costs one reconcile, not one per kubelet status step.
type podEventHandler struct {
	expected   *expectations
	pods       *podMemories
	delay      time.Duration
	metrics    *Metrics
	priorities *sandboxPriorities
}

func (h *podEventHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	req, ok := sandboxRequest(e.Object)
	if !ok {
		return
	}
	if h.expected.observe(req.NamespacedName, createOf(e.Object)) {
		// The reconcile that created the pod knows it: the pod's own status updates, or that
		// reconcile's requeue, bring the Sandbox's status up to date.
		h.metrics.podEvent(wakeIgnored)
		return
	}
	h.metrics.podEvent(wakeImmediate)
	addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
}

func (h *podEventHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	old, okOld := e.ObjectOld.(*corev1.Pod)
	cur, okCur := e.ObjectNew.(*corev1.Pod)
	if !okOld || !okCur {
		return
	}
	decision := podWake(old, cur)
	h.metrics.podEvent(decision)
	if decision == wakeIgnored {
		return
	}
	for _, obj := range []client.Object{old, cur} { // an owner change wakes both owners
		req, ok := sandboxRequest(obj)
		if !ok {
			continue
		}
		after := time.Duration(0)
		if decision != wakeImmediate {
			after = h.delay
		}
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), after)
	}
}

func (h *podEventHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	if req, ok := sandboxRequest(e.Object); ok {
		h.expected.observe(req.NamespacedName, createOf(e.Object)) // its create event will never come
		if pod, ok := e.Object.(*corev1.Pod); ok {
			// Its last state says how it went (evicted, preempted, ...), which the Sandbox
			// reports if it was its running pod: the cache will not show it again.
			gone := goneP{name: pod.Name, uid: pod.UID, how: fate(pod)}
			h.pods.update(req.NamespacedName, func(m *podMemory) { m.gone = gone })
		}
		h.metrics.podEvent(wakeImmediate)
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
	}
}

func (h *podEventHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	if req, ok := sandboxRequest(e.Object); ok {
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
	}
}

// serviceEventHandler wakes the controlling Sandbox when its Service appears (not by the
// Sandbox's own hand), goes, starts going, or has its spec changed.
type serviceEventHandler struct {
	expected   *expectations
	priorities *sandboxPriorities
}

func (h *serviceEventHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	if req, ok := sandboxRequest(e.Object); ok && !h.expected.observe(req.NamespacedName, createOf(e.Object)) {
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
	}
}

func (h *serviceEventHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	old, okOld := e.ObjectOld.(*corev1.Service)
	cur, okCur := e.ObjectNew.(*corev1.Service)
	if !okOld || !okCur {
		return
	}
	if equality.Semantic.DeepEqual(old.Spec, cur.Spec) && old.DeletionTimestamp.IsZero() == cur.DeletionTimestamp.IsZero() &&
		controllerUID(old) == controllerUID(cur) {
		return
	}
	for _, obj := range []client.Object{old, cur} {
		if req, ok := sandboxRequest(obj); ok {
			addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
		}
	}
}

func (h *serviceEventHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	if req, ok := sandboxRequest(e.Object); ok {
		h.expected.observe(req.NamespacedName, createOf(e.Object))
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
	}
}

func (h *serviceEventHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	if req, ok := sandboxRequest(e.Object); ok {
		addWithPriority(q, req, h.priorities.of(req.NamespacedName), 0)
	}
}
