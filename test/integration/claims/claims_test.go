//go:build integration

package claims_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// TestWarmClaimBindsAndPoolRefills: a claim gets a ready member in one bind patch and one
// claim status patch; the member leaves the pool, its pod follows, the pool refills.
func TestWarmClaimBindsAndPoolRefills(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	members := e.waitPoolReady("pool", 2)
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
		e.g.Expect(m.Name).To(HavePrefix("pool-"))
		e.g.Expect(m.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash("pool")))
		e.g.Expect(m.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.NameHash("tmpl")))
		e.g.Expect(m.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateRef, "tmpl"))
	}
	hash := e.templateHash(e.g, "tmpl")
	e.g.Expect(members[0].Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateHash, hash))
	p := e.pool(e.g, "pool")
	e.g.Expect(p.Status.Selector).To(Equal(agentsv1beta1.LabelWarmPoolSandbox + "=" + agentsv1beta1.NameHash("pool")))

	time.Sleep(framework.Quiet) // let the pool's own writes settle before counting
	before := e.writes()
	e.create(builders.MakeClaim("c1", e.ns, "pool").Label(agentsv1beta1.LabelCreatedBy, "go-client").Obj())
	c, sb := e.waitClaimReady("c1")
	e.g.Expect(names).To(ContainElement(sb.Name), "bound a member, not a new sandbox")
	e.g.Expect(c.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, hash))
	e.g.Expect(metav1.IsControlledBy(sb, c)).To(BeTrue())
	e.g.Expect(sb.OwnerReferences).To(HaveLen(1))
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm))
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelCreatedBy, "go-client"))
	e.g.Expect(sb.Labels).NotTo(HaveKey(agentsv1beta1.LabelWarmPoolSandbox))
	e.g.Expect(readyReason(c.Status.Conditions)).To(Equal(agentsv1beta1.ReasonDependenciesReady))

	e.eventually(func(g Gomega) {
		pod := &corev1.Pod{}
		g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), pod)).To(Succeed())
		g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelClaimUID, string(c.UID)))
		g.Expect(pod.Labels).NotTo(HaveKey(agentsv1beta1.LabelWarmPoolSandbox))
	})
	e.eventually(func(g Gomega) {
		g.Expect(e.claim(g, "c1").Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxName, sb.Name))
	})
	refilled := e.waitPoolReady("pool", 2)
	for _, m := range refilled {
		e.g.Expect(m.Name).NotTo(Equal(sb.Name))
	}

	time.Sleep(framework.Quiet)
	d := delta(e.writes(), before)
	t.Logf("writes for one warm claim, refill included: %v", d)
	claimPath := map[string]float64{}
	for k, v := range d {
		if k == "patch sandboxes success" || k == "patch sandboxclaims/status success" || k == "patch sandboxclaims success" {
			claimPath[k] = v
		}
	}
	// Two writes serve the claim (the bind patch, the Ready status); the third, the claim's
	// sandbox-name annotation, is bookkeeping written only once the claim was reported Ready
	// and claims paused.
	want := map[string]float64{"patch sandboxes success": 1, "patch sandboxclaims/status success": 1, "patch sandboxclaims success": 1}
	e.g.Expect(claimPath).To(Equal(want), "writes on the claim path")
	e.g.Expect(e.Metrics.Conflicts()).To(BeZero())
	e.g.Expect(e.Metrics.Writes("update", "")).To(BeZero(), "Update() calls")
	e.g.Expect(d).To(HaveKeyWithValue("create sandboxes success", 1.0), "one refill")
	e.eventually(func(g Gomega) {
		g.Expect(e.claimEvents(g, "c1")).To(Equal([]string{extv1beta1.EventSandboxAdopted}))
	})
	e.g.Expect(e.Metrics.WarmHits()).To(Equal(1.0))
	e.g.Expect(e.Metrics.ColdStarts()).To(BeZero())
	e.g.Expect(e.Metrics.ClaimStartupLatency(true).Count).To(Equal(uint64(1)))
	// Admission stamped webhook-first-observed-at, the start of the claim latency metric.
	e.g.Expect(c.Annotations).To(HaveKey(agentsv1beta1.AnnotationWebhookFirstObservedAt))
	e.g.Expect(e.Metrics.ClaimStartupLatency(false).Count).To(Equal(uint64(1)))
	checkInvariants(e.g, e)
}

