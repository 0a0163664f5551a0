package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// checkClaimStamps proves that every admitted claim was stamped before it was served, and
// that only the operator set or changed a stamp after admission. Admission stamps a claim
// whose pool and template exist; one admitted while they did not (a pool deleted and not yet
// created again) is admitted unstamped and stamped by the claim controller once they exist
// (docs/admission.md): such a claim must carry the operator's stamp before it is bound or
// Ready.
func (c *checker) checkClaimStamps() {
	for _, uid := range sortedKeys(c.claims) {
		vs := c.claims[uid]
		prev := ""
		served := false
		for i, v := range vs {
			stamp := v.obj.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
			obj := claimObject(v.obj.Namespace, v.obj.Name)
			if i > 0 && stamp != prev && v.ev.User != c.in.OperatorUser {
				c.violate(InvariantStampByOperator, obj, v.ev.Received, "stamp changed from %q to %q (resourceVersion %d): %s",
					prev, stamp, v.rv, describe(v.ev))
			}
			if stamp == "" && !served && (v.obj.Status.Sandbox.Name != "" || isReady(v.obj.Status.Conditions)) {
				served = true
				c.violate(InvariantClaimStamped, obj, v.ev.Received, "bound or Ready without the %s annotation: %s",
					agentsv1beta1.AnnotationSandboxTemplateHash, describe(v.ev))
			}
			prev = stamp
		}
	}
}

// binding is one stretch of time in which a Sandbox was bound to a claim.
type binding struct {
	sandbox string
	claim   types.UID
	start   version[agentsv1beta1.Sandbox]
	// end is the write that unbound the Sandbox or removed it; nil when it was still bound
	// at the end of the log.
	end *ending
}

// overlaps reports whether b began while a (which began no later) still held its claim. A
// removal answered with a Status has no revision to compare: then b's binding overlaps only
// when it was answered before the removal was received, so that two writes in flight at
// once are given the benefit of the doubt.
func (a *binding) overlaps(b *binding) bool {
	switch {
	case a.end == nil:
		return true
	case a.end.rv != 0:
		return b.start.rv < a.end.rv
	default:
		return b.start.ev.Completed.Before(a.end.ev.Received)
	}
}

// bindingOf is the claim a Sandbox version is bound to: its claim-uid label, or else the UID
// of its controller reference to a claim. conflict says why it is bound to two claims at once
// when the two disagree.
func bindingOf(sb *agentsv1beta1.Sandbox) (claim types.UID, conflict string) {
	label := types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
	var ref types.UID
	if r := policy.ControllerOf(sb, policy.ClaimKind); r != nil {
		ref = r.UID
	}
	if label != "" && ref != "" && label != ref {
		return label, fmt.Sprintf("its %s label names claim %s and its controller reference claim %s", agentsv1beta1.LabelClaimUID, label, ref)
	}
	return cmp.Or(label, ref), ""
}

// checkBindings follows every Sandbox through its successive versions: each change of the
// claim it is bound to is a binding (which the operator alone may make, once per Sandbox) or
// an unbinding. Then no claim may hold two bindings at once.
func (c *checker) checkBindings() {
	byClaim := map[types.UID][]*binding{}
	for _, uid := range sortedKeys(c.sandboxes) {
		for _, b := range c.sandboxBindings(uid, c.sandboxes[uid]) {
			byClaim[b.claim] = append(byClaim[b.claim], b)
		}
	}
	for _, claim := range sortedKeys(byClaim) {
		bs := byClaim[claim]
		slices.SortFunc(bs, func(a, b *binding) int { return cmp.Compare(a.start.rv, b.start.rv) })
		for j := 1; j < len(bs); j++ {
			for i := range j {
				if bs[i].overlaps(bs[j]) {
					c.violate(InvariantClaimOneBinding, c.claimByUID(claim), bs[j].start.ev.Received,
						"bound to %s (resourceVersion %d) while still bound to %s (since %d): %s",
						bs[j].sandbox, bs[j].start.rv, bs[i].sandbox, bs[i].start.rv, describe(bs[j].start.ev))
				}
			}
		}
	}
}

// sandboxBindings walks one Sandbox's versions and returns its bindings.
func (c *checker) sandboxBindings(uid types.UID, vs []version[agentsv1beta1.Sandbox]) []*binding {
	var (
		out      []*binding
		cur      *binding
		prev     types.UID
		conflict string
		bound    []types.UID // every claim it was bound to, in order
	)
	for _, v := range vs {
		obj := sandboxObject(v.obj.Namespace, v.obj.Name)
		claim, why := bindingOf(v.obj)
		if why != "" && why != conflict {
			c.violate(InvariantSandboxOneClaim, obj, v.ev.Received, "%s (resourceVersion %d): %s", why, v.rv, describe(v.ev))
		}
		conflict = why
		if claim == prev {
			continue
		}
		if cur != nil {
			cur.end = &ending{ev: v.ev, rv: v.rv}
			cur = nil
		}
		prev = claim
		if claim == "" {
			continue
		}
		if v.ev.User != c.in.OperatorUser {
			c.violate(InvariantBindingByOperator, obj, v.ev.Received, "bound to claim %s (resourceVersion %d) by another user than %s: %s",
				claim, v.rv, c.in.OperatorUser, describe(v.ev))
		}
		switch {
		case len(bound) > 0 && slices.ContainsFunc(bound, func(u types.UID) bool { return u != claim }):
			c.violate(InvariantSandboxOneClaim, obj, v.ev.Received, "bound to claim %s (resourceVersion %d) after claim %s: %s",
				claim, v.rv, bound[len(bound)-1], describe(v.ev))
		case len(bound) > 0:
			c.violate(InvariantSandboxBoundOnce, obj, v.ev.Received, "bound to claim %s again (resourceVersion %d) after it was unbound: %s",
				claim, v.rv, describe(v.ev))
		}
		bound = append(bound, claim)
		cur = &binding{sandbox: obj, claim: claim, start: v}
		out = append(out, cur)
	}
	if cur != nil {
		if g, ok := c.gone[uid]; ok {
			cur.end = &g
		}
	}
	return out
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// claimByUID names a claim known by its UID: by its name when the log has it.
func (c *checker) claimByUID(uid types.UID) string {
	if vs := c.claims[uid]; len(vs) > 0 {
		return claimObject(vs[0].obj.Namespace, vs[0].obj.Name)
	}
	return "SandboxClaim with UID " + string(uid)
}
