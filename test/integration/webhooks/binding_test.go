//go:build integration

package webhooks_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// bindingEnv is a pool with a stamped claim and a member built from the claim's template
// version.
type bindingEnv struct {
	*env
	tmpl  *extv1beta1.SandboxTemplate
	claim *extv1beta1.SandboxClaim
	hash  string
	warm  *agentsv1beta1.Sandbox
}

func setupBinding(t *testing.T) *bindingEnv {
	e := setup(t)
	tmpl := e.templatePool("web")
	claim := builders.MakeClaim("c1", e.ns, "web").Obj()
	e.create(e.user, claim)
	e.get(claim)
	hash := claim.Annotations[stampKey]
	e.g.Expect(hash).To(Equal(policy.TemplateHash(tmpl)))
	return &bindingEnv{env: e, tmpl: tmpl, claim: claim, hash: hash, warm: e.member("web-abcde", tmpl)}
}

// The operator binds a member of the claim's template version in one patch.
func TestBindingByOperatorAllowed(t *testing.T) {
	e := setupBinding(t)
	e.g.Expect(e.bind(e.operator, e.warm, e.claim)).To(Succeed())

	got := &agentsv1beta1.Sandbox{}
	e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), got)).To(Succeed())
	e.g.Expect(metav1.GetControllerOf(got)).To(HaveField("UID", e.claim.UID))
	e.g.Expect(got.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelClaimUID, string(e.claim.UID)))
	e.g.Expect(got.Labels).NotTo(HaveKey(agentsv1beta1.LabelWarmPoolSandbox))

	// A bound Sandbox stays its users' to operate: changes that leave the binding alone pass.
	e.g.Expect(mergePatch(e.ctx(), e.user, got, map[string]any{"spec": map[string]any{"operatingMode": "Suspended"}})).To(Succeed())
}

// Nobody but the operator binds, not even the cluster admin; the denial names the Sandbox, the
// claim and both hashes.
func TestBindingByNonOperatorForbidden(t *testing.T) {
	e := setupBinding(t)
	for _, c := range []client.Client{e.user, e.admin} {
		expectForbidden(e.g, e.bind(c, e.warm, e.claim), e.warm.Name, e.claim.Name, e.hash, webhooks.DefaultOperatorUser)
	}
	// The claim-uid label alone is a binding too.
	labelOnly := map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelClaimUID: string(e.claim.UID)}}}
	expectForbidden(e.g, mergePatch(e.ctx(), e.user, e.warm.DeepCopy(), labelOnly), e.warm.Name)
	// And so is creating a Sandbox already bound.
	prebound := builders.MakeSandbox("prebound", e.ns).Label(agentsv1beta1.LabelSandboxTemplateHash, e.hash).
		Label(agentsv1beta1.LabelClaimUID, string(e.claim.UID)).Obj()
	prebound.Spec.SandboxBlueprint = policy.TemplateBlueprint(e.tmpl)
	prebound.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(e.claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	expectForbidden(e.g, e.user.Create(e.ctx(), prebound), "prebound", e.claim.Name)
	e.g.Expect(e.operator.Create(e.ctx(), prebound)).To(Succeed(), "the operator's cold start")
}

// A member built from another template version cannot be bound to the claim, even by the
// operator: the denial names both hashes.
func TestBindingToOtherHashForbidden(t *testing.T) {
	e := setupBinding(t)
	older := builders.MakeTemplate("web", e.ns).Image("registry.example/agent:0").Obj()
	staleHash := policy.TemplateHash(older)
	stale := e.memberOf("web-stale", "web", policy.TemplateBlueprint(older), staleHash)
	expectForbidden(e.g, e.bind(e.operator, stale, e.claim), "web-stale", e.claim.Name, e.hash, staleHash)
	unlabelled := builders.MakeSandbox("web-nohash", e.ns).Obj()
	e.create(e.operator, unlabelled)
	expectForbidden(e.g, e.bind(e.operator, unlabelled, e.claim), "web-nohash", e.hash, "only an unused member of the claim's pool web")
}

// A bound Sandbox is never handed to another claim, and only the operator releases it.
func TestRebindingForbidden(t *testing.T) {
	e := setupBinding(t)
	e.g.Expect(e.bind(e.operator, e.warm, e.claim)).To(Succeed())
	second := builders.MakeClaim("c2", e.ns, "web").Obj()
	e.create(e.user, second)
	e.get(second)
	e.get(e.warm)

	expectForbidden(e.g, e.bind(e.operator, e.warm, second), e.warm.Name, second.Name, "already bound", string(e.claim.UID))

	unbind := map[string]any{"metadata": map[string]any{
		"ownerReferences": nil,
		"labels":          map[string]any{agentsv1beta1.LabelClaimUID: nil},
	}}
	expectForbidden(e.g, mergePatch(e.ctx(), e.user, e.warm.DeepCopy(), unbind), e.warm.Name)
}

// A claim that does not exist, or a UID that is not the claim's, binds nothing.
func TestBindingToUnknownClaimForbidden(t *testing.T) {
	e := setupBinding(t)
	ghost := e.claim.DeepCopy()
	ghost.Name, ghost.UID = "ghost", "00000000-0000-0000-0000-000000000000"
	expectForbidden(e.g, e.bind(e.operator, e.warm, ghost), "ghost", "does not exist")
	impostor := e.claim.DeepCopy()
	impostor.UID = "00000000-0000-0000-0000-000000000001"
	expectForbidden(e.g, e.bind(e.operator, e.warm, impostor), e.claim.Name, "does not exist")
}