// TestWarmClaimPodMetadata: a warm claim's additional pod metadata reaches the member's pod
// through the bind patch and the Sandbox controller.
func TestWarmClaimPodMetadata(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)
	claim := builders.MakeClaim("c", e.ns, "pool").Obj()
	claim.Spec.AdditionalPodMetadata.Labels = map[string]string{"sandbox.users.io/team": "a"}
	claim.Spec.AdditionalPodMetadata.Annotations = map[string]string{"sandbox.users.io/note": "hi"}
	e.create(claim)
	_, sb := e.waitClaimReady("c")
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm))
	e.eventually(func(g Gomega) {
		pod := &corev1.Pod{}
		g.Expect(e.Client.Get(e.ctx(), e.key(sb.Name), pod)).To(Succeed())
		g.Expect(pod.Labels).To(HaveKeyWithValue("sandbox.users.io/team", "a"))
		g.Expect(pod.Annotations).To(HaveKeyWithValue("sandbox.users.io/note", "hi"))
	})
	checkInvariants(e.g, e)
}

// TestColdStart: a claim that no member can serve waits for members being created, then
// gets a Sandbox of its own after the grace.
func TestColdStart(t *testing.T) {
	e := setup(t, 2*time.Second)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	// Members of this template never get a node: they stay pending.
	e.create(withNodeSelector(builders.MakeTemplate("stuck", e.ns).Obj()))
	e.create(builders.MakePool("empty", e.ns, "tmpl").Replicas(0).Obj())
	e.create(builders.MakePool("pending", e.ns, "stuck").Replicas(1).Obj())
	// A member whose pod fits nowhere is not taken while it starts (a claim would inherit it),
	// but waited for.
	e.eventually(func(g Gomega) {
		members := e.members(g, "pending")
		g.Expect(members).To(HaveLen(1))
		g.Expect(meta.IsStatusConditionFalse(members[0].Status.Conditions, agentsv1beta1.ConditionPodScheduled)).To(BeTrue())
	})

	e.create(builders.MakeClaim("from-empty", e.ns, "empty").Obj())
	c, sb := e.waitClaimReady("from-empty")
	e.g.Expect(sb.Name).To(Equal("from-empty"))
	e.g.Expect(metav1.IsControlledBy(sb, c)).To(BeTrue())
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeCold))
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.NameHash("tmpl")))
	e.g.Expect(sb.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateRef, "tmpl"))
	e.g.Expect(sb.Spec.PodTemplate.Spec.DNSPolicy).To(Equal(corev1.DNSNone), "secure default network policy: public DNS")
	e.g.Expect(*sb.Spec.PodTemplate.Spec.AutomountServiceAccountToken).To(BeFalse())

	e.create(builders.MakeClaim("behind-pending", e.ns, "pending").Obj())
	e.consistently(time.Second, func(g Gomega) {
		c := e.claim(g, "behind-pending")
		g.Expect(readyReason(c.Status.Conditions)).To(BeElementOf("", extv1beta1.ReasonSandboxCreatePending))
		g.Expect(e.boundSandbox(g, c)).To(BeNil(), "cold-started while a member of its version was on its way")
	})
	e.eventually(func(g Gomega) {
		c := e.claim(g, "behind-pending")
		sb := e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil())
		g.Expect(sb.Name).To(Equal("behind-pending"))
		g.Expect(c.Status.Sandbox.Name).To(Equal("behind-pending"))
		g.Expect(readyReason(c.Status.Conditions)).To(Equal(extv1beta1.ReasonSandboxNotReady), "its pod cannot be scheduled either")
	})
	e.eventually(func(g Gomega) {
		g.Expect(e.claimEvents(g, "from-empty")).To(Equal([]string{extv1beta1.EventSandboxProvisioned}))
	})
	e.g.Expect(e.Metrics.ColdStarts()).To(Equal(2.0))
	e.g.Expect(e.Metrics.WarmHits()).To(BeZero())
	checkInvariants(e.g, e)
}

