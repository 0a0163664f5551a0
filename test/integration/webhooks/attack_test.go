//go:build integration

package webhooks_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
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

// The attacks of a platform's tenant: a user whose only permissions in the namespace are the
// shipped sandbox-editor-role (config/rbac), acting through the API server. Each is refused,
// or harmless.

// tenant returns a client acting as user name, bound to the shipped sandbox-editor-role in the
// test's namespace and allowed to create pods there: the guard's rules are what these attacks
// meet, not the pod-rights rule (a user without pod rights creates no Sandbox at all; the
// claims suite's TestAttackSandboxCreationNeedsPodRights shows it).
func (e *env) tenant(name string) client.Client {
	e.t.Helper()
	c := cluster.Tenant(e.t, e.admin, e.ns, name)
	cluster.AllowPods(e.t, e.admin, e.ns, name)
	return c
}

// Finding 1: a tenant cannot make a Sandbox look like a pool member — not with the pool's
// controller reference (its UID is readable by every editor), not with the pool's labels —
// neither when creating one nor by editing their own.
func TestAttackLookalikePoolMemberRefused(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	pool := &extv1beta1.SandboxWarmPool{}
	e.g.Expect(mallory.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "web"}, pool)).To(Succeed())
	poolRef := *metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool"))

	// The template's blueprint, as a user can write it (no operator-only pod label), with the
	// attacker's image.
	evil := func(name string) *agentsv1beta1.Sandbox {
		sb := builders.MakeSandbox(name, e.ns).Obj()
		sb.Spec.SandboxBlueprint = *e.tmpl.Spec.SandboxBlueprint.DeepCopy()
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
		return sb
	}
	full := evil("web-evil1")
	full.OwnerReferences = []metav1.OwnerReference{poolRef}
	full.Labels = map[string]string{agentsv1beta1.LabelWarmPoolSandbox: agentsv1beta1.NameHash("web"), agentsv1beta1.LabelSandboxTemplateHash: e.hash}
	expectForbidden(e.g, mallory.Create(e.ctx(), full), "mallory", "SandboxWarmPool")

	refOnly := evil("web-evil2")
	refOnly.OwnerReferences = []metav1.OwnerReference{poolRef}
	expectForbidden(e.g, mallory.Create(e.ctx(), refOnly), "mallory", "SandboxWarmPool")

	labelsOnly := evil("web-evil3")
	labelsOnly.Labels = map[string]string{agentsv1beta1.LabelSandboxTemplateHash: e.hash}
	expectForbidden(e.g, mallory.Create(e.ctx(), labelsOnly), "mallory", agentsv1beta1.LabelSandboxTemplateHash)

	// Their own Sandbox, then the pool's marks added by patch.
	own := evil("web-evil4")
	e.g.Expect(mallory.Create(e.ctx(), own)).To(Succeed())
	expectForbidden(e.g, mergePatch(e.ctx(), mallory, own, map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{poolRef}}}),
		"SandboxWarmPool")
	expectForbidden(e.g, mergePatch(e.ctx(), mallory, own, map[string]any{"metadata": map[string]any{"labels": map[string]any{
		agentsv1beta1.LabelWarmPoolSandbox: agentsv1beta1.NameHash("web")}}}), agentsv1beta1.LabelWarmPoolSandbox)

	// And were one made by someone trusted, its content still decides: the operator cannot bind it.
	forged := e.memberOf("web-forged", "web", evil("x").Spec.SandboxBlueprint, e.hash)
	expectForbidden(e.g, e.bind(e.operator, forged, e.claim), "web-forged", "blueprint hashes to")
}

