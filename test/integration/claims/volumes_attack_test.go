//go:build integration

package claims_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The attacks of issue 33 on what a claim adds to its template's Sandbox: its volumes reach
// the pod only as new, empty PVCs beside the template's volumes, and a claim that could never
// be built, or that names a binding it does not have, is refused at admission. Each attacker
// holds only the tenant role.

// expectInvalid expects a 422 naming each of fields.
func expectInvalid(g Gomega, err error, fields ...string) {
	g.ExpectWithOffset(1, apierrors.IsInvalid(err)).To(BeTrue(), "got %v, want 422", err)
	for _, f := range fields {
		g.ExpectWithOffset(1, err).To(MatchError(ContainSubstring(f)))
	}
}

// policyTemplate is the platform's template: a pod volume "policy" (a ConfigMap of the
// platform's), a volume claim template "data", claims' volumes allowed with overrides.
func policyTemplate(ns string) *extv1beta1.SandboxTemplate {
	tmpl := builders.MakeTemplate("tmpl", ns).VolumeClaimTemplate("data", "1Gi").
		VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesOverrides).Obj()
	tmpl.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: "policy", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "platform-policy"}},
	}}}
	return tmpl
}

// A claim's volume is a new, empty PVC beside the template's volumes. A tenant cannot have the
// operator clone another tenant's PVC or a snapshot into it (dataSource, dataSourceRef), bind
// it to an existing PersistentVolume (volumeName, selector), or put it in place of a volume of
// the template's pod (the platform's ConfigMap): refused at admission with the field, and —
// for a claim admitted before its template existed — Ready=False VolumeClaimTemplatesError
// with no Sandbox and no PVC built.
func TestAttackClaimVolumesCannotCloneOrReplace(t *testing.T) {
	e := setup(t, 0)
	e.create(policyTemplate(e.ns))
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())
	victims := builders.VolumeClaimTemplate("x", "1Gi")
	e.create(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "alices-data", Namespace: e.ns}, Spec: victims.Spec})
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	withVolume := func(name, pool string, edit func(*corev1.PersistentVolumeClaimSpec)) *extv1beta1.SandboxClaim {
		c := builders.MakeClaim(name, e.ns, pool).VolumeClaimTemplate("loot", "1Gi").Obj()
		edit(&c.Spec.VolumeClaimTemplates[0].Spec)
		return c
	}
	clone := func(s *corev1.PersistentVolumeClaimSpec) {
		s.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "alices-data"}
	}
	for name, tc := range map[string]struct {
		claim *extv1beta1.SandboxClaim
		field string
	}{
		"clone another tenant's PVC": {claim: withVolume("clone", "pool", clone),
			field: "spec.volumeClaimTemplates[0].spec.dataSource: Forbidden"},
		"restore a snapshot": {claim: withVolume("snapshot", "pool", func(s *corev1.PersistentVolumeClaimSpec) {
			s.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "alices-snap"}
		}), field: "spec.volumeClaimTemplates[0].spec.dataSourceRef: Forbidden"},
		"bind an existing PersistentVolume": {claim: withVolume("bind", "pool", func(s *corev1.PersistentVolumeClaimSpec) {
			s.VolumeName = "alices-pv"
		}), field: "spec.volumeClaimTemplates[0].spec.volumeName: Forbidden"},
		"replace the platform's pod volume": {claim: builders.MakeClaim("replace", e.ns, "pool").VolumeClaimTemplate("policy", "1Gi").Obj(),
			field: "spec.volumeClaimTemplates[0].metadata.name: Forbidden"},
	} {
		t.Run(name, func(t *testing.T) {
			expectInvalid(e.sub(t).g, mallory.Create(e.ctx(), tc.claim), tc.field)
		})
	}

	// Admitted while its pool did not exist (admission cannot check a template it cannot
	// read): the controller refuses it by the same rule once the template is there.
	e.g.Expect(mallory.Create(e.ctx(), withVolume("early", "later", clone))).To(Succeed())
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("early-replace", e.ns, "later").VolumeClaimTemplate("policy", "1Gi").Obj())).To(Succeed())
	e.create(builders.MakePool("later", e.ns, "tmpl").Replicas(0).Obj())
	for _, name := range []string{"early", "early-replace"} {
		e.eventually(func(g Gomega) {
			g.Expect(readyReason(e.claim(g, name).Status.Conditions)).To(Equal(extv1beta1.ReasonVolumeClaimTemplatesError))
		})
	}
	e.consistently(framework.Quiet, func(g Gomega) {
		g.Expect(e.sandboxes(g)).To(BeEmpty())
		var pvcs corev1.PersistentVolumeClaimList
		g.Expect(e.Client.List(e.ctx(), &pvcs, client.InNamespace(e.ns))).To(Succeed())
		g.Expect(pvcs.Items).To(HaveLen(1), "only alice's PVC")
	})
	checkInvariants(e.g, e)
}

