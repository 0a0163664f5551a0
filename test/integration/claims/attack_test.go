//go:build integration

package claims_test

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The attacks of issue 11 against the running operator, by a tenant with only the shipped
// sandbox-editor-role: the claim always gets a Sandbox the operator built from its stamped
// template, never the attacker's.

const evilImage = "attacker.example/evil:1"

// Finding 1, the same-second race: while the pool refills (its member deleted by the tenant),
// the tenant creates look-alike members at the same moment, round after round, then claims.
// Every look-alike is refused, and every claim gets a member the operator built.
func TestAttackLookalikeDuringRefill(t *testing.T) {
	e := setup(t, 0)
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	pool := &extv1beta1.SandboxWarmPool{}
	e.g.Expect(mallory.Get(e.ctx(), e.key("pool"), pool)).To(Succeed())
	tmpl := e.template(e.g, "tmpl")

	for round := range 3 {
		members := e.waitPoolReady("pool", 1)
		var wg sync.WaitGroup
		refused := make([]error, 4)
		wg.Go(func() { e.g.Expect(mallory.Delete(e.ctx(), &members[0])).To(Succeed()) })
		for i := range refused {
			wg.Go(func() {
				sb := builders.MakeSandbox("", e.ns).Image(evilImage).
					Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash("pool")).
					Label(agentsv1beta1.LabelSandboxTemplateHash, policy.TemplateHash(tmpl)).Obj()
				sb.GenerateName = "pool-"
				sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool"))}
				refused[i] = mallory.Create(e.ctx(), sb)
			})
		}
		wg.Wait()
		for _, err := range refused {
			e.g.Expect(err).To(MatchError(ContainSubstring("only the operator")), "round %d: a look-alike member was admitted", round)
		}
		claim := builders.MakeClaim("claim-"+string(rune('a'+round)), e.ns, "pool").Obj()
		e.g.Expect(mallory.Create(e.ctx(), claim)).To(Succeed())
		c, sb := e.waitClaimReady(claim.Name)
		e.g.Expect(policy.SandboxHash(sb)).To(Equal(c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]),
			"round %d: claim bound to a Sandbox that is not what its template builds", round)
		e.g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal(builders.DefaultImage))
	}
	for _, sb := range e.sandboxes(e.g) {
		e.g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).NotTo(Equal(evilImage), "an attacker's Sandbox exists: %s", sb.Name)
	}
	checkInvariants(e.g, e)
}

// Finding 3: a Sandbox squatting the claim's name, with a controller reference of a made-up
// kind carrying the claim's UID, is never taken as the claim's. The claim gets its own
// Sandbox under a generated name, says so in an event, and keeps it across an operator
// restart.
func TestAttackColdStartNameSquatting(t *testing.T) {
	e := setupWithoutManager(t, 0)
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	e.grantPods("mallory") // a Sandbox of their own needs pod rights (issue 20, class 5)
	var claim *extv1beta1.SandboxClaim
	var served *agentsv1beta1.Sandbox
	t.Run("first-manager", func(t *testing.T) {
		e := e.sub(t)
		e.Manager = cluster.StartManager(t, e.opts)
		// No template yet: the claim waits (TemplateNotFound), which gives the attacker its UID
		// before the cold start.
		e.create(builders.MakePool("empty", e.ns, "tmpl").Replicas(0).Obj())
		claim = builders.MakeClaim("victim", e.ns, "empty").Obj()
		e.g.Expect(mallory.Create(e.ctx(), claim)).To(Succeed())
		e.eventually(func(g Gomega) {
			g.Expect(readyReason(e.claim(g, "victim").Status.Conditions)).To(Equal(extv1beta1.ReasonTemplateNotFound))
		})
		squat := builders.MakeSandbox("victim", e.ns).Image(evilImage).Obj()
		squat.OwnerReferences = []metav1.OwnerReference{{APIVersion: "evil.example/v1", Kind: "SandboxClaim", Name: "victim", UID: claim.UID, Controller: ptr.To(true)}}
		e.g.Expect(mallory.Create(e.ctx(), squat)).To(Succeed())
		e.g.Expect(mallory.Create(e.ctx(), builders.MakeTemplate("tmpl", e.ns).Obj())).To(Succeed())

		c, sb := e.waitClaimReady("victim")
		e.g.Expect(sb.Name).NotTo(Equal("victim"))
		e.g.Expect(sb.Name).To(HavePrefix("victim-"))
		e.g.Expect(metav1.IsControlledBy(sb, c)).To(BeTrue())
		e.g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal(builders.DefaultImage))
		e.g.Expect(policy.SandboxHash(sb)).To(Equal(c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]))
		e.eventually(func(g Gomega) {
			g.Expect(e.claimEvents(g, "victim")).To(ContainElement(extv1beta1.EventSandboxNameTaken))
		})
		served = sb
	})
	// A new operator process finds the claim's Sandbox again: the claim is not reported
	// missing, and not served twice.
	e.Manager = cluster.StartManager(t, e.opts)
	e.consistently(2*time.Second, func(g Gomega) {
		c := e.claim(g, "victim")
		g.Expect(ready(c.Status.Conditions)).To(BeTrue(), "conditions %+v", c.Status.Conditions)
		g.Expect(c.Status.Sandbox.Name).To(Equal(served.Name))
		g.Expect(e.boundSandbox(g, c).Name).To(Equal(served.Name))
	})
	squat := &agentsv1beta1.Sandbox{}
	e.g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "victim"}, squat)).To(Succeed())
	e.g.Expect(squat.Labels).NotTo(HaveKey(agentsv1beta1.LabelClaimUID), "the squatter's Sandbox was bound")
	checkInvariants(e.g, e)
}