// TestRestampedClaimColdStarts: a claim whose template version is gone before it is served
// (its pool recreated the member it waited for) is restamped with the current version and
// cold-started from it, and the binding guard admits that Sandbox at once. (Whether the
// guard's cache shows the restamp by then is a race; TestColdStartGuardReadsAStampThroughTheCache
// in webhooks covers the lagging cache.)
func TestRestampedClaimColdStarts(t *testing.T) {
	e := setup(t, 2*time.Second)
	// Members of this template never get a node: the claim waits for the pending one.
	e.create(withNodeSelector(builders.MakeTemplate("stuck", e.ns).Image("agent:v1").Obj()))
	v1 := e.templateHash(e.g, "stuck")
	e.create(builders.MakePool("pool", e.ns, "stuck").Replicas(1).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj())
	// Known not to fit (a claim takes a member that is starting, not one whose pod fits nowhere).
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(1))
		g.Expect(meta.IsStatusConditionFalse(members[0].Status.Conditions, agentsv1beta1.ConditionPodScheduled)).To(BeTrue())
	})
	e.create(builders.MakeClaim("c", e.ns, "pool").Obj())
	e.g.Expect(e.claim(e.g, "c").Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, v1))

	e.patch(builders.MakeTemplate("stuck", e.ns).Obj(), `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"agent:v2"}]}}}}`)
	v2 := e.templateHash(e.g, "stuck")
	e.g.Expect(v2).NotTo(Equal(v1))
	e.eventually(func(g Gomega) {
		c := e.claim(g, "c")
		g.Expect(c.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, v2))
		sb := e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil())
		g.Expect(sb.Name).To(Equal("c"))
		g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateHash, v2))
		g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal("agent:v2"))
	})
	e.g.Expect(e.writes()).NotTo(HaveKey("create sandboxes forbidden"), "the guard refused the restamped claim's Sandbox")
	// Counted once the create's answer is back, which may be after the Sandbox is visible.
	e.eventually(func(g Gomega) { g.Expect(e.Metrics.ColdStarts()).To(Equal(1.0)) })
	checkInvariants(e.g, e)
}

func withNodeSelector(tmpl *extv1beta1.SandboxTemplate) *extv1beta1.SandboxTemplate {
	tmpl.Spec.PodTemplate.Spec.NodeSelector = map[string]string{"no-such-node": "true"}
	return tmpl
}

// TestClaimBeyondThePool: more claims than members; every claim is served exactly once,
// warm as far as the pool (and its refill within the grace) goes, cold after.
func TestClaimsBeyondThePool(t *testing.T) {
	e := setup(t, 500*time.Millisecond)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	e.waitPoolReady("pool", 2)
	for i := range 5 {
		e.create(builders.MakeClaim(fmt.Sprint("c", i), e.ns, "pool").Obj())
	}
	for i := range 5 {
		e.waitClaimReady(fmt.Sprint("c", i))
	}
	e.g.Expect(e.Metrics.WarmHits()+e.Metrics.ColdStarts()).To(Equal(5.0), "each claim served once")
	e.g.Expect(e.Metrics.WarmHits()).To(BeNumerically(">=", 2))
	e.waitPoolReady("pool", 2)
	checkInvariants(e.g, e)
}

