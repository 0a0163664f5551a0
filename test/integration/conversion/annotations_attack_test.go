//go:build integration

package conversion_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/test/framework"
)

// A claim created through v1alpha1 is converted to v1beta1 before admission sees it: its pod
// annotations meet the same allowlist (--claim-allowed-annotation-domains), so the older API
// is no way around it for a tenant.
func TestAttackV1alpha1ClaimPodAnnotationsOutsideTheAllowlist(t *testing.T) {
	e := setup(t)
	e.templatePool("tmpl")
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	for key, value := range map[string]string{"sidecar.istio.io/inject": "false", "k8s.v1.cni.cncf.io/networks": "macvlan-conf", "run.oci.keep_original_groups": "1"} {
		claim := alphaClaim("refused", e.ns, "tmpl", "tmpl")
		claim.Spec.AdditionalPodMetadata.Annotations = map[string]string{key: value}
		err := mallory.Create(e.ctx(), claim, client.DryRunAll)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "v1alpha1 claim annotated %s: want 422, got %v", key, err)
		e.g.Expect(err).To(MatchError(And(ContainSubstring("spec.additionalPodMetadata.annotations["+key+"]"),
			ContainSubstring("--claim-allowed-annotation-domains"))))
	}
	allowed := alphaClaim("allowed", e.ns, "tmpl", "tmpl")
	allowed.Spec.AdditionalPodMetadata.Annotations = map[string]string{"sandbox.users.io/note": "x"}
	e.g.Expect(mallory.Create(e.ctx(), allowed, client.DryRunAll)).To(Succeed())
}
