//go:build integration

package claims_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The deletion attacks of issue 33: a claim's deletion ends its Sandbox, and a claim's
// metadata neither references nor blocks objects its creator does not own. Each attacker
// holds only the tenant role and acts through the API server as themselves; the garbage
// collector runs (kube-controller-manager), as in a cluster.

// Orphaning: a tenant deletes their own claim with --cascade=orphan (or the deprecated
// orphanDependents) to keep its Sandbox and pod running, owned by nothing, beyond every claim
// count and lifecycle. Refused; the claim and its Sandbox stay as they were, and a deletion
// in the foreground (the API server's own foregroundDeletion finalizer is no tenant's write)
// ends the claim, its Sandbox and its pod.
func TestAttackOrphaningDeleteOfOwnClaimRefused(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)
	e.waitPoolReady("pool", 1)

	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("mine", e.ns, "pool").Obj())).To(Succeed())
	claim, sb := e.waitClaimReady("mine")
	pod := e.podOf(e.g, sb)

	for what, opt := range map[string]client.DeleteOption{
		"propagationPolicy": client.PropagationPolicy(metav1.DeletePropagationOrphan),
		"orphanDependents":  &client.DeleteOptions{Raw: &metav1.DeleteOptions{OrphanDependents: ptr.To(true)}},
	} {
		err := mallory.Delete(e.ctx(), claim, opt)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "deleting with %s orphaning: got %v, want 422", what, err)
		e.g.Expect(err).To(MatchError(ContainSubstring(what)))
		e.g.Expect(err).To(MatchError(ContainSubstring("deleting a claim ends its Sandbox")))
	}
	now := e.claim(e.g, "mine")
	e.g.Expect(now.DeletionTimestamp).To(BeNil(), "the refused deletion began")
	e.g.Expect(ready(now.Status.Conditions)).To(BeTrue())
	cur := &agentsv1beta1.Sandbox{}
	e.g.Expect(e.Client.Get(e.ctx(), client.ObjectKeyFromObject(sb), cur)).To(Succeed())
	e.g.Expect(metav1.IsControlledBy(cur, claim)).To(BeTrue(), "the Sandbox lost its claim")

	e.g.Expect(mallory.Delete(e.ctx(), claim, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	e.eventually(func(g Gomega) {
		for _, o := range []client.Object{claim, sb, pod} {
			err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s outlived its claim's deletion: %v", o, o.GetName(), err)
		}
	})
	checkInvariants(e.g, e)
}

// Blocking: a tenant creates a claim with a finalizer nobody removes and an owner reference
// with blockOwnerDeletion to another tenant's claim, so that the victim's foreground deletion
// waits for ever; or with the orphan finalizer, so that a later plain deletion orphans its
// Sandbox. Each is refused with its field path, and the victim's foreground deletion ends.
func TestAttackClaimCannotReferenceOrBlockAnotherClaim(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)
	e.waitPoolReady("pool", 1)
	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("victim", e.ns, "pool").Obj())).To(Succeed())
	victim, sb := e.waitClaimReady("victim")

	blocking := metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
		Name: victim.Name, UID: victim.UID, BlockOwnerDeletion: ptr.To(true)}
	for name, tc := range map[string]struct {
		refs       []metav1.OwnerReference
		finalizers []string
		want       []string
	}{
		"blocker": {refs: []metav1.OwnerReference{blocking}, finalizers: []string{"example.com/never"},
			want: []string{"metadata.ownerReferences[0]", "metadata.finalizers[0]"}},
		"reference": {refs: []metav1.OwnerReference{blocking}, want: []string{"metadata.ownerReferences[0]"}},
		"pinned":    {finalizers: []string{"example.com/never"}, want: []string{"metadata.finalizers[0]"}},
		"orphaner":  {finalizers: []string{metav1.FinalizerOrphanDependents}, want: []string{"metadata.finalizers[0]"}},
	} {
		c := builders.MakeClaim(name, e.ns, "pool").Obj()
		c.OwnerReferences, c.Finalizers = tc.refs, tc.finalizers
		err := mallory.Create(e.ctx(), c)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "claim %s: got %v, want 422", name, err)
		for _, path := range tc.want {
			e.g.Expect(err).To(MatchError(ContainSubstring(path)), "claim %s", name)
		}
		e.g.Expect(apierrors.IsNotFound(e.Client.Get(e.ctx(), e.key(name), &extv1beta1.SandboxClaim{}))).To(BeTrue())
	}

	e.g.Expect(alice.Delete(e.ctx(), victim, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	e.eventually(func(g Gomega) {
		err := e.Client.Get(e.ctx(), e.key(victim.Name), &extv1beta1.SandboxClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the victim's foreground deletion hangs: %v", err)
		err = e.Client.Get(e.ctx(), client.ObjectKeyFromObject(sb), &agentsv1beta1.Sandbox{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the victim's Sandbox outlived its claim: %v", err)
	})
	checkInvariants(e.g, e)
}