// Deletion escapes the claim (issue 33), the editor role's variant: a tenant who may patch
// Sandboxes deletes their claim while something holds it (here a finalizer of the platform's)
// and takes the claim's reference off its Sandbox before the garbage collector deletes it, to
// keep it running after the claim. Refused; once the claim is gone, so is its Sandbox.
func TestAttackUnbindingADeletedClaimsSandboxRefused(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	mine := builders.MakeClaim("mallorys", e.ns, "web").Obj()
	e.create(mallory, mine)
	e.get(mine)
	e.g.Expect(e.bind(e.operator, e.warm, mine)).To(Succeed())
	e.g.Expect(mergePatch(e.ctx(), e.admin, mine, map[string]any{"metadata": map[string]any{"finalizers": []string{"example.com/hold"}}})).To(Succeed())
	e.g.Expect(mallory.Delete(e.ctx(), mine)).To(Succeed())

	e.g.Eventually(func(g Gomega) {
		sb := &agentsv1beta1.Sandbox{}
		g.Expect(mallory.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), sb)).To(Succeed())
		err := mergePatch(e.ctx(), mallory, sb, map[string]any{"metadata": map[string]any{"ownerReferences": nil}})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "taking the claim's reference off: got %v, want 403", err)
		g.Expect(err).To(MatchError(ContainSubstring("its claim is being deleted")))
	}).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())

	e.g.Expect(mergePatch(e.ctx(), e.admin, mine, map[string]any{"metadata": map[string]any{"finalizers": nil}})).To(Succeed())
	e.g.Eventually(func(g Gomega) {
		err := e.admin.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), &agentsv1beta1.Sandbox{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Sandbox outlived its claim: %v", err)
	}).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

// Finding 1, variant: a used Sandbox never re-enters a pool. The platform orphans a tenant's
// claim's Sandbox (a tenant may not: TestAttackOrphaningDeleteOfOwnClaimRefused), the tenant
// edits it and cannot put it back; the operator refuses to hand out a used Sandbox.
func TestAttackUsedSandboxBackIntoPoolRefused(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	mine := builders.MakeClaim("mallorys", e.ns, "web").Obj()
	e.create(mallory, mine)
	e.get(mine)
	e.g.Expect(e.bind(e.operator, e.warm, mine)).To(Succeed())
	e.g.Expect(e.admin.Delete(e.ctx(), mine, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
	used := &agentsv1beta1.Sandbox{}
	e.g.Eventually(func(g Gomega) {
		g.Expect(mallory.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), used)).To(Succeed())
		g.Expect(used.OwnerReferences).To(BeEmpty())
	}).Should(Succeed())
	// The claim's marks are the operator's: they cannot be scrubbed (issue 20, class 2).
	expectForbidden(e.g, mergePatch(e.ctx(), mallory, used, map[string]any{
		"metadata": map[string]any{"labels": map[string]any{agentsv1beta1.LabelClaimUID: nil, agentsv1beta1.LabelLaunchType: nil}},
	}), "operator")
	// Edit it: allowed, it is theirs now.
	e.g.Expect(mergePatch(e.ctx(), mallory, used, map[string]any{
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "attacker.example/evil:1"}}}}},
	})).To(Succeed())
	pool := &extv1beta1.SandboxWarmPool{}
	e.g.Expect(mallory.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "web"}, pool)).To(Succeed())
	expectForbidden(e.g, mergePatch(e.ctx(), mallory, used, map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool"))},
		"labels":          map[string]any{agentsv1beta1.LabelWarmPoolSandbox: agentsv1beta1.NameHash("web")},
	}}), "SandboxWarmPool")
	next := builders.MakeClaim("c2", e.ns, "web").Obj()
	e.create(mallory, next)
	e.get(next)
	expectForbidden(e.g, e.bind(e.operator, used, next), used.Name)
}

// Finding 2: a tenant cannot edit a warm member (image, suspend, shutdown), so the next claim
// gets it as the operator built it.
func TestAttackEditWarmMemberRefused(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	for what, patch := range map[string]map[string]any{
		"image":   {"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "attacker.example/evil:1"}}}}}},
		"suspend": {"spec": map[string]any{"operatingMode": "Suspended"}},
		"expire":  {"spec": map[string]any{"shutdownTime": "2020-01-01T00:00:00Z"}},
		"metadata": {"spec": map[string]any{"podTemplate": map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}}}}},
	} {
		t.Run(what, func(t *testing.T) {
			expectForbidden(NewWithT(t), mergePatch(e.ctx(), mallory, e.warm.DeepCopy(), patch), "change the spec of a member")
		})
	}
	// The pod-name annotation says which pod the member runs (and would adopt): pointing it at
	// a pod of the tenant's is refused too.
	expectForbidden(e.g, mergePatch(e.ctx(), mallory, e.warm.DeepCopy(), map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{agentsv1beta1.AnnotationPodName: "mallorys-pod"}}}), agentsv1beta1.AnnotationPodName)
	e.g.Expect(e.bind(e.operator, e.warm, e.claim)).To(Succeed())
	got := &agentsv1beta1.Sandbox{}
	e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(e.warm), got)).To(Succeed())
	e.g.Expect(policy.SandboxHash(got)).To(Equal(e.hash), "the claim got a member that is not what the template builds")
}

