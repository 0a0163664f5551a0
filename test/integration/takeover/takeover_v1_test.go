//go:build integration

package takeover_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/test/framework/invariants"
)

// TestTakeOverFromV1: a namespace as the public controller v1.0 leaves it — its CRDs serving
// and storing v1beta1 only, without a conversion webhook (status.storedVersions [v1beta1]); a
// template whose Recreate pool has three ready members; a claim it bound warm and one cold,
// reported Ready at their own generation; a claim waiting for its pool's missing template
// (TemplateNotFound); the pods kwok runs, carrying the claim's UID as v1.0 labels them — is
// handed to sandgate installed as config/v1beta1-only installs it (v1alpha1 listed but not
// served, sandgate's conversion webhook). Afterwards: storedVersions is still [v1beta1];
// nothing was deleted or recreated, and the bound Sandboxes and their pods changed only by
// sandgate's own patches (their spec and generation the same, every write since the switch-over
// sandgate's); the bound claims stayed Ready; the members serve new claims warm; creating the
// missing template serves the waiting claim; the binding invariants hold.
func TestTakeOverFromV1(t *testing.T) {
	start := time.Now()
	e := setup(t)
	crds := e.crdClient()

	// 1. The public controller v1.0's cluster: its CRDs, its writes, no sandgate admission.
	webhooks := e.removeWebhooks()
	sandgateCRDs := e.installV1CRDs(crds)
	admin := e.Client
	e.Client = e.publicV1Client()
	p := e.populateV1()
	e.Client = admin
	before := e.snapshot()
	bound := e.boundObjects(p)
	readySince := map[string]metav1.Time{}
	for _, name := range []string{"warm", "cold"} {
		e.eventually(func(g Gomega) {
			readySince[name] = meta.FindStatusCondition(e.claim(g, name).Status.Conditions, agentsv1beta1.ConditionReady).LastTransitionTime
		})
	}
	// managedFields record times to the second: writes after this instant are sandgate's.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	switchedAt := metav1.NewTime(time.Now().Truncate(time.Second))
	t.Logf("populated as v1.0 leaves it in %s: %d sandboxes, %d pods", time.Since(start).Round(time.Millisecond), len(before.sandboxes), len(before.pods))

	// 2. Switch over: sandgate's CRDs as config/v1beta1-only has them, its webhooks, its manager.
	e.installCRDs(crds, sandgateCRDs, false)
	e.expectStoredVersionsV1beta1(crds)
	e.applyWebhooks(webhooks)
	e.Manager = cluster.StartManager(t, framework.ManagerOptions{
		Namespaces: []string{e.ns}, Extensions: true, Webhooks: true, ColdStartGrace: framework.Timeout,
	})
	hash := policy.TemplateHash(p.tmpl)

	// 3. Members are taken over in place.
	e.eventually(func(g Gomega) {
		for _, name := range p.members["pool"] {
			sb := &agentsv1beta1.Sandbox{}
			e.get(g, name, sb)
			g.Expect(sb.UID).To(Equal(before.sandboxes[name]), "member %s was replaced", name)
			g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateHash, hash), "member %s not taken over", name)
			g.Expect(policy.SandboxHash(sb)).To(Equal(hash), "member %s is not what its label says", name)
		}
	})

	// 4. Bound claims stay Ready (Ready at the claim's generation, as v1.0 has it; never
	// anything else in between: the condition's transition time is v1.0's) and keep their
	// Sandboxes; their pods carry the claim's UID, as v1.0 labelled them.
	for _, name := range []string{"warm", "cold"} {
		e.eventually(func(g Gomega) {
			c := e.claim(g, name)
			sb := p.bound[name]
			e.expectServedBy(g, c, sb.Name)
			ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
			g.Expect(ready.LastTransitionTime.Time).To(BeTemporally("==", readySince[name].Time), "claim %s was not Ready in between: %+v", name, ready)
			pod := &corev1.Pod{}
			e.get(g, sb.Name, pod)
			g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelClaimUID, string(c.UID)))
		})
	}

	// 5. The claim waiting for its pool's template is served once the template is created:
	// the template's creation wakes it. sandgate has reported it waiting first (its message
	// does not quote the name).
	e.waitForAdmission()
	e.eventually(func(g Gomega) {
		ready := meta.FindStatusCondition(e.claim(g, "waiting").Status.Conditions, agentsv1beta1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(extv1beta1.ReasonTemplateNotFound))
		g.Expect(ready.Message).To(Equal("SandboxTemplate late-tmpl not found"))
	})
	e.create(builders.MakeTemplate("late-tmpl", e.ns).PodLabel("app", "agent").Obj())
	e.eventually(func(g Gomega) {
		c := e.claim(g, "waiting")
		sb := e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil(), "claim waiting not served")
		e.expectServedBy(g, c, sb.Name)
	})

	// 6. New claims are served warm by the members v1.0 made.
	for _, name := range []string{"after", "after-2"} {
		e.create(builders.MakeClaim(name, e.ns, "pool").Obj())
	}
	for _, name := range []string{"after", "after-2"} {
		e.eventually(func(g Gomega) {
			c := e.claim(g, name)
			sb := e.boundSandbox(g, c)
			g.Expect(sb).NotTo(BeNil(), "claim %s not served", name)
			e.expectServedBy(g, c, sb.Name)
			g.Expect(p.members["pool"]).To(ContainElement(sb.Name), "claim %s not served by a member v1.0 made", name)
		})
	}

	// 7. Nothing was deleted or recreated; the bound Sandboxes and pods changed only by
	// sandgate's patches; the CRDs still store v1beta1 only.
	e.consistently(func(g Gomega) {
		now := e.snapshot()
		for kind, objs := range map[string][2]map[string]types.UID{
			"sandbox": {before.sandboxes, now.sandboxes}, "pod": {before.pods, now.pods},
			"service": {before.services, now.services}, "network policy": {before.policies, now.policies},
		} {
			for name, uid := range objs[0] {
				g.Expect(objs[1]).To(HaveKeyWithValue(name, uid), "%s %s deleted or recreated", kind, name)
			}
		}
	})
	e.expectOnlySandgateChanged(bound, switchedAt)
	e.expectStoredVersionsV1beta1(crds)
	for key, n := range e.Metrics.WritesByKey() {
		e.g.Expect(strings.HasPrefix(key, "delete ") && n > 0).To(BeFalse(), "sandgate deleted: %s %v", key, n)
	}
	invariants.Check(e.g, e.Client, e.ns)
	t.Logf("sandgate's writes: %v; warm %v, cold %v; took %s", e.Metrics.WritesByKey(), e.Metrics.WarmHits(), e.Metrics.ColdStarts(), time.Since(start).Round(time.Millisecond))
}

