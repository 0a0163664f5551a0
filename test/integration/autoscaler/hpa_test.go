//go:build integration

package autoscaler_test

import (
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The field manager of the kube-controller-manager's writes: the HPA controller's.
const hpaFieldManager = "kube-controller-manager"

// An HPA on the pool: the autoscaler stops writing its replicas, says so with a condition and
// one event however long the HPA stays and whatever claims arrive, and the replicas the HPA
// sets stay. When the HPA goes, the replicas it wrote are honoured for one hold (the HPA's
// field manager wrote them after the autoscaler's last scale), then the autoscaler takes the
// pool back, with one more event.
//
// No HPA controller runs on the local control plane: the test writes the pool's /scale as
// the HPA controller does, under its field manager.
func TestAutoscalerDoesNotFightAnHPAOnThePool(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(3).Max(20).TargetSpare(0).ScaleDown(2, "100%", 0).Obj())
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(3)))
		g.Expect(e.autoscaler(g, "wpa").Status.LastScaleTime).NotTo(BeNil())
	})

	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-hpa", Namespace: e.ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool", Name: "pool"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
		},
	}
	e.create(hpa)
	e.eventually(func(g Gomega) {
		c := condition(e.autoscaler(g, "wpa"), autoscalingv1alpha1.ConditionAbleToScale)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(autoscalingv1alpha1.ReasonConflictingWriter))
		g.Expect(c.Message).To(ContainSubstring("HorizontalPodAutoscaler pool-hpa"))
		g.Expect(e.autoscalerEvents(g, "wpa", autoscalingv1alpha1.EventConflictingWriter)).To(Equal(1))
	})
	e.scale("pool", 7, hpaFieldManager)
	e.createClaims("while-hpa", "pool", 10)
	scales := e.Metrics.AutoscalerScales("up") + e.Metrics.AutoscalerScales("down")
	e.consistently(framework.Quiet, func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(7)), "the HPA's replicas stay")
		g.Expect(e.autoscalerEvents(g, "wpa", autoscalingv1alpha1.EventConflictingWriter)).To(Equal(1), "one event, not one per reconcile")
	})
	e.g.Expect(e.Metrics.AutoscalerScales("up")+e.Metrics.AutoscalerScales("down")).To(Equal(scales), "no scale written")

	e.g.Expect(e.Client.Delete(e.ctx(), hpa)).To(Succeed())
	e.eventually(func(g Gomega) {
		c := condition(e.autoscaler(g, "wpa"), autoscalingv1alpha1.ConditionAbleToScale)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(autoscalingv1alpha1.ReasonConflictingWriter))
		g.Expect(c.Message).To(ContainSubstring(`field manager "` + hpaFieldManager + `"`))
	})
	e.g.Expect(e.replicas(e.g, "pool")).To(Equal(int32(7)), "honoured for the hold")
	e.eventually(func(g Gomega) {
		a := e.autoscaler(g, "wpa")
		g.Expect(condition(a, autoscalingv1alpha1.ConditionAbleToScale).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(e.replicas(g, "pool")).To(Equal(int32(3)), "the autoscaler takes the pool back")
		g.Expect(e.autoscalerEvents(g, "wpa", autoscalingv1alpha1.EventConflictResolved)).To(Equal(1))
	})
	e.g.Expect(e.autoscalerEvents(e.g, "wpa", autoscalingv1alpha1.EventConflictingWriter)).To(Equal(1), "the HPA and its last write were one conflict")
	checkInvariants(e.g, e)
}
