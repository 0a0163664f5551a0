//go:build integration

package sandbox_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The local control plane stores like a real cluster: a Sandbox's volume claim template
// becomes a PVC of the default StorageClass, Bound to a volume, the Sandbox gets Ready with
// it, and deleting the namespace deletes the PVC too (its protection finalizer is lifted once
// the pod is gone), after which the volume serves the next claim.
func TestSandboxVolumesBindAndTheirNamespaceGoesAway(t *testing.T) {
	e := setup(t)
	sb := builders.MakeSandbox("with-volume", e.ns).VolumeClaimTemplate("workspace", "1Gi").Obj()
	e.create(sb)
	pvcKey := client.ObjectKey{Namespace: e.ns, Name: "workspace-with-volume"}

	var volume string
	e.g.Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(e.Client.Get(e.ctx(), pvcKey, pvc)).To(Succeed())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
		g.Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(controlplane.DefaultStorageClass)))
		g.Expect(pvc.Finalizers).To(ContainElement("kubernetes.io/pvc-protection"))
		volume = pvc.Spec.VolumeName
		got := e.sandbox(g, sb.Name)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "Ready: %+v", got.Status.Conditions)
		pod := e.pod(g, sb.Name)
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", pvcKey.Name)))
	}, framework.Timeout, framework.Interval).Should(Succeed())

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}
	e.g.Expect(e.Client.Delete(e.ctx(), ns)).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace still there (err %v)", err)
	}, framework.Timeout, framework.Interval).Should(Succeed())
	e.g.Eventually(func(g Gomega) {
		pv := &corev1.PersistentVolume{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Name: volume}, pv)).To(Succeed())
		g.Expect(pv.Status.Phase).To(Equal(corev1.VolumeAvailable), "the volume of a deleted PVC serves the next one")
	}, framework.Timeout, framework.Interval).Should(Succeed())
}