// Finding 3 at admission: a tenant cannot create a Sandbox the binding guard would treat as a
// claim's, and a controller reference of a made-up kind carrying the claim's UID binds nothing
// (the controller side is in the claims suite).
func TestAttackForgedClaimOwnerIsNoBinding(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	sb := builders.MakeSandbox(e.claim.Name+"-x", e.ns).Obj()
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(e.claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	expectForbidden(e.g, mallory.Create(e.ctx(), sb), "only the operator")
	madeUp := builders.MakeSandbox(e.claim.Name, e.ns).Obj()
	madeUp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "evil.example/v1", Kind: "SandboxClaim", Name: e.claim.Name, UID: e.claim.UID, Controller: ptr.To(true)}}
	e.g.Expect(mallory.Create(e.ctx(), madeUp)).To(Succeed(), "a made-up owner is no binding: nothing to refuse")
	e.g.Expect(policy.IsControlledBy(madeUp, policy.ClaimKind, e.claim.UID)).To(BeFalse())
}

// Finding 4: even with the operator's identity, a Sandbox created for a claim must be what
// the claim's template builds for it, and a claim gets one Sandbox only.
func TestOperatorColdStartChecked(t *testing.T) {
	e := setupBinding(t)
	cold := func(name string, edit func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
		sb := builders.MakeSandbox(name, e.ns).Label(agentsv1beta1.LabelSandboxTemplateHash, e.hash).
			Label(agentsv1beta1.LabelClaimUID, string(e.claim.UID)).Obj()
		sb.Spec.SandboxBlueprint = policy.TemplateBlueprint(e.tmpl)
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(e.claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
		if edit != nil {
			edit(sb)
		}
		return sb
	}
	expectForbidden(e.g, e.operator.Create(e.ctx(), cold("c1-evil", func(sb *agentsv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
	})), "is not what template web")
	ghost := e.claim.DeepCopy()
	ghost.UID = "00000000-0000-0000-0000-000000000009"
	expectForbidden(e.g, e.operator.Create(e.ctx(), cold("c1-ghost", func(sb *agentsv1beta1.Sandbox) {
		sb.Labels[agentsv1beta1.LabelClaimUID] = string(ghost.UID)
		sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ghost, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	})), "does not exist")
	e.g.Expect(e.operator.Create(e.ctx(), cold("c1", nil))).To(Succeed())
	// A second Sandbox for the same claim, cold or warm, once the first is known.
	e.g.Eventually(func(g Gomega) {
		g.Expect(e.operator.Create(e.ctx(), cold("c1-second", nil))).To(MatchError(ContainSubstring("bound to Sandbox c1 already")))
	}).Should(Succeed())
	expectForbidden(e.g, e.bind(e.operator, e.warm, e.claim), "bound to Sandbox c1 already")
}

// Finding 5: values out of range are 422 with the field path, through every way in — the pool
// bound holds for the scale subresource too, which no webhook sees — and a template needs a
// container.
func TestAttackOutOfRangeValuesInvalid(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	raw := func(obj map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: obj} }
	pool := raw(map[string]any{"apiVersion": extv1beta1.GroupVersion.String(), "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "huge", "namespace": e.ns},
		"spec":     map[string]any{"replicas": int64(1) << 31, "sandboxTemplateRef": map[string]any{"name": "web"}}})
	expectInvalid(e.g, mallory.Create(e.ctx(), pool), "spec.replicas")
	claim := raw(map[string]any{"apiVersion": extv1beta1.GroupVersion.String(), "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "forever", "namespace": e.ns},
		"spec": map[string]any{"warmPoolRef": map[string]any{"name": "web"},
			"lifecycle": map[string]any{"ttlSecondsAfterFinished": int64(1<<63 - 1)}}})
	expectInvalid(e.g, mallory.Create(e.ctx(), claim), "spec.lifecycle.ttlSecondsAfterFinished")

	expectInvalid(e.g, mallory.Create(e.ctx(), builders.MakePool("big", e.ns, "web").Replicas(extv1beta1.MaxWarmPoolReplicas+1).Obj()), "spec.replicas")
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2147483647}}
	web := &extv1beta1.SandboxWarmPool{}
	e.g.Expect(mallory.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "web"}, web)).To(Succeed())
	expectInvalid(e.g, mallory.SubResource("scale").Update(e.ctx(), web, client.WithSubResourceBody(scale)), "spec.replicas")
	scale.Spec.Replicas = 3
	e.g.Expect(mallory.SubResource("scale").Update(e.ctx(), web, client.WithSubResourceBody(scale))).To(Succeed(), "scaling within the bound")

	empty := builders.MakeTemplate("empty", e.ns).Obj()
	empty.Spec.PodTemplate.Spec.Containers = []corev1.Container{}
	expectInvalid(e.g, mallory.Create(e.ctx(), empty), "spec.podTemplate.spec.containers")
}