// populateV1 writes what users and the public controller v1.0 wrote (see public_v1_test.go):
// the users' templates, pools and claims, and the controller's NetworkPolicy, Sandboxes, pods
// (which kwok runs), Services and status.
func (e *env) populateV1() *population {
	e.t.Helper()
	p := &population{members: map[string][]string{}, bound: map[string]*agentsv1beta1.Sandbox{}}
	p.tmpl = builders.MakeTemplate("tmpl", e.ns).PodLabel("app", "agent").
		Service(true).ContainerPort(builders.DefaultContainer, 8080, corev1.ProtocolTCP, "http").Obj()
	pool := builders.MakePool("pool", e.ns, "tmpl").Replicas(3).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj()
	// A pool whose template does not exist (yet): v1.0 makes no members for it.
	latePool := builders.MakePool("late-pool", e.ns, "late-tmpl").Replicas(1).Obj()
	for _, obj := range []client.Object{p.tmpl, pool, latePool} {
		e.create(obj)
	}
	e.create(publicNetworkPolicy(p.tmpl))

	var sandboxes []*agentsv1beta1.Sandbox
	for range 3 {
		sb := publicMember(pool, p.tmpl)
		e.create(sb)
		p.members["pool"] = append(p.members["pool"], sb.Name)
		sandboxes = append(sandboxes, sb)
	}
	claims := map[string]*extv1beta1.SandboxClaim{}
	warmName := names.SimpleNameGenerator.GenerateName("pool-")
	for name, pool := range map[string]string{"warm": "pool", "cold": "pool", "waiting": "late-pool"} {
		c := builders.MakeClaim(name, e.ns, pool).Obj()
		c.Annotations = publicObservedAt()
		if name == "warm" {
			c.Annotations[agentsv1beta1.AnnotationSandboxName] = warmName
		}
		e.create(c)
		claims[name] = c
	}
	warm := publicMember(pool, p.tmpl)
	warm.GenerateName, warm.Name = "", warmName
	publicAdopt(warm, claims["warm"], p.tmpl)
	cold := publicColdSandbox(claims["cold"], p.tmpl)
	for name, sb := range map[string]*agentsv1beta1.Sandbox{"warm": warm, "cold": cold} {
		e.create(sb)
		p.bound[name] = sb
		sandboxes = append(sandboxes, sb)
	}

	services := map[string]*corev1.Service{}
	for _, sb := range sandboxes {
		e.create(publicV1Pod(sb))
		if sb.Spec.Service != nil && *sb.Spec.Service {
			services[sb.Name] = publicService(sb)
			e.create(services[sb.Name])
		}
	}
	for _, sb := range sandboxes {
		pod := &corev1.Pod{}
		e.eventually(func(g Gomega) {
			e.get(g, sb.Name, pod)
			g.Expect(podReady(pod)).To(BeTrue(), "pod %s: %+v", pod.Name, pod.Status)
		})
		base := sb.DeepCopy()
		sb.Status = publicSandboxStatus(sb, pod, services[sb.Name])
		e.g.Expect(e.Client.Status().Patch(e.ctx(), sb, client.MergeFrom(base))).To(Succeed())
	}
	for name, c := range claims {
		base := c.DeepCopy()
		if sb := p.bound[name]; sb != nil {
			c.Status = publicV1ClaimStatus(c, sb)
		} else {
			c.Status = publicV1WaitingStatus(c, "late-tmpl")
		}
		e.g.Expect(e.Client.Status().Patch(e.ctx(), c, client.MergeFrom(base))).To(Succeed())
	}
	for _, wp := range []*extv1beta1.SandboxWarmPool{pool, latePool} {
		base := wp.DeepCopy()
		n := int32(len(p.members[wp.Name]))
		wp.Status = extv1beta1.SandboxWarmPoolStatus{
			Replicas: n, ReadyReplicas: n, ObservedGeneration: wp.Generation,
			Selector: agentsv1beta1.LabelWarmPoolSandbox + "=" + agentsv1beta1.NameHash(wp.Name),
		}
		e.g.Expect(e.Client.Status().Patch(e.ctx(), wp, client.MergeFrom(base))).To(Succeed())
	}
	return p
}

