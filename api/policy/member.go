package policy

import (
	"k8s.io/apimachinery/pkg/api/meta"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// MemberKey is what a claim can be served from: the ready, unbound members of one pool built
// from one version of its template.
type MemberKey struct {
	Namespace string
	// Pool is the pool's name.
	Pool string
	// Hash is the BlueprintHash of the template version the members were built from (their
	// LabelSandboxTemplateHash), which must equal the claim's stamp.
	Hash string
}

// MemberKeyOf says whether sb is an unbound pool member, under which key, and whether it is
// ready. A member is controlled by its pool, carries the pool's label and a template hash,
// and has no claim; anything else (a bound or deleting Sandbox, a user's look-alike without
// the pool's controller reference) is no member.
func MemberKeyOf(sb *agentsv1beta1.Sandbox) (key MemberKey, isMember, ready bool) {
	ref := ControllerOf(sb, PoolKind)
	if ref == nil {
		return MemberKey{}, false, false
	}
	hash := sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]
	if sb.Labels[agentsv1beta1.LabelWarmPoolSandbox] == "" || hash == "" || sb.Labels[agentsv1beta1.LabelClaimUID] != "" ||
		!sb.DeletionTimestamp.IsZero() {
		return MemberKey{}, false, false
	}
	ready = meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return MemberKey{Namespace: sb.Namespace, Pool: ref.Name, Hash: hash}, true, ready
}
