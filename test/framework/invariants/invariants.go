// Package invariants holds the binding invariants every integration suite checks at the end
// of a test, written once: the claims suite after each of its tests, the take-over suite
// after handing a cluster populated by the public controller to sandgate.
//
// It takes Gomega: only _test.go files import it.
package invariants

import (
	"context"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Check asserts what must hold at every moment in namespace ns, read through c (which should
// read from the API server, not a cache): a claim is bound to at most one Sandbox and a
// Sandbox to at most one claim, every Sandbox has a controlling owner, a pool member is what
// its template-hash label says and carries no claim, a bound Sandbox carries its claim's
// template hash and, for a claim that adds nothing to its template, is exactly what that
// template version builds.
//
// A claim without a stamp can be bound only by a controller that ran before sandgate (the
// public controller binds without stamps, and leaves no template-hash label on what it binds:
// it removes the label on adoption and never sets it on a cold start). sandgate stamps every
// claim before binding it, and every Sandbox it binds carries the label, so a sandgate binding
// of an unstamped claim fails the label check here; only the content check, which needs a
// stamp, is left out for such claims.
func Check(g gomega.Gomega, c client.Reader, ns string) {
	ctx := context.Background()
	var claimList extv1beta1.SandboxClaimList
	g.Expect(c.List(ctx, &claimList, client.InNamespace(ns))).To(gomega.Succeed())
	var sandboxes agentsv1beta1.SandboxList
	g.Expect(c.List(ctx, &sandboxes, client.InNamespace(ns))).To(gomega.Succeed())

	claims := map[string]*extv1beta1.SandboxClaim{}
	for i := range claimList.Items {
		claims[string(claimList.Items[i].UID)] = &claimList.Items[i]
	}
	boundTo := map[string]string{}
	for i := range sandboxes.Items {
		sb := &sandboxes.Items[i]
		ref := metav1.GetControllerOf(sb)
		g.Expect(ref).NotTo(gomega.BeNil(), "sandbox %s has no controlling owner", sb.Name)
		uid := sb.Labels[agentsv1beta1.LabelClaimUID]
		if policy.ControllerOf(sb, policy.PoolKind) != nil {
			g.Expect(uid).To(gomega.BeEmpty(), "pool member %s carries a claim uid", sb.Name)
			g.Expect(policy.SandboxHash(sb)).To(gomega.Equal(sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]),
				"pool member %s is not what its template-hash label says", sb.Name)
			continue
		}
		if policy.ControllerOf(sb, policy.ClaimKind) == nil {
			// Not the operator's (a user's, whatever its owner says): never bound.
			g.Expect(uid).To(gomega.BeEmpty(), "sandbox %s controlled by a %s %s carries a claim uid", sb.Name, ref.APIVersion, ref.Kind)
			continue
		}
		g.Expect(string(ref.UID)).To(gomega.Equal(uid), "sandbox %s: controller and claim-uid label disagree", sb.Name)
		g.Expect(sb.Labels).NotTo(gomega.HaveKey(agentsv1beta1.LabelWarmPoolSandbox), "bound sandbox %s still in a pool", sb.Name)
		prev, twice := boundTo[uid]
		g.Expect(twice).To(gomega.BeFalse(), "claim uid %s bound to %s and %s", uid, prev, sb.Name)
		boundTo[uid] = sb.Name
		claim, ok := claims[uid]
		if !ok {
			continue // its claim is gone; garbage collection takes the sandbox
		}
		stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
		g.Expect(sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]).To(gomega.Equal(stamp),
			"sandbox %s bound to claim %s of another template version", sb.Name, claim.Name)
		if stamp != "" && !policy.AddsToTemplate(claim) {
			// A claim that adds nothing to its template gets exactly what the template builds.
			g.Expect(policy.SandboxHash(sb)).To(gomega.Equal(stamp),
				"sandbox %s bound to claim %s is not what the claim's template version builds", sb.Name, claim.Name)
		}
		if claim.Status.Sandbox.Name != "" {
			g.Expect(claim.Status.Sandbox.Name).To(gomega.Equal(sb.Name), "claim %s reports another sandbox", claim.Name)
		}
	}
}
