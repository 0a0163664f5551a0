//go:build integration

package takeover_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/test/framework/invariants"
)

// TestTakeOverFromThePublicController: a namespace as the public controller leaves it — a
// secure-default template whose Recreate pool has three ready members, a template with its own
// network rules whose OnReplenish pool has two, claims it bound warm (one created through
// v1alpha1) and cold, a claim whose adoption it began but did not finish, a claim created after
// it stopped, the pods kwok runs for all of them and the headless Services of the first
// template's Sandboxes — is handed to sandgate. Afterwards: every Sandbox, pod, Service and
// NetworkPolicy is the one it was (same UID, none deleted); the members are
// taken over in place (relabelled with sandgate's template hash, their podTemplate's metadata
// refreshed) and serve new claims warm; bound claims keep their Sandboxes and stay Ready;
// unstamped claims waiting for a Sandbox are stamped and served; the v1alpha1 claim reads back
// as written; the binding invariants hold.
func TestTakeOverFromThePublicController(t *testing.T) {
	start := time.Now()
	e := setup(t)

	// 1. The public controller's cluster: scale it to 0, no sandgate admission yet.
	webhooks := e.removeWebhooks()
	p := e.populate()
	before := e.snapshot()
	t.Logf("populated as the public controller leaves it in %s: %d sandboxes, %d pods, %d services",
		time.Since(start).Round(time.Millisecond), len(before.sandboxes), len(before.pods), len(before.services))

	// 2. Switch over: sandgate's webhooks, then its manager.
	e.applyWebhooks(webhooks)
	switched := time.Now()
	e.Manager = cluster.StartManager(t, framework.ManagerOptions{
		Namespaces: []string{e.ns}, Extensions: true, Webhooks: true,
		// A claim that could be served warm must be: a cold start is a failure here.
		ColdStartGrace: framework.Timeout,
	})
	hash, npHash := policy.TemplateHash(p.tmpl), policy.TemplateHash(p.npTmpl)

	// 3. Members are relabelled and refreshed in place, never replaced.
	e.eventually(func(g Gomega) {
		for pool, want := range map[string]string{"pool": hash, "np-pool": npHash} {
			for _, name := range p.members[pool] {
				sb := &agentsv1beta1.Sandbox{}
				e.get(g, name, sb)
				g.Expect(sb.UID).To(Equal(before.sandboxes[name]), "member %s was replaced", name)
				g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateHash, want), "member %s not taken over", name)
				g.Expect(policy.SandboxHash(sb)).To(Equal(want), "member %s is not what its label says", name)
				if policy.ControllerOf(sb, policy.PoolKind) != nil {
					// The public controller's own labels are gone: to the binding guard
					// launch-type marks a Sandbox bound before.
					for _, k := range []string{agentsv1beta1.LabelLaunchType, agentsv1beta1.LabelCreatedBy, publicPodTemplateHashLabel} {
						g.Expect(sb.Labels).NotTo(HaveKey(k), "member %s", name)
					}
				}
				tmpl := &extv1beta1.SandboxTemplate{}
				e.get(g, sb.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef], tmpl)
				g.Expect(sb.Spec.PodTemplate.ObjectMeta.Labels).To(Equal(map[string]string{
					"app": "agent", agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name),
					// What the template's NetworkPolicy selects now (issue 20, class 3).
					agentsv1beta1.LabelTemplateUID: string(tmpl.UID),
				}))
			}
		}
	})
	t.Logf("members taken over %s after the switch-over", time.Since(switched).Round(time.Millisecond))

	// 4. Claims the public controller bound keep their Sandboxes (warm and cold) and stay
	// Ready; their sandbox-name annotation names it (sandgate writes it for the cold one).
	// They stay unstamped: their Sandboxes were built by the public controller.
	for _, name := range []string{"warm", "alpha", "cold"} {
		e.eventually(func(g Gomega) {
			c := e.claim(g, name)
			sb := p.bound[name]
			e.expectServedBy(g, c, sb.Name)
			got := &agentsv1beta1.Sandbox{}
			e.get(g, sb.Name, got)
			g.Expect(got.UID).To(Equal(sb.UID))
			g.Expect(c.Annotations).NotTo(HaveKey(agentsv1beta1.AnnotationSandboxTemplateHash))
			// Its pod is selected by its template's NetworkPolicy, which selects the
			// template's UID now (issue 20, class 3).
			tmpl := &extv1beta1.SandboxTemplate{}
			e.get(g, got.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef], tmpl)
			pod := &corev1.Pod{}
			e.get(g, got.Annotations[agentsv1beta1.AnnotationPodName], pod)
			g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelTemplateUID, string(tmpl.UID)), "pod of %s", got.Name)
		})
	}

	// 5. Claims waiting for a Sandbox at the switch-over (one half adopted by the public
	// controller, one created while no controller ran) are stamped by the claim controller and
	// served. They may be served cold: the claim controller can reach them before the pool has
	// relabelled its members.
	for _, name := range []string{"half", "late"} {
		e.eventually(func(g Gomega) {
			c := e.claim(g, name)
			g.Expect(c.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, hash))
			sb := e.boundSandbox(g, c)
			g.Expect(sb).NotTo(BeNil(), "claim %s not served", name)
			e.expectServedBy(g, c, sb.Name)
			t.Logf("claim %s served %s by %s", name, sb.Labels[agentsv1beta1.LabelLaunchType], sb.Name)
		})
	}

	// 6. The claim created through v1alpha1 reads back through v1alpha1 as it was written.
	e.eventually(func(g Gomega) {
		alpha := &extv1alpha1.SandboxClaim{}
		e.get(g, "alpha", alpha)
		g.Expect(alpha.Spec.TemplateRef.Name).To(Equal("tmpl"))
		g.Expect(alpha.Spec.WarmPool).To(HaveValue(Equal(extv1alpha1.WarmPoolPolicy("pool"))))
		g.Expect(alpha.Status.SandboxStatus.Name).To(Equal(p.bound["alpha"].Name))
		g.Expect(alpha.Annotations).NotTo(HaveKey(extv1alpha1.UpstreamClaimStateAnnotation))
	})

	// 7. New claims are stamped at admission and served warm, a v1alpha1 one too, and the
	// members the public controller made for the template with its own network rules serve.
	e.waitForAdmission()
	after := builders.MakeClaim("after", e.ns, "pool").Obj()
	e.create(after)
	e.g.Expect(after.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, hash), "not stamped at admission")
	e.create(builders.MakeClaim("after-np", e.ns, "np-pool").Obj())
	warmpool := extv1alpha1.WarmPoolPolicy("pool")
	e.create(&extv1alpha1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "after-alpha", Namespace: e.ns},
		Spec:       extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "tmpl"}, WarmPool: &warmpool},
	})
	for _, name := range []string{"after", "after-np", "after-alpha"} {
		e.eventually(func(g Gomega) {
			c := e.claim(g, name)
			sb := e.boundSandbox(g, c)
			g.Expect(sb).NotTo(BeNil(), "claim %s not served", name)
			e.expectServedBy(g, c, sb.Name)
			g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm), "claim %s served cold", name)
			g.Expect(e.events(g, "SandboxClaim", name)).To(ContainElement(extv1beta1.EventSandboxAdopted))
			if name == "after-np" {
				g.Expect(p.members["np-pool"]).To(ContainElement(sb.Name), "not served by a member the public controller made")
			}
		})
	}
	e.eventually(func(g Gomega) {
		for pool, n := range map[string]int32{"pool": 3, "np-pool": 2} {
			wp := &extv1beta1.SandboxWarmPool{}
			e.get(g, pool, wp)
			g.Expect(wp.Status.ReadyReplicas).To(Equal(n), "pool %s", pool)
			g.Expect(wp.Status.ObservedGeneration).To(Equal(wp.Generation))
		}
	})

	// 8. Nothing was deleted or recreated, and nothing is: every Sandbox, pod, Service and
	// NetworkPolicy of the public controller is the one it was.
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
	writes := e.Metrics.WritesByKey()
	for key, n := range writes {
		e.g.Expect(strings.HasPrefix(key, "delete ") && n > 0).To(BeFalse(), "sandgate deleted: %s %v", key, n)
	}
	invariants.Check(e.g, e.Client, e.ns)
	t.Logf("sandgate's writes: %v; warm %v, cold %v; took %s", writes, e.Metrics.WarmHits(), e.Metrics.ColdStarts(), time.Since(start).Round(time.Millisecond))
}

