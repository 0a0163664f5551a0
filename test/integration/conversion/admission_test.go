//go:build integration

package conversion_test

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

const tenantName = "tenant@example.com"

// templatePool creates a template and a pool of it with no members (as admin) and returns
// the template as stored, with the schema's defaults the hash covers.
func (e *env) templatePool(name string) *extv1beta1.SandboxTemplate {
	e.t.Helper()
	tmpl := builders.MakeTemplate(name, e.ns).Obj()
	e.g.Expect(e.Client.Create(e.ctx(), tmpl)).To(Succeed())
	e.g.Expect(e.Client.Create(e.ctx(), builders.MakePool(name, e.ns, name).Replicas(0).Obj())).To(Succeed())
	e.get(e.g, name, tmpl)
	return tmpl
}

// alphaClaim is a v1alpha1 claim of template served from pool.
func alphaClaim(name, ns, template, pool string) *extv1alpha1.SandboxClaim {
	warmpool := extv1alpha1.WarmPoolPolicy(pool)
	return &extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: extv1alpha1.SandboxClaimSpec{
			TemplateRef: extv1alpha1.SandboxTemplateRef{Name: template},
			WarmPool:    &warmpool,
		},
	}
}

func mergePatch(e *env, c client.Client, obj client.Object, patch map[string]any) error {
	body, err := json.Marshal(patch)
	e.g.Expect(err).NotTo(HaveOccurred())
	return c.Patch(e.ctx(), obj, client.RawPatch(types.MergePatchType, body))
}

// A claim a tenant creates through v1alpha1 is stamped at admission exactly as a v1beta1 one:
// the hash of its pool's template and the admission time; a stamp the tenant forges is refused.
func TestV1alpha1ClaimIsStampedAtAdmission(t *testing.T) {
	e := setup(t)
	tmpl := e.templatePool("web")
	tenant := cluster.Tenant(t, e.Client, e.ns, tenantName)
	cluster.AllowPods(t, e.Client, e.ns, tenantName) // a Sandbox of their own needs pod rights

	claim := alphaClaim("c1", e.ns, "web", "web")
	e.g.Expect(tenant.Create(e.ctx(), claim)).To(Succeed())
	e.g.Expect(claim.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, policy.TemplateHash(tmpl)))
	observed, err := time.Parse(time.RFC3339Nano, claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	e.g.Expect(err).NotTo(HaveOccurred(), "webhook-first-observed-at %q", claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	// Admission comes before the API server sets creationTimestamp (whole seconds).
	e.g.Expect(observed).To(BeTemporally("<", claim.CreationTimestamp.Add(time.Second)))
	// The stamp is the claim's, whichever version reads it; v1alpha1 sees what it wrote.
	beta := &extv1beta1.SandboxClaim{}
	e.get(e.g, "c1", beta)
	e.g.Expect(beta.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, policy.TemplateHash(tmpl)))
	e.g.Expect(beta.Spec.WarmPoolRef.Name).To(Equal("web"))
	e.g.Expect(claim.Spec.TemplateRef.Name).To(Equal("web"))
	e.g.Expect(claim.Spec.WarmPool).To(HaveValue(BeEquivalentTo("web")))

	forged := alphaClaim("forged", e.ns, "web", "web")
	forged.Annotations = map[string]string{agentsv1beta1.AnnotationSandboxTemplateHash: "0123456789abcdef"}
	err = tenant.Create(e.ctx(), forged)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a forged stamp: want 422, got %v", err)
}

