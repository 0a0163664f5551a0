//go:build integration

package webhooks_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

const stampKey = agentsv1beta1.AnnotationSandboxTemplateHash

// A claim is stamped at creation with the blueprint hash of its pool's template as stored,
// and with its admission time.
func TestClaimStampedWithTemplateHash(t *testing.T) {
	e := setup(t)
	tmpl := e.templatePool("web")

	before := time.Now()
	claim := builders.MakeClaim("c1", e.ns, "web").Obj()
	e.create(e.user, claim)
	after := time.Now()

	e.get(claim)
	e.g.Expect(claim.Annotations).To(HaveKeyWithValue(stampKey, policy.TemplateHash(tmpl)))
	observed, err := time.Parse(time.RFC3339Nano, claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(observed).To(BeTemporally(">=", before.Add(-time.Second)))
	e.g.Expect(observed).To(BeTemporally("<=", after.Add(time.Second)))
}

// After a template update, new claims carry the new hash and existing claims keep theirs.
func TestTemplateUpdateStampsNewClaimsOnly(t *testing.T) {
	e := setup(t)
	tmpl := e.templatePool("web")
	oldHash := policy.TemplateHash(tmpl)
	before := builders.MakeClaim("before", e.ns, "web").Obj()
	e.create(e.user, before)

	e.g.Expect(mergePatch(e.ctx(), e.admin, tmpl, map[string]any{"spec": map[string]any{"podTemplate": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"version": "2"}},
	}}})).To(Succeed())
	e.get(tmpl)
	newHash := policy.TemplateHash(tmpl)
	e.g.Expect(newHash).NotTo(Equal(oldHash))

	after := builders.MakeClaim("after", e.ns, "web").Obj()
	e.create(e.user, after)
	e.get(after)
	e.get(before)
	e.g.Expect(after.Annotations).To(HaveKeyWithValue(stampKey, newHash))
	e.g.Expect(before.Annotations).To(HaveKeyWithValue(stampKey, oldHash))
}

// Without the pool or its template the claim is admitted unstamped (the claim reconciler
// stamps it later), but with its admission time.
func TestClaimWithoutTemplateAdmittedUnstamped(t *testing.T) {
	e := setup(t)
	e.create(e.admin, builders.MakePool("orphan", e.ns, "missing").Obj())
	for _, pool := range []string{"no-such-pool", "orphan"} {
		claim := builders.MakeClaim("claim-"+pool, e.ns, pool).Obj()
		e.create(e.user, claim)
		e.get(claim)
		e.g.Expect(claim.Annotations).NotTo(HaveKey(stampKey), "pool %s", pool)
		e.g.Expect(claim.Annotations).To(HaveKey(agentsv1beta1.AnnotationWebhookFirstObservedAt), "pool %s", pool)
	}
}

// A stamp supplied by the client is checked: a forged one is refused, the right one accepted,
// and one that cannot be checked (no template) is refused too.
func TestForgedStampRejected(t *testing.T) {
	e := setup(t)
	tmpl := e.templatePool("web")
	field := "metadata.annotations[" + stampKey + "]"

	forged := builders.MakeClaim("forged", e.ns, "web").Annotation(stampKey, "0123456789abcdef").Obj()
	expectInvalid(e.g, e.user.Create(e.ctx(), forged), field)
	unverifiable := builders.MakeClaim("unverifiable", e.ns, "no-such-pool").Annotation(stampKey, "0123456789abcdef").Obj()
	expectInvalid(e.g, e.user.Create(e.ctx(), unverifiable), field)

	honest := builders.MakeClaim("honest", e.ns, "web").Annotation(stampKey, policy.TemplateHash(tmpl)).Obj()
	e.create(e.user, honest)
}

// Once stamped, only the operator may change the stamp; nobody may move a claim to another
// pool.
func TestStampImmutableExceptForOperator(t *testing.T) {
	e := setup(t)
	e.templatePool("web")
	claim := builders.MakeClaim("c1", e.ns, "web").Obj()
	e.create(e.user, claim)
	field := "metadata.annotations[" + stampKey + "]"

	for _, c := range []client.Client{e.admin, e.user} {
		restamp := map[string]any{"metadata": map[string]any{"annotations": map[string]any{stampKey: "0123456789abcdef"}}}
		expectInvalid(e.g, mergePatch(e.ctx(), c, claim.DeepCopy(), restamp), field)
		unstamp := map[string]any{"metadata": map[string]any{"annotations": map[string]any{stampKey: nil}}}
		expectInvalid(e.g, mergePatch(e.ctx(), c, claim.DeepCopy(), unstamp), field)
	}
	move := map[string]any{"spec": map[string]any{"warmPoolRef": map[string]any{"name": "other"}}}
	expectInvalid(e.g, mergePatch(e.ctx(), e.operator, claim.DeepCopy(), move), "spec.warmPoolRef")

	restamp := map[string]any{"metadata": map[string]any{"annotations": map[string]any{stampKey: "fedcba9876543210"}}}
	e.g.Expect(mergePatch(e.ctx(), e.operator, claim, restamp)).To(Succeed())
	var got extv1beta1.SandboxClaim
	e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(claim), &got)).To(Succeed())
	e.g.Expect(got.Annotations).To(HaveKeyWithValue(stampKey, "fedcba9876543210"))

	// Other metadata stays the user's to change.
	e.g.Expect(mergePatch(e.ctx(), e.user, claim, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}})).To(Succeed())
}

// A creator's own deletion of a claim, in the background or the foreground, costs no round
// trip to the claim validator (its matchConditions); one that would orphan the claim's Sandbox
// is sent to it, and refused.
func TestClaimValidatorCalledOnlyForDeletionsItCanRefuse(t *testing.T) {
	e := setup(t)
	e.templatePool("web")
	alice := cluster.UserWithRole(t, e.admin, e.ns, "alice", framework.TenantRole)
	calls := func() float64 { return webhookCalls(e.g, "/validate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim") }
	// Other tests' namespaces being cleaned up send the webhook requests of their own (the
	// namespace controller deletes their claims): the counts are taken once none is, and
	// compared over many deletions, not one.
	const n = 10
	claims := make([]*extv1beta1.SandboxClaim, n)
	for i := range claims {
		claims[i] = builders.MakeClaim(fmt.Sprintf("c%d", i), e.ns, "web").Obj()
		e.create(alice, claims[i])
	}
	e.g.Eventually(func(g Gomega) {
		var nss corev1.NamespaceList
		g.Expect(e.admin.List(e.ctx(), &nss)).To(Succeed())
		for _, ns := range nss.Items {
			g.Expect(ns.Status.Phase).NotTo(Equal(corev1.NamespaceTerminating), "namespace %s is being cleaned up", ns.Name)
		}
	}).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
	before := calls()
	for _, c := range claims {
		e.g.Expect(alice.Delete(e.ctx(), c, client.PropagationPolicy(metav1.DeletePropagationOrphan))).NotTo(Succeed())
	}
	e.g.Expect(calls()-before).To(BeNumerically(">=", n), "an orphaning deletion is checked")

	before = calls()
	for i, c := range claims {
		prop := []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground}[i%2]
		e.g.Expect(alice.Delete(e.ctx(), c, client.PropagationPolicy(prop))).To(Succeed())
	}
	e.g.Expect(calls()-before).To(BeNumerically("<", n/2), "a creator's own deletion costs no round trip")
}