// publicV1Client writes as the public controller: the cluster admin under the controller's
// user agent, which names its writes' field manager.
func (e *env) publicV1Client() client.Client {
	e.t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.UserAgent = publicV1Manager
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// boundObjects are the bound Sandboxes and their pods as the public controller left them.
func (e *env) boundObjects(p *population) []client.Object {
	e.t.Helper()
	var objs []client.Object
	for _, sb := range p.bound {
		got, pod := &agentsv1beta1.Sandbox{}, &corev1.Pod{}
		e.g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), got)).To(Succeed())
		e.g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), pod)).To(Succeed())
		objs = append(objs, got, pod)
	}
	return objs
}

// sandgateMetadata are the keys sandgate adds to a bound Sandbox or pod the public controller
// built (docs/switching-over.md, "Other writes"): the pod-name annotation and its template's
// UID on the Sandbox; on the pod its Sandbox's and template's UIDs, the record of the keys it
// propagated and the Sandbox version they were written from.
var sandgateMetadata = []string{
	agentsv1beta1.AnnotationPodName, agentsv1beta1.LabelTemplateUID, agentsv1beta1.LabelSandboxUID,
	"agents.x-k8s.io/propagated-keys", "sandgate.dev/metadata-from",
}

// expectOnlySandgateChanged checks the bound Sandboxes and pods against what they were: the
// same UID and spec (a Sandbox the same generation), labels and annotations the same but for
// keys sandgate adds, and every write since the switch-over (the managedFields entries of
// since or later) sandgate's own; a status subresource may also have been written by kwok
// (pods) or sandgate (Sandboxes).
func (e *env) expectOnlySandgateChanged(before []client.Object, since metav1.Time) {
	e.t.Helper()
	sandgate := strings.SplitN(rest.DefaultKubernetesUserAgent(), "/", 2)[0]
	for _, old := range before {
		now := old.DeepCopyObject().(client.Object)
		e.g.Expect(e.Client.Get(e.ctx(), client.ObjectKeyFromObject(old), now)).To(Succeed())
		what := strings.ToLower(kindOf(old)) + " " + old.GetName()
		e.g.Expect(now.GetUID()).To(Equal(old.GetUID()), "%s recreated", what)
		e.g.Expect(now.GetGeneration()).To(Equal(old.GetGeneration()), "%s: spec changed", what)
		switch o := old.(type) {
		case *agentsv1beta1.Sandbox:
			e.g.Expect(cmp.Diff(o.Spec, now.(*agentsv1beta1.Sandbox).Spec)).To(BeEmpty(), "%s: spec changed", what)
		case *corev1.Pod:
			e.g.Expect(cmp.Diff(o.Spec, now.(*corev1.Pod).Spec)).To(BeEmpty(), "%s: spec changed", what)
		}
		for _, m := range [][2]map[string]string{{old.GetLabels(), now.GetLabels()}, {old.GetAnnotations(), now.GetAnnotations()}} {
			was, is := maps.Clone(m[0]), maps.Clone(m[1])
			for _, k := range sandgateMetadata {
				delete(was, k)
				delete(is, k)
			}
			e.g.Expect(cmp.Diff(was, is)).To(BeEmpty(), "%s: metadata changed by more than sandgate's keys", what)
		}
		var writers []string
		for _, mf := range now.GetManagedFields() {
			if mf.Time == nil || mf.Time.Before(&since) {
				continue
			}
			writers = append(writers, mf.Manager+"/"+mf.Subresource)
			if mf.Subresource == "status" && kindOf(old) == "Pod" {
				continue // kwok runs the pod
			}
			e.g.Expect(mf.Manager).To(Equal(sandgate), "%s written by %s since the switch-over", what, mf.Manager)
		}
		if now.GetResourceVersion() != old.GetResourceVersion() {
			e.g.Expect(writers).NotTo(BeEmpty(), "%s changed with no write recorded since the switch-over", what)
		}
		e.t.Logf("%s: resourceVersion %s → %s, written since the switch-over by %v", what, old.GetResourceVersion(), now.GetResourceVersion(), writers)
	}
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *agentsv1beta1.Sandbox:
		return "Sandbox"
	case *corev1.Pod:
		return "Pod"
	}
	return "object"
}