// The template-hash label says what a member was built from: only the operator changes it.
func TestMemberTemplateHashImmutableForUsers(t *testing.T) {
	e := setupBinding(t)
	relabel := map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelSandboxTemplateHash: "0123456789abcdef"}}}
	expectForbidden(e.g, mergePatch(e.ctx(), e.user, e.warm.DeepCopy(), relabel), agentsv1beta1.LabelSandboxTemplateHash)
	unlabel := map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelSandboxTemplateHash: nil}}}
	expectForbidden(e.g, mergePatch(e.ctx(), e.admin, e.warm.DeepCopy(), unlabel), agentsv1beta1.LabelSandboxTemplateHash)
	e.g.Expect(mergePatch(e.ctx(), e.operator, e.warm.DeepCopy(), relabel)).To(Succeed())
}

// The platform's deletion of a claim with --cascade=orphan completes (e.user is in
// system:masters, a platform group): the garbage collector may take the claim's ownerReference
// off its Sandbox, which stays, released.
func TestOrphaningDeleteOfClaimCompletes(t *testing.T) {
	e := setupBinding(t)
	e.g.Expect(e.bind(e.operator, e.warm, e.claim)).To(Succeed())
	e.g.Expect(e.user.Delete(e.ctx(), e.claim, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.admin.Get(e.ctx(), client.ObjectKeyFromObject(e.claim), &extv1beta1.SandboxClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claim still there: %v", err)
		sb := &agentsv1beta1.Sandbox{}
		g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), sb)).To(Succeed())
		g.Expect(sb.OwnerReferences).To(BeEmpty())
	}).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

// The binding guard is called only for writes it can refuse (matchConditions): a user's
// annotation or an unrelated label on a Sandbox costs no webhook round trip; a spec change,
// an owner reference or a binding label does.
func TestBindingGuardCalledOnlyForWritesItCanRefuse(t *testing.T) {
	e := setupBinding(t)
	calls := func() float64 { return webhookCalls(e.g, "/validate-agents-x-k8s-io-v1beta1-sandbox") }
	// Other tests' namespaces being cleaned up send the webhook a few requests of their own:
	// the counts are compared over many writes, not one.
	const n = 10
	own := builders.MakeSandbox("mine", e.ns).Obj()
	e.create(e.user, own)
	before := calls()
	for i := range n {
		e.g.Expect(mergePatch(e.ctx(), e.user, own, map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{"team": fmt.Sprint(i)}, "labels": map[string]any{"app": fmt.Sprint(i)}}})).To(Succeed())
	}
	e.g.Expect(calls()-before).To(BeNumerically("<", n/2), "an annotation and a label of the user's cost no round trip")

	for what, patch := range map[string]func(i int) map[string]any{
		"spec": func(i int) map[string]any {
			return map[string]any{"spec": map[string]any{"shutdownPolicy": []string{"Delete", "Retain"}[i%2]}}
		},
		"binding": func(int) map[string]any {
			return map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelClaimUID: string(e.claim.UID)}}}
		},
		"pool labels": func(int) map[string]any {
			return map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelWarmPoolSandbox: "x"}}}
		},
	} {
		before = calls()
		for i := range n {
			_ = mergePatch(e.ctx(), e.user, own.DeepCopy(), patch(i))
		}
		e.g.Expect(calls()-before).To(BeNumerically(">=", n), "a change of the %s is checked", what)
	}
}

// The garbage collector deletes every claim's Sandbox after its claim, and the guard admits the
// Kubernetes controllers (a service account of kube-system, or kube-controller-manager's own
// user) whatever the Sandbox: their deletions cost no round trip. A tenant's deletion of a
// Sandbox bound to another's claim is still checked, and refused.
func TestBindingGuardSkipsDeletionsByKubernetesControllers(t *testing.T) {
	e := setupBinding(t)
	calls := func() float64 { return webhookCalls(e.g, "/validate-agents-x-k8s-io-v1beta1-sandbox") }
	// system:masters only for RBAC's sake (the cluster has no roles for this name); the
	// skip is decided by the kube-system group, as it is for the real garbage collector.
	gc, err := cluster.ClientAs("system:serviceaccount:kube-system:generic-garbage-collector",
		"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:masters")
	e.g.Expect(err).NotTo(HaveOccurred())
	kcm, err := cluster.ClientAs("system:kube-controller-manager", "system:masters")
	e.g.Expect(err).NotTo(HaveOccurred())
	mallory := e.tenant("mallory")

	const n = 10
	var bound []*agentsv1beta1.Sandbox
	for i := range 2 * n {
		claim := builders.MakeClaim(fmt.Sprintf("gc-%d", i), e.ns, "web").Obj()
		e.create(e.user, claim)
		e.get(claim)
		sb := builders.MakeSandbox(claim.Name, e.ns).Label(agentsv1beta1.LabelSandboxTemplateHash, e.hash).
			Label(agentsv1beta1.LabelClaimUID, string(claim.UID)).Obj()
		sb.Spec.SandboxBlueprint = policy.TemplateBlueprint(e.tmpl)
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
		e.create(e.operator, sb)
		bound = append(bound, sb)
	}

	before := calls()
	for _, sb := range bound[:n] {
		expectForbidden(e.g, mallory.Delete(e.ctx(), sb.DeepCopy()), sb.Name, "mallory")
	}
	e.g.Expect(calls()-before).To(BeNumerically(">=", n), "a tenant's deletion of another's Sandbox is checked")

	before = calls()
	for i, sb := range bound[n:] {
		deleter := gc
		if i%2 == 1 {
			deleter = kcm
		}
		e.g.Expect(deleter.Delete(e.ctx(), sb.DeepCopy())).To(Succeed())
	}
	e.g.Expect(calls()-before).To(BeNumerically("<", n/2), "the Kubernetes controllers' deletions cost no round trip")
}

// webhookCalls is how many requests the manager's webhook at path has served.
func webhookCalls(g Gomega, path string) float64 {
	var total float64
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
