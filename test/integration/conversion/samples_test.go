//go:build integration

package conversion_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// header returns the column names of kubectl get's table.
func header(out string) []string {
	return strings.Fields(strings.SplitN(out, "\n", 2)[0])
}

// A user of the public project's v1alpha1 applies its manifests unchanged: all four kinds are
// created (kubectl shows the deprecation warnings), the claim is served warm from the pool it
// names, kubectl lists and scales the v1alpha1 resources, and v1beta1 sees the same objects.
func TestV1alpha1SamplesApplyAndTheClaimIsServedWarm(t *testing.T) {
	e := setup(t)
	out, warnings := e.kubectl("apply", "-k", samples(t))
	e.g.Expect(out).To(And(
		ContainSubstring("sandbox.agents.x-k8s.io/sandbox-sample-v1alpha1 created"),
		ContainSubstring("sandboxtemplate.extensions.agents.x-k8s.io/python-agent-v1alpha1 created"),
		ContainSubstring("sandboxwarmpool.extensions.agents.x-k8s.io/python-agent-pool-v1alpha1 created"),
		ContainSubstring("sandboxclaim.extensions.agents.x-k8s.io/claim-sample-v1alpha1 created"),
	))
	e.g.Expect(warnings).To(And(
		ContainSubstring("Warning: extensions.agents.x-k8s.io/v1alpha1 SandboxClaim is deprecated"),
		ContainSubstring("Warning: agents.x-k8s.io/v1alpha1 Sandbox is deprecated"),
	))

	const pool = "python-agent-pool-v1alpha1"
	claim := &extv1alpha1.SandboxClaim{}
	e.g.Eventually(func(g Gomega) {
		e.get(g, "claim-sample-v1alpha1", claim)
		g.Expect(meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "conditions %+v", claim.Status.Conditions)
	}, framework.Timeout, framework.Interval).Should(Succeed())
	// Read back as written, bound to a member of the pool, warm.
	e.g.Expect(claim.Spec.TemplateRef.Name).To(Equal("python-agent-v1alpha1"))
	e.g.Expect(claim.Spec.WarmPool).To(HaveValue(BeEquivalentTo(pool)))
	e.g.Expect(claim.Spec.AdditionalPodMetadata.Labels).To(HaveKeyWithValue("sandbox.users.io/team", "research"))
	e.g.Expect(claim.Status.SandboxStatus.Name).To(HavePrefix(pool + "-"))
	e.g.Expect(claim.Status.SandboxStatus.PodIPs).NotTo(BeEmpty())
	bound := &agentsv1beta1.Sandbox{}
	e.get(e.g, claim.Status.SandboxStatus.Name, bound)
	e.g.Expect(bound.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm))
	e.g.Expect(metav1.GetControllerOf(bound)).To(HaveField("UID", claim.UID))
	// The v1beta1 form of the same claim names the pool.
	beta := &extv1beta1.SandboxClaim{}
	e.get(e.g, claim.Name, beta)
	e.g.Expect(beta.Spec.WarmPoolRef.Name).To(Equal(pool))

	// The standalone Sandbox runs: replicas 1, one pod.
	e.g.Eventually(func(g Gomega) {
		sb := &agentsv1alpha1.Sandbox{}
		e.get(g, "sandbox-sample-v1alpha1", sb)
		g.Expect(sb.Spec.Replicas).To(HaveValue(Equal(int32(1))))
		g.Expect(sb.Status.Replicas).To(Equal(int32(1)))
		g.Expect(meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue(), "conditions %+v", sb.Status.Conditions)
		g.Expect(sb.Status.ServiceFQDN).To(Equal("sandbox-sample-v1alpha1." + e.ns + ".svc.cluster.local"))
	}, framework.Timeout, framework.Interval).Should(Succeed())

	out, _ = e.kubectl("get", "sandboxes.v1alpha1.agents.x-k8s.io")
	e.g.Expect(header(out)).To(Equal([]string{"NAME", "READY", "REASON", "AGE"}))
	e.g.Expect(out).To(And(ContainSubstring("sandbox-sample-v1alpha1"), ContainSubstring(claim.Status.SandboxStatus.Name)))
	out, _ = e.kubectl("get", "sandboxclaims.v1alpha1.extensions.agents.x-k8s.io")
	e.g.Expect(header(out)).To(Equal([]string{"NAME", "READY", "SANDBOX", "REASON", "AGE"}))
	e.g.Expect(out).To(ContainSubstring(claim.Status.SandboxStatus.Name))
	out, _ = e.kubectl("get", "sandboxtemplates.v1alpha1.extensions.agents.x-k8s.io", "-o", "name")
	e.g.Expect(out).To(ContainSubstring("python-agent-v1alpha1"))

	// kubectl scale through v1alpha1's scale subresource sets the v1beta1 replicas.
	e.kubectl("scale", "sandboxwarmpools.v1alpha1.extensions.agents.x-k8s.io/"+pool, "--replicas=3")
	gotPool := &extv1beta1.SandboxWarmPool{}
	e.get(e.g, pool, gotPool)
	e.g.Expect(gotPool.Spec.Replicas).To(HaveValue(Equal(int32(3))))
	e.g.Eventually(func(g Gomega) {
		p := &extv1alpha1.SandboxWarmPool{}
		e.get(g, pool, p)
		g.Expect(p.Status.ReadyReplicas).To(Equal(int32(3)))
	}, framework.Timeout, framework.Interval).Should(Succeed())

	// Applying the same manifests again changes no spec but the pool's replicas, which the
	// manifest sets back to 2: v1alpha1 reads back what it wrote. (kubectl reports the Sandbox
	// "configured": its merge patch replaces the container list, whose port protocol the
	// schema defaults, as it does in v1beta1.)
	sandboxBefore, templateBefore := &agentsv1beta1.Sandbox{}, &extv1beta1.SandboxTemplate{}
	e.get(e.g, "sandbox-sample-v1alpha1", sandboxBefore)
	e.get(e.g, "python-agent-v1alpha1", templateBefore)
	out, _ = e.kubectl("apply", "-k", samples(t))
	e.g.Expect(out).To(And(
		ContainSubstring("sandboxtemplate.extensions.agents.x-k8s.io/python-agent-v1alpha1 unchanged"),
		ContainSubstring("sandboxclaim.extensions.agents.x-k8s.io/claim-sample-v1alpha1 unchanged"),
	))
	sandboxAfter, templateAfter := &agentsv1beta1.Sandbox{}, &extv1beta1.SandboxTemplate{}
	e.get(e.g, "sandbox-sample-v1alpha1", sandboxAfter)
	e.get(e.g, "python-agent-v1alpha1", templateAfter)
	e.g.Expect(sandboxAfter.Spec).To(Equal(sandboxBefore.Spec))
	e.g.Expect(templateAfter.Spec).To(Equal(templateBefore.Spec))
	e.get(e.g, pool, gotPool)
	e.g.Expect(gotPool.Spec.Replicas).To(HaveValue(Equal(int32(2))))
}
