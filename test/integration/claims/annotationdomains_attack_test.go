//go:build integration

package claims_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The annotations a claim's additionalPodMetadata puts on its pod are how a service mesh, a
// CNI and the container runtime take orders from the pod: a tenant who could set them would
// opt its sandbox out of the mesh (and the mesh's policy), exclude its outbound traffic from
// the sidecar, attach it to another network, or pick runtime options. A claim's pod
// annotations must be under the allowed domains (--claim-allowed-annotation-domains, default
// sandbox.users.io): the tenant's claim is refused at admission with 422 naming the
// annotation, the allowed domains and the flag to ask the platform for.
func TestAttackClaimPodAnnotationsOutsideTheAllowlist(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	for name, a := range map[string]struct{ key, value, why string }{
		"out of the service mesh":   {"sidecar.istio.io/inject", "false", `annotation domain "sidecar.istio.io" is not in the allowlist`},
		"around the sidecar":        {"traffic.sidecar.istio.io/excludeOutboundIPRanges", "0.0.0.0/0", "allowed domains (and their subdomains): sandbox.users.io"},
		"out of linkerd":            {"linkerd.io/inject", "disabled", "--claim-allowed-annotation-domains"},
		"onto another network":      {"k8s.v1.cni.cncf.io/networks", "macvlan-conf", "allowed domains (and their subdomains): sandbox.users.io"},
		"crun's options":            {"run.oci.keep_original_groups", "1", "need a domain prefix"},
		"a lookalike of the domain": {"evilsandbox.users.io/note", "x", "sandbox.users.io"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			e := e.sub(t)
			err := mallory.Create(e.ctx(), builders.MakeClaim("refused", e.ns, "pool").PodAnnotation(a.key, a.value).Obj(), client.DryRunAll)
			e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "claim annotated %s=%s: want 422, got %v", a.key, a.value, err)
			e.g.Expect(err).To(MatchError(And(
				ContainSubstring("spec.additionalPodMetadata.annotations["+a.key+"]"),
				ContainSubstring(a.why))))
		})
	}

	t.Run("an annotation under the allowed domain reaches the pod", func(t *testing.T) {
		e := e.sub(t)
		e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("noted", e.ns, "pool").
			PodAnnotation("ml.sandbox.users.io/note", "x").Obj())).To(Succeed())
		_, sb := e.waitClaimReady("noted")
		e.eventually(func(g Gomega) {
			g.Expect(e.podOf(g, sb).Annotations).To(HaveKeyWithValue("ml.sandbox.users.io/note", "x"))
		})
	})
}

// The platform hands out annotation domains with --claim-allowed-annotation-domains: a list
// replaces the default, and the runtime prefixes of --claim-refused-annotation-prefixes stay
// refused under it.
func TestAttackClaimPodAnnotationsUnderAConfiguredAllowlist(t *testing.T) {
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) {
		o.ClaimAnnotationDomains = []string{"acme.example", "io.containerd.example"}
	}
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("acme", e.ns, "pool").
		PodAnnotation("team.acme.example/owner", "ml").Obj(), client.DryRunAll)).To(Succeed())
	for key, why := range map[string]string{
		"sandbox.users.io/note":   "allowed domains (and their subdomains): acme.example, io.containerd.example",
		"sidecar.istio.io/inject": "acme.example",
		"io.containerd.example/x": "container runtimes",
	} {
		err := mallory.Create(e.ctx(), builders.MakeClaim("refused", e.ns, "pool").PodAnnotation(key, "false").Obj(), client.DryRunAll)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "claim annotated %s: want 422, got %v", key, err)
		e.g.Expect(err).To(MatchError(And(ContainSubstring("spec.additionalPodMetadata.annotations["+key+"]"), ContainSubstring(why))))
	}
}