// crdClient reads and writes CustomResourceDefinitions.
func (e *env) crdClient() client.Client {
	e.t.Helper()
	scheme := runtime.NewScheme()
	e.g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// sandgateCRDs lists the CRDs of the two API groups.
func (e *env) sandgateCRDs(crds client.Client) []apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	var list apiextensionsv1.CustomResourceDefinitionList
	e.g.Expect(crds.List(e.ctx(), &list)).To(Succeed())
	var out []apiextensionsv1.CustomResourceDefinition
	for _, crd := range list.Items {
		if crd.Spec.Group == agentsv1beta1.GroupVersion.Group || crd.Spec.Group == extv1beta1.GroupVersion.Group {
			out = append(out, crd)
		}
	}
	e.g.Expect(out).To(HaveLen(4))
	return out
}

// installV1CRDs replaces the CRDs with v1.0's (v1beta1 only, no conversion webhook) and
// returns sandgate's as installed, which the test's end installs again: other tests of the
// suite need v1alpha1 served.
func (e *env) installV1CRDs(crds client.Client) []apiextensionsv1.CustomResourceDefinition {
	e.t.Helper()
	sandgate := e.sandgateCRDs(crds)
	for _, crd := range sandgate {
		e.g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1"}), "CRD %s", crd.Name)
	}
	e.t.Cleanup(func() { e.installCRDs(crds, sandgate, true) })
	v1 := slices.Clone(sandgate)
	for i := range v1 {
		crd := v1[i].DeepCopy()
		crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != "v1beta1" })
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		v1[i] = *crd
	}
	e.installCRDs(crds, v1, false)
	e.expectStoredVersionsV1beta1(crds)
	for _, crd := range e.sandgateCRDs(crds) {
		e.g.Expect(crd.Spec.Versions).To(HaveLen(1), "CRD %s", crd.Name)
		e.g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter), "CRD %s", crd.Name)
	}
	return sandgate
}

// installCRDs gives each CRD the spec of want, with v1alpha1 served only when serveAlpha (the
// difference between config/default and config/v1beta1-only), and returns once the API server
// serves v1alpha1 or not accordingly.
func (e *env) installCRDs(crds client.Client, want []apiextensionsv1.CustomResourceDefinition, serveAlpha bool) {
	e.t.Helper()
	for _, w := range want {
		e.eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(crds.Get(e.ctx(), client.ObjectKey{Name: w.Name}, crd)).To(Succeed())
			crd.Spec = *w.Spec.DeepCopy()
			for i := range crd.Spec.Versions {
				if crd.Spec.Versions[i].Name == "v1alpha1" {
					crd.Spec.Versions[i].Served = serveAlpha
				}
			}
			g.Expect(crds.Update(e.ctx(), crd)).To(Succeed())
		})
	}
	cs, err := cluster.Clientset()
	e.g.Expect(err).NotTo(HaveOccurred())
	e.eventually(func(g Gomega) {
		for _, gv := range []string{"agents.x-k8s.io/v1alpha1", "extensions.agents.x-k8s.io/v1alpha1"} {
			_, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
			if serveAlpha {
				g.Expect(err).NotTo(HaveOccurred(), "%s not served", gv)
			} else {
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s still served: %v", gv, err)
			}
		}
		_, err := cs.Discovery().ServerResourcesForGroupVersion("extensions.agents.x-k8s.io/v1beta1")
		g.Expect(err).NotTo(HaveOccurred())
	})
}

// expectStoredVersionsV1beta1 checks that every CRD stores v1beta1 only, as v1.0 leaves them.
func (e *env) expectStoredVersionsV1beta1(crds client.Client) {
	e.t.Helper()
	for _, crd := range e.sandgateCRDs(crds) {
		e.g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1beta1"}), "CRD %s", crd.Name)
	}
}