// A claim within its own limits whose Sandbox is not — more volume claim templates than a
// Sandbox may have with the template's, an env that, copied into every container, makes a
// Sandbox the API server cannot store — is refused at admission, not admitted and retried
// forever.
func TestAttackClaimNeverBuildableRefused(t *testing.T) {
	e := setup(t, 0)
	tmpl := builders.MakeTemplate("tmpl", e.ns).VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesAllowed).
		EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Obj()
	tmpl.Spec.VolumeClaimTemplates = append(tmpl.Spec.VolumeClaimTemplates, builders.VolumeClaimTemplate("workspace", "1Gi"))
	for _, name := range []string{"side", "third"} {
		tmpl.Spec.PodTemplate.Spec.Containers = append(tmpl.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: name, Image: builders.DefaultImage})
	}
	e.create(tmpl)
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	many := builders.MakeClaim("many", e.ns, "pool") // as many as a claim may have: one too many with the template's
	for i := range policy.MaxVolumeClaimTemplates {
		many.VolumeClaimTemplate(fmt.Sprintf("scratch-%d", i), "1Gi")
	}
	expectInvalid(e.g, mallory.Create(e.ctx(), many.Obj()), "spec.volumeClaimTemplates: Too many", "template tmpl")

	// A claim of 0.6 MiB, its env in every one of three containers: a Sandbox of about 1.9 MB,
	// more than the API server stores.
	big := builders.MakeClaim("big", e.ns, "pool").Env("BIG", strings.Repeat("x", policy.MaxClaimSandboxBytes*6/10), "").Obj()
	expectInvalid(e.g, mallory.Create(e.ctx(), big), "spec.env: Too long", "every container")

	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("fits", e.ns, "pool").VolumeClaimTemplate("scratch", "1Gi").Obj())).To(Succeed())
	e.waitClaimReady("fits")
	checkInvariants(e.g, e)
}

// A claim never names a Sandbox it is not bound to in agents.x-k8s.io/sandbox-name, which
// clients of the public API read as its Sandbox: a tenant cannot create a claim naming
// another tenant's Sandbox; and a user who may update claims (the editor role: the tenant role
// may not) cannot set, change or remove the name on their own claim. The operator still
// records it.
func TestAttackClaimCannotNameABindingItDoesNotHave(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)

	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("alices", e.ns, "pool").Obj())).To(Succeed())
	_, alices := e.waitClaimReady("alices")

	forged := builders.MakeClaim("forged", e.ns, "pool").Annotation(agentsv1beta1.AnnotationSandboxName, alices.Name).Obj()
	expectInvalid(e.g, mallory.Create(e.ctx(), forged), "metadata.annotations[agents.x-k8s.io/sandbox-name]: Forbidden")

	editor := cluster.Tenant(t, e.Client, e.ns, "eddie")
	e.g.Expect(editor.Create(e.ctx(), builders.MakeClaim("eddies", e.ns, "pool").Obj())).To(Succeed())
	_, own := e.waitClaimReady("eddies")
	var claim *extv1beta1.SandboxClaim
	e.eventually(func(g Gomega) { // the operator's bookkeeping, through the same webhook
		claim = e.claim(g, "eddies")
		g.Expect(claim.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxName, own.Name))
	})
	for what, value := range map[string]any{"point it at alice's Sandbox": alices.Name, "remove it": nil} {
		err := mergePatch(e.ctx(), editor, claim, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			agentsv1beta1.AnnotationSandboxName: value}}})
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: got %v, want 422", what, err)
	}
	e.g.Expect(e.claim(e.g, "eddies").Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxName, own.Name))
	checkInvariants(e.g, e)
}

// A volume claim template that clones a PVC names the PVC's kind and leaves apiGroup out (the
// core group), as the API documents: the platform's templates and Sandboxes saying so are
// admitted, in either version (the defaulting webhooks' patches used to add "apiGroup": null,
// which the API server refuses), and the Sandbox's PVC clones the PVC named.
func TestDataSourceWithoutAPIGroupAdmitted(t *testing.T) {
	e := setup(t, 0)
	vct := map[string]any{
		"metadata": map[string]any{"name": "data"},
		"spec": map[string]any{
			"accessModes": []any{"ReadWriteOnce"},
			"resources":   map[string]any{"requests": map[string]any{"storage": "1Gi"}},
			"dataSource":  map[string]any{"kind": "PersistentVolumeClaim", "name": "golden"},
		},
	}
	podTemplate := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": builders.DefaultImage}}}}
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": extv1beta1.GroupVersion.String(), "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": "tmpl", "namespace": e.ns},
		"spec":     map[string]any{"podTemplate": podTemplate, "volumeClaimTemplates": []any{vct}},
	}}
	e.g.Expect(e.Client.Create(e.ctx(), tmpl)).To(Succeed())
	sandbox := func(version, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": version, "kind": "Sandbox",
			"metadata": map[string]any{"name": name, "namespace": e.ns},
			"spec":     map[string]any{"podTemplate": podTemplate, "volumeClaimTemplates": []any{vct}},
		}}
	}
	e.g.Expect(e.Client.Create(e.ctx(), sandbox(agentsv1beta1.GroupVersion.String(), "cloned"))).To(Succeed())
	// A v1alpha1 client's, converted to v1beta1 and back.
	e.g.Expect(e.Client.Create(e.ctx(), sandbox("agents.x-k8s.io/v1alpha1", "cloned-alpha"))).To(Succeed())
	for _, name := range []string{"data-cloned", "data-cloned-alpha"} {
		e.eventually(func(g Gomega) {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(e.Client.Get(e.ctx(), e.key(name), pvc)).To(Succeed())
			g.Expect(pvc.Spec.DataSource).To(Equal(&corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "golden"}))
		})
	}
}