// Binding through v1alpha1 is binding: a tenant — or the cluster admin — who creates a
// v1alpha1 Sandbox already bound to a claim, or labels one with the claim's UID, is refused
// with 403, as in v1beta1.
func TestV1alpha1BindingByNonOperatorIsRefused(t *testing.T) {
	e := setup(t)
	tmpl := e.templatePool("web")
	tenant := cluster.Tenant(t, e.Client, e.ns, tenantName)
	cluster.AllowPods(t, e.Client, e.ns, tenantName) // a Sandbox of their own needs pod rights
	claim := alphaClaim("c1", e.ns, "web", "web")
	e.g.Expect(tenant.Create(e.ctx(), claim)).To(Succeed())

	prebound := alphaSandbox(t, builders.MakeSandbox("prebound", e.ns).
		Label(agentsv1beta1.LabelSandboxTemplateHash, policy.TemplateHash(tmpl)).
		Label(agentsv1beta1.LabelClaimUID, string(claim.UID)).Obj())
	bp := policy.TemplateBlueprint(tmpl)
	prebound.Spec.PodTemplate = agentsv1alpha1.PodTemplateFrom(&bp.PodTemplate)
	prebound.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	for name, c := range map[string]client.Client{"tenant": tenant, "admin": e.Client} {
		err := c.Create(e.ctx(), prebound.DeepCopy())
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s creating a bound v1alpha1 Sandbox: want 403, got %v", name, err)
		e.g.Expect(err.Error()).To(And(ContainSubstring("prebound"), ContainSubstring(claim.Name)))
	}

	mine := alphaSandbox(t, builders.MakeSandbox("mine", e.ns).Obj())
	e.g.Expect(tenant.Create(e.ctx(), mine)).To(Succeed(), "an unbound v1alpha1 Sandbox is the tenant's to create")
	err := mergePatch(e, tenant, mine, map[string]any{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelClaimUID: string(claim.UID)}}})
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "labelling a v1alpha1 Sandbox with a claim's UID: want 403, got %v", err)
	got := &agentsv1beta1.Sandbox{}
	e.get(e.g, "mine", got)
	e.g.Expect(got.Labels).NotTo(HaveKey(agentsv1beta1.LabelClaimUID))
}

// v1alpha1 writes meet the validation of v1beta1 (webhook and schema): reserved pod labels,
// out-of-range replicas, volume claim templates changed after creation.
func TestV1alpha1WritesAreValidated(t *testing.T) {
	e := setup(t)
	tenant := cluster.Tenant(t, e.Client, e.ns, tenantName)
	cluster.AllowPods(t, e.Client, e.ns, tenantName) // a Sandbox of their own needs pod rights

	tmpl := &extv1alpha1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "reserved", Namespace: e.ns},
		Spec: extv1alpha1.SandboxTemplateSpec{PodTemplate: agentsv1alpha1.PodTemplate{
			ObjectMeta: agentsv1alpha1.PodMetadata{Labels: map[string]string{agentsv1beta1.LabelClaimUID: "x"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: builders.DefaultImage}}},
		}},
	}
	err := tenant.Create(e.ctx(), tmpl)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a reserved pod label: want 422, got %v", err)
	e.g.Expect(err.Error()).To(ContainSubstring("spec.podTemplate.metadata.labels[" + agentsv1beta1.LabelClaimUID + "]"))

	two := alphaSandbox(t, builders.MakeSandbox("two", e.ns).Obj())
	two.Spec.Replicas = ptr.To[int32](2)
	err = tenant.Create(e.ctx(), two)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "replicas 2: want 422, got %v", err)

	withVolume := alphaSandbox(t, builders.MakeSandbox("with-volume", e.ns).VolumeClaimTemplate("data", "1Gi").Obj())
	e.g.Expect(tenant.Create(e.ctx(), withVolume)).To(Succeed())
	err = mergePatch(e, tenant, withVolume, map[string]any{"spec": map[string]any{"volumeClaimTemplates": []any{}}})
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "dropping volume claim templates: want 422, got %v", err)
	e.g.Expect(err.Error()).To(ContainSubstring("volumeClaimTemplates is immutable"))
}

