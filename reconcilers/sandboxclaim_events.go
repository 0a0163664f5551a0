package reconcilers

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// The claim controller's watches: the Sandbox informer feeds the warm index and wakes claims;
// a pool or template that appears or changes wakes the claims still waiting for a Sandbox.

// claimSandboxHandler feeds the warmIndex from the Sandbox informer, in event order, and
// wakes claims: the claim bound to a Sandbox whose readiness, IPs or existence changed, and
// the longest-waiting claim when a member becomes available.
type claimSandboxHandler struct {
	index  *warmIndex
	losses *seenLosses
	// shares tracks the claims bound warm, and wakes the claims waiting for a warm share
	// when a member of their pool becomes ready.
	shares *warmShares
}

func claimOf(obj client.Object) (types.NamespacedName, bool) {
	ref := policy.ControllerOf(obj, policy.ClaimKind)
	if ref == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

func (h *claimSandboxHandler) observe(sb *agentsv1beta1.Sandbox, q queue) {
	if waiter, ok := h.index.Observe(sb); ok {
		q.Add(reconcile.Request{NamespacedName: waiter})
	}
	h.shares.observe(sb, false)
}

// memberBecameReady wakes the oldest claim waiting for a warm share of the pool of sb when sb
// is a member that became ready (old is nil on a create).
func (h *claimSandboxHandler) memberBecameReady(old, sb *agentsv1beta1.Sandbox, q queue) {
	key, isMember, ready := policy.MemberKeyOf(sb)
	if !isMember || !ready {
		return
	}
	if old != nil {
		if _, wasMember, wasReady := policy.MemberKeyOf(old); wasMember && wasReady {
			return
		}
	}
	for _, req := range h.shares.wake(poolName(key), 1) {
		q.Add(req)
	}
}

func (h *claimSandboxHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	sb, ok := e.Object.(*agentsv1beta1.Sandbox)
	if !ok {
		return
	}
	h.observe(sb, q)
	h.memberBecameReady(nil, sb, q)
	if claim, ok := claimOf(sb); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

func (h *claimSandboxHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	old, okOld := e.ObjectOld.(*agentsv1beta1.Sandbox)
	cur, okCur := e.ObjectNew.(*agentsv1beta1.Sandbox)
	if !okOld || !okCur {
		return
	}
	h.observe(cur, q)
	h.memberBecameReady(old, cur, q)
	if c := meta.FindStatusCondition(cur.Status.Conditions, agentsv1beta1.ConditionReady); c != nil && c.Reason == agentsv1beta1.ReasonPodLost {
		// Kept until the claim reports it: by the time the claim looks, the Sandbox may be
		// Ready again on the replacement (claimReconciler.reportLoss).
		if claim, ok := claimOf(cur); ok {
			h.losses.record(claim, seenLoss{sandbox: cur.Name, message: c.Message})
		}
	}
	if claimView(old) == claimView(cur) {
		return
	}
	for _, obj := range []client.Object{old, cur} {
		if claim, ok := claimOf(obj); ok {
			q.Add(reconcile.Request{NamespacedName: claim})
		}
	}
}

func (h *claimSandboxHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	h.index.Forget(e.Object.GetNamespace(), e.Object.GetName())
	if sb, ok := e.Object.(*agentsv1beta1.Sandbox); ok {
		h.shares.observe(sb, true)
	}
	if claim, ok := claimOf(e.Object); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

func (h *claimSandboxHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	if claim, ok := claimOf(e.Object); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

// claimView is what a claim reports of its Sandbox; a Sandbox update that leaves it the
// same does not wake the claim.
func claimView(sb *agentsv1beta1.Sandbox) string {
	view := fmt.Sprint(controllerUID(sb), sb.DeletionTimestamp.IsZero(), sb.Status.PodIPs)
	for _, typ := range []string{agentsv1beta1.ConditionReady, agentsv1beta1.ConditionFinished} {
		if c := meta.FindStatusCondition(sb.Status.Conditions, typ); c != nil {
			view += fmt.Sprint("|", c.Status, c.Reason, c.Message, c.LastTransitionTime.Unix())
		}
	}
	return view
}

// unboundClaimsOfPool wakes the claims of a pool that appeared or changed and that still
// wait for a Sandbox (bound claims do not care).
func (r *claimReconciler) unboundClaimsOfPool(ctx context.Context, obj client.Object) []reconcile.Request {
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexes.ClaimPool: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims of pool", "pool", klog.KObj(obj))
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range claims.Items {
		if c.Status.Sandbox.Name == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return reqs
}

// claimsWaitingForShares wakes the claims of the policy's namespace waiting for a warm share.
func (r *claimReconciler) claimsWaitingForShares(_ context.Context, obj client.Object) []reconcile.Request {
	return r.shares.wake(types.NamespacedName{Namespace: obj.GetNamespace()}, bookkeepingWakeBuffer)
}

// requestNames are the names of reqs.
func requestNames(reqs []reconcile.Request) []types.NamespacedName {
	out := make([]types.NamespacedName, len(reqs))
	for i, r := range reqs {
		out[i] = r.NamespacedName
	}
	return out
}

func (r *claimReconciler) unboundClaimsOfTemplate(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := listPoolsOfTemplate(ctx, r.Client, obj)
	var reqs []reconcile.Request
	for i := range pools {
		reqs = append(reqs, r.unboundClaimsOfPool(ctx, &pools[i])...)
	}
	return reqs
}

// seenLoss is a lost pod a bound Sandbox reported: the Sandbox and its PodLost message.
type seenLoss struct {
	sandbox, message string
}

// seenLosses holds, per claim, the last lost pod its Sandbox reported, from the Sandbox watch
// (which delivers every update, where the cache keeps only the latest) until the claim's
// status reported it. It is memory: a restart in between forgets it, as it forgets events.
type seenLosses struct {
	mu sync.Mutex
	m  map[types.NamespacedName]seenLoss
}

func newSeenLosses() *seenLosses { return &seenLosses{m: map[types.NamespacedName]seenLoss{}} }

func (s *seenLosses) record(claim types.NamespacedName, l seenLoss) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[claim] = l
}

func (s *seenLosses) get(claim types.NamespacedName) (seenLoss, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.m[claim]
	return l, ok
}

// clear forgets the claim's loss if it is still l (a later one is kept).
func (s *seenLosses) clear(claim types.NamespacedName, l seenLoss) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[claim] == l {
		delete(s.m, claim)
	}
}

func (s *seenLosses) forget(claim types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, claim)
}
