package reconcilers

// Warm shares of ClaimPolicies, decided when a claim is served (docs/fair-share.md). A claim
// of a pool that some policy of its namespace shares among tenants takes a ready member only
// if every such policy lets its tenant hold one more (fairshare.DecideWarm); otherwise it is
// served cold at once (whenBeyondWarmShare: ServeCold) or waits (Wait). Only the leader serves
// claims, so what it decides here, with what it is binding, is the whole truth: holdings are
// the claims of the pool bound to a warm member (from the Sandbox informer) plus the binds
// this process decided and has not seen in its cache yet, and a decision and the registration
// of its bind happen under one lock, so two workers never both take the last member of a share.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// shareWaitRecheck is how often a claim waiting for its warm share looks again when nothing
// woke it: a safety net under the wake-ups (a member ready, a claim gone, a policy changed).
const shareWaitRecheck = 5 * time.Second

// warmShares is what the claim controller keeps for warm shares.
type warmShares struct {
	mu sync.Mutex
	// warmBound are the claims a warm member is bound to, as the Sandbox informer shows.
	warmBound map[types.UID]bool
	// inflight are the claims this process decided may take a warm member and is binding, or
	// bound, until the informer shows the binding.
	inflight map[types.UID]bool
	// waiting are the claims waiting for their share (Wait), per pool, oldest first.
	waiting map[types.NamespacedName][]types.NamespacedName
}

func newWarmShares() *warmShares {
	return &warmShares{warmBound: map[types.UID]bool{}, inflight: map[types.UID]bool{}, waiting: map[types.NamespacedName][]types.NamespacedName{}}
}

// observe records whether sb is a warm member bound to a claim.
func (w *warmShares) observe(sb *agentsv1beta1.Sandbox, deleted bool) {
	uid := types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
	if w == nil || uid == "" {
		return
	}
	warm := !deleted && sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm &&
		policy.IsControlledBy(sb, policy.ClaimKind, uid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if warm {
		w.warmBound[uid] = true
		delete(w.inflight, uid)
	} else {
		delete(w.warmBound, uid)
	}
}

// isWarmBound reports whether the informer shows a warm member bound to the claim.
func (w *warmShares) isWarmBound(uid types.UID) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.warmBound[uid]
}

// wake returns up to n claims waiting for a share of pool (every one of the namespace's pools
// when pool.Name is ""), oldest first, and forgets them: a claim still beyond its share waits
// again, at the end.
func (w *warmShares) wake(pool types.NamespacedName, n int) []reconcile.Request {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []reconcile.Request
	for p, claims := range w.waiting {
		if p.Namespace != pool.Namespace || (pool.Name != "" && p.Name != pool.Name) {
			continue
		}
		k := min(n, len(claims))
		for _, c := range claims[:k] {
			out = append(out, reconcile.Request{NamespacedName: c})
		}
		w.waiting[p] = claims[k:]
		if len(w.waiting[p]) == 0 {
			delete(w.waiting, p)
		}
	}
	return out
}

func (w *warmShares) wait(pool, claim types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.waiting[pool] {
		if c == claim {
			return
		}
	}
	w.waiting[pool] = append(w.waiting[pool], claim)
}

// forget drops a claim that is gone, or served.
func (w *warmShares) forget(claim types.NamespacedName, uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if uid != "" {
		delete(w.inflight, uid)
	}
	for p, claims := range w.waiting {
		for i, c := range claims {
			if c == claim {
				w.waiting[p] = append(claims[:i:i], claims[i+1:]...)
				break
			}
		}
	}
}