// TestClaimRejections: env, volume claim templates and pod metadata under the template's
// policies.
func TestClaimRejections(t *testing.T) {
	e := setup(t, 0)
	tests := map[string]struct {
		template   *builders.TemplateWrapper
		claim      func(*builders.ClaimWrapper) *builders.ClaimWrapper
		wantReason string
		// admissionRejects: the webhook refuses the claim whatever the template says.
		admissionRejects bool
		// wantEnv is checked on the cold-started Sandbox when the claim is served.
		wantEnv []corev1.EnvVar
	}{
		"env under Allowed cold-starts with the variable": {
			template: builders.MakeTemplate("allowed", e.ns).EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Env("main", "FIXED", "1"),
			claim:    func(c *builders.ClaimWrapper) *builders.ClaimWrapper { return c.Env("TOKEN", "abc", "") },
			wantEnv:  []corev1.EnvVar{{Name: "FIXED", Value: "1"}, {Name: "TOKEN", Value: "abc"}},
		},
		"env under Disallowed is rejected": {
			template:   builders.MakeTemplate("disallowed", e.ns),
			claim:      func(c *builders.ClaimWrapper) *builders.ClaimWrapper { return c.Env("TOKEN", "abc", "") },
			wantReason: extv1beta1.ReasonEnvVarsInjectionRejected,
		},
		"overriding a template variable under Allowed is rejected": {
			template:   builders.MakeTemplate("no-override", e.ns).EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Env("main", "FIXED", "1"),
			claim:      func(c *builders.ClaimWrapper) *builders.ClaimWrapper { return c.Env("FIXED", "2", "main") },
			wantReason: extv1beta1.ReasonEnvVarsInjectionRejected,
		},
		"overriding under Overrides replaces the value": {
			template: builders.MakeTemplate("overrides", e.ns).EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionOverrides).Env("main", "FIXED", "1"),
			claim:    func(c *builders.ClaimWrapper) *builders.ClaimWrapper { return c.Env("FIXED", "2", "main") },
			wantEnv:  []corev1.EnvVar{{Name: "FIXED", Value: "2"}},
		},
		"volume claim templates under Disallowed are rejected": {
			template:   builders.MakeTemplate("no-volumes", e.ns),
			claim:      func(c *builders.ClaimWrapper) *builders.ClaimWrapper { return c.VolumeClaimTemplate("data", "1Gi") },
			wantReason: extv1beta1.ReasonVolumeClaimTemplatesError,
		},
		"reserved pod metadata is invalid": {
			template: builders.MakeTemplate("metadata", e.ns),
			claim: func(c *builders.ClaimWrapper) *builders.ClaimWrapper {
				c.Spec.AdditionalPodMetadata.Labels = map[string]string{agentsv1beta1.LabelClaimUID: "forged"}
				return c
			},
			wantReason:       extv1beta1.ReasonInvalidMetadata,
			admissionRejects: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := e.sub(t)
			tmpl := tc.template.Obj()
			pool := tmpl.Name + "-pool"
			// The claim comes first: admission cannot check it against a template it cannot
			// find, so the claim controller has to, once the template and pool exist.
			claim := tc.claim(builders.MakeClaim(tmpl.Name+"-claim", e.ns, pool)).Obj()
			if tc.admissionRejects {
				err := e.Client.Create(e.ctx(), claim)
				e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "admission should refuse the claim, got %v", err)
				return
			}
			e.create(claim)
			e.create(tmpl)
			e.create(builders.MakePool(pool, e.ns, tmpl.Name).Replicas(1).Obj())
			if tc.wantReason != "" {
				e.eventually(func(g Gomega) {
					c := e.claim(g, claim.Name)
					g.Expect(readyReason(c.Status.Conditions)).To(Equal(tc.wantReason))
				})
				e.consistently(500*time.Millisecond, func(g Gomega) {
					c := e.claim(g, claim.Name)
					g.Expect(e.boundSandbox(g, c)).To(BeNil(), "a rejected claim got a sandbox")
				})
				return
			}
			_, sb := e.waitClaimReady(claim.Name)
			e.g.Expect(sb.Name).To(Equal(claim.Name), "cold start")
			e.g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Env).To(Equal(tc.wantEnv))
		})
	}
	checkInvariants(e.g, e)
}

