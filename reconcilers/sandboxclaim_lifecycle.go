package reconcilers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// claimExpiry is when the claim expires: the earlier of its shutdownTime and the time its
// Sandbox finished plus ttlSecondsAfterFinished. ok is false when nothing makes it expire
// (yet: a TTL counts only once the Sandbox has finished).
func claimExpiry(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) (at time.Time, ok bool) {
	lc := claim.Spec.Lifecycle
	if lc == nil {
		return time.Time{}, false
	}
	if lc.ShutdownTime != nil {
		at, ok = lc.ShutdownTime.Time, true
	}
	if lc.TTLSecondsAfterFinished != nil {
		conds := claim.Status.Conditions
		if sb != nil {
			conds = sb.Status.Conditions
		}
		if f := meta.FindStatusCondition(conds, agentsv1beta1.ConditionFinished); f != nil && f.Status == metav1.ConditionTrue {
			t := f.LastTransitionTime.Add(time.Duration(*lc.TTLSecondsAfterFinished) * time.Second)
			if !ok || t.Before(at) {
				at, ok = t, true
			}
		}
	}
	return at, ok
}

// expire ends an expired claim as its shutdownPolicy says: Delete and DeleteForeground
// delete the claim (its Sandbox goes with it through garbage collection, before the claim
// with DeleteForeground); Retain deletes only the Sandbox and keeps the claim, Ready=False
// ClaimExpired, never to be served again.
func (r *claimReconciler) expire(ctx context.Context, s *claimStep, sb *agentsv1beta1.Sandbox, at time.Time) error {
	claim := s.claim
	if sb != nil {
		r.mirror(claim, sb)
	}
	prev := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady)
	if prev == nil || prev.Reason != extv1beta1.ReasonClaimExpired {
		r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventClaimExpired, "Expire", messageClaimExpiredFmt, at.UTC().Format(time.RFC3339))
	}

	shutdown := extv1beta1.ClaimShutdownPolicyRetain
	if claim.Spec.Lifecycle != nil && claim.Spec.Lifecycle.ShutdownPolicy != "" {
		shutdown = claim.Spec.Lifecycle.ShutdownPolicy
	}
	switch shutdown {
	case extv1beta1.ClaimShutdownPolicyDelete, extv1beta1.ClaimShutdownPolicyDeleteForeground:
		propagation := metav1.DeletePropagationBackground
		if shutdown == extv1beta1.ClaimShutdownPolicyDeleteForeground {
			propagation = metav1.DeletePropagationForeground
		}
		uid := claim.UID
		if err := r.Client.Delete(ctx, claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(propagation)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting expired claim: %w", err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("deleted expired claim", "policy", shutdown)
		return errClaimDeleted
	}

	if sb != nil && policy.IsControlledBy(sb, policy.ClaimKind, claim.UID) && sb.DeletionTimestamp.IsZero() {
		uid := sb.UID
		if err := r.Client.Delete(ctx, sb, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting sandbox of expired claim: %w", err)
		}
		ctrl.LoggerFrom(ctx).V(1).Info("deleted sandbox of expired claim", "sandbox", sb.Name)
	}
	claim.Status.Sandbox.PodIPs = nil
	r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonClaimExpired, fmt.Sprintf(messageClaimExpiredFmt, at.UTC().Format(time.RFC3339)))
	return nil
}