// A v1alpha1 Sandbox scaled to 0 (kubectl scale, v1alpha1's scale subresource) is suspended:
// its pod goes, status.replicas reads 0; scaled to 1 it runs again.
func TestV1alpha1SandboxScalesToZeroAndBack(t *testing.T) {
	e := setup(t)
	tenant := cluster.Tenant(t, e.Client, e.ns, tenantName)
	cluster.AllowPods(t, e.Client, e.ns, tenantName) // a Sandbox of their own needs pod rights
	sb := alphaSandbox(t, builders.MakeSandbox("scaled", e.ns).Obj())
	sb.Spec.Replicas = ptr.To[int32](1)
	e.g.Expect(tenant.Create(e.ctx(), sb)).To(Succeed())
	running := func(want int32, mode agentsv1beta1.OperatingMode) func(Gomega) {
		return func(g Gomega) {
			got := &agentsv1alpha1.Sandbox{}
			e.get(g, "scaled", got)
			g.Expect(got.Spec.Replicas).To(HaveValue(Equal(want)))
			g.Expect(got.Status.Replicas).To(Equal(want))
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.ConditionReady)).To(Equal(want == 1), "conditions %+v", got.Status.Conditions)
			beta := &agentsv1beta1.Sandbox{}
			e.get(g, "scaled", beta)
			g.Expect(beta.Spec.OperatingMode).To(Equal(mode))
			pods := &corev1.PodList{}
			g.Expect(e.Client.List(e.ctx(), pods, client.InNamespace(e.ns))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(int(want)))
		}
	}
	e.g.Eventually(running(1, agentsv1beta1.OperatingModeRunning), framework.Timeout, framework.Interval).Should(Succeed())
	e.kubectl("scale", "sandboxes.v1alpha1.agents.x-k8s.io/scaled", "--replicas=0")
	e.g.Eventually(running(0, agentsv1beta1.OperatingModeSuspended), framework.Timeout, framework.Interval).Should(Succeed())
	e.kubectl("scale", "sandboxes.v1alpha1.agents.x-k8s.io/scaled", "--replicas=1")
	e.g.Eventually(running(1, agentsv1beta1.OperatingModeRunning), framework.Timeout, framework.Interval).Should(Succeed())
}

// A claim created through v1beta1 is managed through v1alpha1 too: it reads as the pool it
// names, a v1alpha1 update (kubectl label) is admitted although v1alpha1 cannot name its
// template, and keeps what v1alpha1 has no field for (its volume claim templates).
func TestV1beta1ClaimIsUpdatedThroughV1alpha1(t *testing.T) {
	e := setup(t)
	tmpl := builders.MakeTemplate("web", e.ns).VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesAllowed).Obj()
	e.g.Expect(e.Client.Create(e.ctx(), tmpl)).To(Succeed())
	e.g.Expect(e.Client.Create(e.ctx(), builders.MakePool("web", e.ns, "web").Replicas(0).Obj())).To(Succeed())
	claim := builders.MakeClaim("b", e.ns, "web").Obj()
	claim.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{builders.VolumeClaimTemplate("scratch", "1Gi")}
	e.g.Expect(e.Client.Create(e.ctx(), claim)).To(Succeed())

	e.kubectl("label", "sandboxclaims.v1alpha1.extensions.agents.x-k8s.io/b", "team=research")
	alpha := &extv1alpha1.SandboxClaim{}
	e.get(e.g, "b", alpha)
	e.g.Expect(alpha.Labels).To(HaveKeyWithValue("team", "research"))
	e.g.Expect(alpha.Spec.WarmPool).To(HaveValue(BeEquivalentTo("web")))
	e.g.Expect(alpha.Spec.TemplateRef.Name).To(BeEmpty())
	e.g.Eventually(func(g Gomega) {
		got := &extv1beta1.SandboxClaim{}
		e.get(g, "b", got)
		g.Expect(got.Spec.VolumeClaimTemplates).To(ConsistOf(HaveField("EmbeddedObjectMetadata.Name", "scratch")))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "conditions %+v", got.Status.Conditions)
		pvc := &corev1.PersistentVolumeClaim{}
		e.get(g, "scratch-"+got.Status.Sandbox.Name, pvc)
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))
	}, framework.Timeout, framework.Interval).Should(Succeed())
}