// sharingPolicies are the ClaimPolicies of ns that give a tenant a share of pool, by name.
func (r *claimReconciler) sharingPolicies(ctx context.Context, ns, pool string) ([]tenancyv1alpha1.ClaimPolicy, error) {
	var list tenancyv1alpha1.ClaimPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing ClaimPolicies: %w", err)
	}
	var out []tenancyv1alpha1.ClaimPolicy
	for _, p := range list.Items {
		if fairshare.HasWarmShares(&p, pool) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// decideWarmShare decides whether the claim may take a warm member of key's pool, and which
// (fairshare.DecideWarm: a ready one, else a starting one; or a starting one only, when the
// ready ones are other tenants' guarantees). When it may, it is counted as holding one until
// done(bound) says the bind did not happen. A claim of a pool no policy shares is not looked
// at.
func (r *claimReconciler) decideWarmShare(ctx context.Context, s *claimStep, key memberKey) (take fairshare.WarmTake, notWarm *fairshare.NotWarm, done func(bound bool), err error) {
	noop := func(bool) {}
	if r.shares == nil {
		return fairshare.TakeAny, nil, noop, nil
	}
	policies, err := r.sharingPolicies(ctx, key.Namespace, key.Pool)
	if err != nil || len(policies) == 0 {
		return fairshare.TakeAny, nil, noop, err
	}
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(key.Namespace), client.MatchingFields{indexes.ClaimPool: key.Pool}); err != nil {
		return fairshare.TakeAny, nil, noop, fmt.Errorf("listing the claims of pool %s: %w", key.Pool, err)
	}
	// A claim takes a ready member, else a starting one (serve): both are the pool's warm
	// members that other tenants' guarantees may still need, the ready ones first.
	available, starting := r.Index.Counts(key)
	id := fairshare.IdentityOf(s.claim)
	r.shares.mu.Lock()
	defer r.shares.mu.Unlock()
	for i := range policies {
		p := &policies[i]
		held := map[string]int32{}
		for j := range claims.Items {
			c := &claims.Items[j]
			if c.UID != s.claim.UID && (r.shares.warmBound[c.UID] || r.shares.inflight[c.UID]) {
				held[fairshare.TenantOf(p, fairshare.IdentityOf(c))]++
			}
		}
		st := fairshare.WarmState{Tenant: fairshare.TenantOf(p, id), Held: held, Ready: int32(available), Starting: int32(starting)}
		t, nw := fairshare.DecideWarm(p, key.Pool, st)
		if nw != nil {
			return fairshare.TakeAny, nw, noop, nil
		}
		take = max(take, t)
	}
	uid := s.claim.UID
	r.shares.inflight[uid] = true
	return take, nil, func(bound bool) {
		if !bound {
			r.shares.mu.Lock()
			delete(r.shares.inflight, uid)
			r.shares.mu.Unlock()
		}
	}, nil
}

// beyondWarmShare handles a claim its tenant's warm share keeps from a warm member: an event
// says why (once per claim), and the claim is served cold, or waits with Ready=False
// BeyondWarmShare and the same message.
func (r *claimReconciler) beyondWarmShare(ctx context.Context, s *claimStep, tmpl *extv1beta1.SandboxTemplate, stamp string, key memberKey, nw *fairshare.NotWarm) (ctrl.Result, error) {
	nn := types.NamespacedName{Namespace: s.claim.Namespace, Name: s.claim.Name}
	if nw.Action == tenancyv1alpha1.Wait {
		msg := nw.Message + "; waiting for a warm sandbox within the share (whenBeyondWarmShare: Wait)"
		if s.mem.shareWhy != nw.Message {
			s.mem.shareWhy = nw.Message
			r.eventf(s, corev1.EventTypeNormal, tenancyv1alpha1.ReasonBeyondWarmShare, "Wait", "%s", msg)
		}
		r.setReady(s.claim, metav1.ConditionFalse, tenancyv1alpha1.ReasonBeyondWarmShare, msg)
		r.shares.wait(poolName(key), nn)
		return ctrl.Result{RequeueAfter: shareWaitRecheck}, nil
	}
	r.eventf(s, corev1.EventTypeNormal, tenancyv1alpha1.ReasonBeyondWarmShare, "ServeCold", "%s; served cold (whenBeyondWarmShare: ServeCold)", nw.Message)
	ctrl.LoggerFrom(ctx).V(1).Info("serving cold: beyond the warm share", "policy", nw.Policy, "why", nw.Message)
	s.mem.coldReason = fairshare.ColdBeyondWarmShare
	return r.coldStart(ctx, s, tmpl, stamp)
}

// meterServed counts a claim served (warm, or cold and why) against the tenant each policy of
// its namespace has it as: the policy status's metering and the metrics. Nothing is counted
// in a namespace without a policy.
func (r *claimReconciler) meterServed(ctx context.Context, claim *extv1beta1.SandboxClaim, warm bool, coldReason string) {
	if r.meter == nil {
		return
	}
	var list tenancyv1alpha1.ClaimPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(claim.Namespace)); err != nil || len(list.Items) == 0 {
		return
	}
	id := fairshare.IdentityOf(claim)
	for i := range list.Items {
		p := &list.Items[i]
		tenant := fairshare.TenantOf(p, id)
		r.meter.served(claim.Namespace, p.Name, tenant, warm)
		if warm {
			r.FairShareMetrics.WarmHit(claim.Namespace, p.Name, tenant)
		} else {
			if coldReason == "" {
				coldReason = fairshare.ColdPoolEmpty
			}
			r.FairShareMetrics.ColdStart(claim.Namespace, p.Name, tenant, coldReason)
		}
	}
}
