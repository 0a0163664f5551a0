//go:build integration

package autoscaler_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// A tenant (sandbox-tenant-role) decides nothing of a pool's size: it cannot create, change or
// delete a WarmPoolAutoscaler, write one's status, nor write a pool's /scale. It may read the
// autoscalers, as it reads the claims whose rate they show. The platform role writes them.
func TestAttackTenantCannotWriteAutoscalersNorScaleThePool(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(1).Max(5).TargetSpare(0).Obj())
	e.eventually(func(g Gomega) { g.Expect(e.replicas(g, "pool")).To(Equal(int32(1))) })
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	forbidden := func(what string, err error) {
		t.Helper()
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
	}
	forbidden("create an autoscaler", mallory.Create(e.ctx(), builders.MakeAutoscaler("mine", e.ns, "pool").Min(500).Max(10000).Obj()))
	wpa := builders.MakeAutoscaler("wpa", e.ns, "pool").Obj()
	raise := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"minReplicas":5000,"maxReplicas":10000}}`))
	forbidden("patch an autoscaler", mallory.Patch(e.ctx(), wpa, raise))
	forbidden("patch an autoscaler's status", mallory.Status().Patch(e.ctx(), wpa,
		client.RawPatch("application/merge-patch+json", []byte(`{"status":{"desiredReplicas":5000}}`))))
	forbidden("delete an autoscaler", mallory.Delete(e.ctx(), wpa))
	forbidden("scale the pool", mallory.SubResource("scale").Patch(e.ctx(), builders.MakePool("pool", e.ns, "").Obj(),
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":5000}}`))))
	forbidden("patch the pool's replicas", mallory.Patch(e.ctx(), builders.MakePool("pool", e.ns, "").Obj(),
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":5000}}`))))

	var list autoscalingv1alpha1.WarmPoolAutoscalerList
	e.g.Expect(mallory.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed(), "tenants read the autoscalers")
	e.g.Expect(list.Items).To(HaveLen(1))
	a := e.autoscaler(e.g, "wpa")
	e.g.Expect(*a.Spec.MinReplicas).To(Equal(int32(1)))
	e.g.Expect(a.Spec.MaxReplicas).To(Equal(int32(5)))
	e.g.Expect(e.replicas(e.g, "pool")).To(Equal(int32(1)))

	platform := cluster.UserWithRole(t, e.Client, e.ns, "platform", framework.PlatformRole)
	e.g.Expect(platform.Create(e.ctx(), builders.MakeAutoscaler("theirs", e.ns, "pool").Min(1).Max(5).Obj())).To(Succeed(),
		"the platform role writes autoscalers")
	e.g.Expect(platform.Patch(e.ctx(), builders.MakeAutoscaler("theirs", e.ns, "pool").Obj(),
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maxReplicas":6}}`)))).To(Succeed())
}