// Finding 6: a claim cannot put keys of Kubernetes' own domains or their subdomains on the
// pod (an AppArmor profile, say).
func TestAttackClaimSystemPodMetadataInvalid(t *testing.T) {
	e := setupBinding(t)
	mallory := e.tenant("mallory")
	for _, key := range []string{"container.apparmor.security.beta.kubernetes.io/main", "seccomp.security.alpha.kubernetes.io/pod", "node.k8s.io/x"} {
		c := builders.MakeClaim("meta", e.ns, "web").PodAnnotation(key, "unconfined").Obj()
		expectInvalid(e.g, mallory.Create(e.ctx(), c), "spec.additionalPodMetadata.annotations["+key+"]")
	}
	e.create(mallory, builders.MakeClaim("meta", e.ns, "web").PodAnnotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "false").Obj())
}

// Issue 20, class 5: cheap denial of service and runtime knobs. A tenant's claim cannot carry
// an env list the webhooks would walk for seconds, nor volume claim templates without bound,
// nor annotations through which the container runtime would run the platform's pod otherwise.
func TestAttackClaimListsAndRuntimeKnobsRefused(t *testing.T) {
	e := setup(t)
	// A template that allows env and volume claim templates: only the limits refuse.
	e.create(e.admin, builders.MakeTemplate("web", e.ns).EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).
		VolumeClaimTemplatesPolicy(extv1beta1.VolumeClaimTemplatesAllowed).Obj())
	e.create(e.admin, builders.MakePool("web", e.ns, "web").Obj())
	mallory := e.tenant("mallory")

	long := builders.MakeClaim("long-env", e.ns, "web").Obj()
	for i := range policy.MaxClaimEnv + 1 {
		long.Spec.Env = append(long.Spec.Env, extv1beta1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: "x"})
	}
	err := mallory.Create(e.ctx(), long)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v, want 422", err)
	e.g.Expect(err).To(MatchError(And(ContainSubstring("spec.env"), ContainSubstring("Too many"))))

	vcts := builders.MakeClaim("many-volumes", e.ns, "web").Obj()
	for i := range policy.MaxVolumeClaimTemplates + 1 {
		vcts.Spec.VolumeClaimTemplates = append(vcts.Spec.VolumeClaimTemplates, builders.VolumeClaimTemplate(fmt.Sprintf("v%d", i), "1Gi"))
	}
	err = mallory.Create(e.ctx(), vcts)
	e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v, want 422", err)
	e.g.Expect(err).To(MatchError(And(ContainSubstring("spec.volumeClaimTemplates"), ContainSubstring("Too many"))))

	for _, key := range []string{"io.kubernetes.cri-o.userns-mode", "io.katacontainers.config.hypervisor.kernel_params",
		"dev.gvisor.spec.mount.data.share", "io.containerd.runc.v2.options"} {
		knob := builders.MakeClaim("knob", e.ns, "web").PodAnnotation(key, "x").Obj()
		err := mallory.Create(e.ctx(), knob)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: got %v, want 422", key, err)
		e.g.Expect(err).To(MatchError(ContainSubstring("spec.additionalPodMetadata.annotations[" + key + "]")))
	}
}