// population is what the public controller left: its templates, the members of each pool
// (names), and the Sandbox of each claim it bound.
type population struct {
	tmpl, npTmpl *extv1beta1.SandboxTemplate
	members      map[string][]string
	bound        map[string]*agentsv1beta1.Sandbox
}

// populate writes, as the cluster admin, what users and the public controller wrote: the
// users' templates, pools and claims, and the controller's NetworkPolicies, Sandboxes, pods
// (which kwok runs) and status. See public_test.go for where each fact comes from.
func (e *env) populate() *population {
	e.t.Helper()
	p := &population{members: map[string][]string{}, bound: map[string]*agentsv1beta1.Sandbox{}}
	p.tmpl = builders.MakeTemplate("tmpl", e.ns).PodLabel("app", "agent").
		Service(true).ContainerPort(builders.DefaultContainer, 8080, corev1.ProtocolTCP, "http").Obj()
	p.npTmpl = builders.MakeTemplate("np-tmpl", e.ns).PodLabel("app", "agent").
		NetworkPolicy(&extv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}).Obj()
	pool := builders.MakePool("pool", e.ns, "tmpl").Replicas(3).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj()
	npPool := builders.MakePool("np-pool", e.ns, "np-tmpl").Replicas(2).Obj()
	for _, obj := range []client.Object{p.tmpl, p.npTmpl, pool, npPool} {
		e.create(obj) // the objects as stored, with the schema's defaults the hashes cover
	}
	e.create(publicNetworkPolicy(p.tmpl))
	e.create(publicNetworkPolicy(p.npTmpl))

	var sandboxes []*agentsv1beta1.Sandbox
	for _, pp := range []struct {
		pool *extv1beta1.SandboxWarmPool
		tmpl *extv1beta1.SandboxTemplate
		n    int
	}{{pool, p.tmpl, 3}, {npPool, p.npTmpl, 2}} {
		for range pp.n {
			sb := publicMember(pp.pool, pp.tmpl)
			e.create(sb)
			p.members[pp.pool.Name] = append(p.members[pp.pool.Name], sb.Name)
			sandboxes = append(sandboxes, sb)
		}
	}

	// Claims: warm and alpha adopted members (alpha was created through v1alpha1), cold was
	// served cold, half names a member whose adoption did not finish (the claim's annotation is
	// written first, the Sandbox's patch second), late came after the controller stopped.
	adopted := map[string]string{"warm": names.SimpleNameGenerator.GenerateName("pool-"), "alpha": names.SimpleNameGenerator.GenerateName("pool-")}
	claims := map[string]*extv1beta1.SandboxClaim{}
	for _, name := range []string{"warm", "alpha", "cold", "half", "late"} {
		c := builders.MakeClaim(name, e.ns, "pool").Obj()
		if name != "late" {
			c.Annotations = publicObservedAt()
		}
		switch name {
		case "warm", "alpha":
			c.Annotations[agentsv1beta1.AnnotationSandboxName] = adopted[name]
		case "half":
			c.Annotations[agentsv1beta1.AnnotationSandboxName] = p.members["pool"][0]
		}
		if name == "alpha" {
			c.Annotations[extv1alpha1.UpstreamClaimStateAnnotation] = publicAlphaState(name, e.ns, "tmpl", "pool")
		}
		e.create(c)
		claims[name] = c
	}
	for name, sbName := range adopted {
		sb := publicMember(pool, p.tmpl)
		sb.GenerateName, sb.Name = "", sbName
		publicAdopt(sb, claims[name], p.tmpl)
		e.create(sb)
		p.bound[name] = sb
		sandboxes = append(sandboxes, sb)
	}
	cold := publicColdSandbox(claims["cold"], p.tmpl)
	e.create(cold)
	p.bound["cold"] = cold
	sandboxes = append(sandboxes, cold)

	// Their pods, run by kwok, and Services, then the status the public controller wrote.
	services := map[string]*corev1.Service{}
	for _, sb := range sandboxes {
		e.create(publicPod(sb))
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
	for name, sb := range p.bound {
		c := claims[name]
		base := c.DeepCopy()
		c.Status = publicClaimStatus(sb)
		e.g.Expect(e.Client.Status().Patch(e.ctx(), c, client.MergeFrom(base))).To(Succeed())
	}
	for _, wp := range []*extv1beta1.SandboxWarmPool{pool, npPool} {
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

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && pod.Status.Phase == corev1.PodRunning && len(pod.Status.PodIPs) > 0
		}
	}
	return false
}