// TestStampAfterPoolAppears: a claim created before its pool and template waits with the
// contract's reasons, is stamped when they exist, and is then served.
func TestStampAfterPoolAppears(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeClaim("early", e.ns, "later").Obj())
	e.eventually(func(g Gomega) {
		g.Expect(readyReason(e.claim(g, "early").Status.Conditions)).To(Equal(extv1beta1.ReasonWarmPoolNotFound))
	})
	e.create(builders.MakePool("later", e.ns, "tmpl").Replicas(1).Obj())
	e.eventually(func(g Gomega) {
		g.Expect(readyReason(e.claim(g, "early").Status.Conditions)).To(Equal(extv1beta1.ReasonTemplateNotFound))
	})
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	c, _ := e.waitClaimReady("early")
	e.g.Expect(c.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, e.templateHash(e.g, "tmpl")))
	checkInvariants(e.g, e)
}

// TestTemplateNetworkPolicy: the template labels itself and keeps its policy; it repairs
// drift, leaves a foreign policy alone and deletes its own when Unmanaged.
func TestTemplateNetworkPolicy(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	npKey := e.key(reconcilers.NetworkPolicyName("tmpl"))
	// The template's UID, which no other template's pods carry (issue 20, class 3).
	selector := map[string]string{agentsv1beta1.LabelTemplateUID: string(e.template(e.g, "tmpl").UID)}
	e.eventually(func(g Gomega) {
		g.Expect(e.template(g, "tmpl").Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.NameHash("tmpl")))
		np := &networkingv1.NetworkPolicy{}
		g.Expect(e.Client.Get(e.ctx(), npKey, np)).To(Succeed())
		g.Expect(metav1.IsControlledBy(np, e.template(g, "tmpl"))).To(BeTrue())
		g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(selector))
		g.Expect(np.Spec.Egress).To(HaveLen(1))
		g.Expect(np.Spec.Egress[0].To[0].IPBlock.Except).To(ContainElement("10.0.0.0/8"))
		g.Expect(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(map[string]string{"app": "sandbox-router"}))
	})

	e.patch(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: npKey.Name, Namespace: e.ns}},
		`{"spec":{"egress":[],"podSelector":{"matchLabels":{"extra":"x"}}}}`)
	e.eventually(func(g Gomega) {
		np := &networkingv1.NetworkPolicy{}
		g.Expect(e.Client.Get(e.ctx(), npKey, np)).To(Succeed())
		g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(selector), "drift repaired")
		g.Expect(np.Spec.Egress).To(HaveLen(1))
	})

	e.patch(builders.MakeTemplate("tmpl", e.ns).Obj(), `{"spec":{"networkPolicyManagement":"Unmanaged"}}`)
	e.eventually(func(g Gomega) {
		err := e.Client.Get(e.ctx(), npKey, &networkingv1.NetworkPolicy{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "policy still there: %v", err)
	})

	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: reconcilers.NetworkPolicyName("other"), Namespace: e.ns}}
	e.create(foreign)
	e.create(builders.MakeTemplate("other", e.ns).Obj())
	e.consistently(framework.Quiet, func(g Gomega) {
		np := &networkingv1.NetworkPolicy{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKeyFromObject(foreign), np)).To(Succeed())
		g.Expect(np.OwnerReferences).To(BeEmpty(), "a foreign policy was taken over")
		g.Expect(np.Spec.PodSelector.MatchLabels).To(BeEmpty(), "a foreign policy was changed")
	})
}

// bound lists, for the claims named, the Sandbox each is bound to (checking each has one).
func (e *env) boundAll(g Gomega, claims []string) map[string]*agentsv1beta1.Sandbox {
	out := map[string]*agentsv1beta1.Sandbox{}
	for _, name := range claims {
		c := e.claim(g, name)
		sb := e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil(), "claim %s not bound", name)
		out[name] = sb
	}
	return out
}
