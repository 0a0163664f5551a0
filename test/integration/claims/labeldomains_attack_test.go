//go:build integration

package claims_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// A tenant's claim puts labels on a pod the platform's template defines, next to the labels
// NetworkPolicies, Services and monitoring select on. The labels must be under the allowed
// domains of the public controller's ConfigMap agent-sandbox-config (allowed-label-domains;
// default sandbox.users.io): a tenant claiming a label outside them, an unprefixed one, or the
// sandbox router's app=sandbox-router (which the templates' default NetworkPolicy admits
// everywhere) is refused at admission with 422 naming the label. The public ConfigMap works
// unchanged, and a change to it applies without a restart.
func TestAttackClaimLabelsOutsideTheAllowlist(t *testing.T) {
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) { o.ConfigNamespace = e.ns }
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	// refused creates with dryRun, so that a try that is admitted while a change is on its way
	// leaves nothing behind.
	refused := func(g Gomega, name, key, value, why string) {
		err := mallory.Create(e.ctx(), builders.MakeClaim(name, e.ns, "pool").PodLabel(key, value).Obj(), client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "claim labelled %s=%s: want 422, got %v", key, value, err)
		g.Expect(err).To(MatchError(And(
			ContainSubstring("spec.additionalPodMetadata.labels["+key+"]"),
			ContainSubstring(why))))
	}
	admitted := func(g Gomega, name, key string) {
		g.Expect(mallory.Create(e.ctx(), builders.MakeClaim(name, e.ns, "pool").PodLabel(key, "x").Obj())).To(Succeed())
	}

	t.Run("without the ConfigMap, the public default domain only", func(t *testing.T) {
		e := e.sub(t)
		refused(e.g, "outside", "acme.example/team", "x", "allowed domains (and their subdomains): sandbox.users.io")
		refused(e.g, "unprefixed", "team", "x", "need a domain prefix")
		refused(e.g, "router", "app", "sandbox-router", "sandbox router")
		refused(e.g, "lookalike", "evilsandbox.users.io/team", "x", "sandbox.users.io")
	})

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: operator.ConfigMapName, Namespace: e.ns},
		Data:       map[string]string{operator.AllowedLabelDomainsKey: "sandbox.users.io\nAcme.Example\n"},
	}
	e.create(cm)

	t.Run("the public ConfigMap: a claim labelled under its domains is admitted and served", func(t *testing.T) {
		e := e.sub(t)
		e.eventually(func(g Gomega) { admitted(g, "acme", "ml.acme.example/team") })
		_, sb := e.waitClaimReady("acme")
		e.eventually(func(g Gomega) {
			g.Expect(e.podOf(g, sb).Labels).To(HaveKeyWithValue("ml.acme.example/team", "x"))
		})
		e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("default-domain", e.ns, "pool").
			PodLabel("sandbox.users.io/team", "x").Obj())).To(Succeed())
		refused(e.g, "still-outside", "example.com/team", "x", "allowed domains (and their subdomains): sandbox.users.io, acme.example")
	})

	t.Run("a change of the ConfigMap applies without a restart", func(t *testing.T) {
		e := e.sub(t)
		cm.Data[operator.AllowedLabelDomainsKey] = "acme.example"
		e.g.Expect(e.Client.Update(e.ctx(), cm)).To(Succeed())
		e.eventually(func(g Gomega) { refused(g, "narrowed", "sandbox.users.io/team", "x", "acme.example") })
		e.g.Expect(e.Client.Delete(e.ctx(), cm)).To(Succeed())
		e.eventually(func(g Gomega) { refused(g, "default-again", "acme.example/team", "x", "sandbox.users.io") })
		e.eventually(func(g Gomega) { admitted(g, "default-admitted", "sandbox.users.io/team") })
	})
	e.g.Expect(client.IgnoreNotFound(e.Client.Delete(e.ctx(), cm))).To(Succeed())
}