// snapshot is the UID of every Sandbox, pod, Service and NetworkPolicy of the namespace, by
// name.
type snapshot struct {
	sandboxes, pods, services, policies map[string]types.UID
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	s := snapshot{map[string]types.UID{}, map[string]types.UID{}, map[string]types.UID{}, map[string]types.UID{}}
	for list, into := range map[client.ObjectList]map[string]types.UID{
		&agentsv1beta1.SandboxList{}: s.sandboxes, &corev1.PodList{}: s.pods, &corev1.ServiceList{}: s.services,
		&networkingv1.NetworkPolicyList{}: s.policies,
	} {
		e.g.Expect(e.Client.List(e.ctx(), list, client.InNamespace(e.ns))).To(Succeed())
		e.g.Expect(meta.EachListItem(list, func(obj runtime.Object) error {
			o := obj.(client.Object)
			if o.GetDeletionTimestamp().IsZero() {
				into[o.GetName()] = o.GetUID()
			}
			return nil
		})).To(Succeed())
	}
	return s
}

// webhookConfigs are sandgate's admission webhook configurations as installed.
type webhookConfigs struct {
	mutating   []admissionregistrationv1.MutatingWebhookConfiguration
	validating []admissionregistrationv1.ValidatingWebhookConfiguration
}

// removeWebhooks deletes sandgate's webhook configurations, so that the namespace can be
// written as the public controller wrote it, and returns them for applyWebhooks. It returns
// once the API server admits without them.
func (e *env) removeWebhooks() webhookConfigs {
	e.t.Helper()
	var w webhookConfigs
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	e.g.Expect(e.Client.List(e.ctx(), &mutating)).To(Succeed())
	e.g.Expect(e.Client.List(e.ctx(), &validating)).To(Succeed())
	e.g.Expect(mutating.Items).NotTo(BeEmpty())
	for i := range mutating.Items {
		e.g.Expect(e.Client.Delete(e.ctx(), &mutating.Items[i])).To(Succeed())
		w.mutating = append(w.mutating, *mutating.Items[i].DeepCopy())
	}
	for i := range validating.Items {
		e.g.Expect(e.Client.Delete(e.ctx(), &validating.Items[i])).To(Succeed())
		w.validating = append(w.validating, *validating.Items[i].DeepCopy())
	}
	// Without them nothing answers for sandgate's webhooks, which fail closed: a create
	// succeeds only once the API server no longer calls them.
	e.eventually(func(g Gomega) {
		probe := builders.MakeTemplate("probe", e.ns).Obj()
		g.Expect(e.Client.Create(e.ctx(), probe, client.DryRunAll)).To(Succeed())
	})
	return w
}

// applyWebhooks installs the webhook configurations again, as applying sandgate's manifests
// does.
func (e *env) applyWebhooks(w webhookConfigs) {
	e.t.Helper()
	for _, m := range w.mutating {
		m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
		e.create(&m)
	}
	for _, v := range w.validating {
		v.ObjectMeta = metav1.ObjectMeta{Name: v.Name, Labels: v.Labels, Annotations: v.Annotations}
		e.create(&v)
	}
}

// waitForAdmission returns once the API server calls sandgate's claim stamping (it loads
// webhook configurations asynchronously): a dry-run claim comes back stamped.
func (e *env) waitForAdmission() {
	e.t.Helper()
	e.eventually(func(g Gomega) {
		probe := builders.MakeClaim("probe", e.ns, "pool").Obj()
		g.Expect(e.Client.Create(e.ctx(), probe, client.DryRunAll)).To(Succeed())
		g.Expect(probe.Annotations).To(HaveKey(agentsv1beta1.AnnotationWebhookFirstObservedAt))
	})
}

func (e *env) claim(g Gomega, name string) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{}
	e.get(g, name, c)
	return c
}

// boundSandbox is the Sandbox the claim controls, nil when none.
func (e *env) boundSandbox(g Gomega, c *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns), client.MatchingLabels{agentsv1beta1.LabelClaimUID: string(c.UID)})).To(Succeed())
	var found []agentsv1beta1.Sandbox
	for _, sb := range list.Items {
		if policy.IsControlledBy(&sb, policy.ClaimKind, c.UID) {
			found = append(found, sb)
		}
	}
	g.Expect(len(found)).To(BeNumerically("<=", 1), "claim %s bound to %d sandboxes", c.Name, len(found))
	if len(found) == 0 {
		return nil
	}
	return &found[0]
}

// expectServedBy asserts that claim c is Ready and served by Sandbox name: the Sandbox is
// controlled by the claim and carries its UID, the claim's status and sandbox-name
// annotation name it, and the claim's Ready condition is of its current generation.
func (e *env) expectServedBy(g Gomega, c *extv1beta1.SandboxClaim, name string) {
	sb := &agentsv1beta1.Sandbox{}
	e.get(g, name, sb)
	g.Expect(policy.IsControlledBy(sb, policy.ClaimKind, c.UID)).To(BeTrue(), "sandbox %s not controlled by claim %s", name, c.Name)
	g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelClaimUID, string(c.UID)))
	ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
	g.Expect(ready).NotTo(BeNil(), "claim %s has no Ready condition", c.Name)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "claim %s: %+v", c.Name, ready)
	g.Expect(ready.ObservedGeneration).To(Equal(c.Generation))
	g.Expect(c.Status.Sandbox.Name).To(Equal(name))
	g.Expect(c.Status.Sandbox.PodIPs).To(Equal(sb.Status.PodIPs))
	g.Expect(c.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxName, name))
}

// events lists the reasons of the events about an object of the test's namespace.
func (e *env) events(g Gomega, kind, name string) []string {
	reasons, err := framework.EventReasons(e.ctx(), e.Client, e.ns, kind, name)
	g.Expect(err).NotTo(HaveOccurred())
	return reasons
}
