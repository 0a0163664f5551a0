//go:build integration

package claims_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/framework"
)

func names(sbs []agentsv1beta1.Sandbox) []string {
	out := make([]string, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, sb.Name)
	}
	sort.Strings(out)
	return out
}

// TestPoolScaling: the pool follows spec.replicas up and down, deleting the newest members
// first, and the /scale subresource an HPA uses reads and writes the same.
func TestPoolScaling(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	first := names(e.waitPoolReady("pool", 2))

	// creationTimestamp has a resolution of one second: make the newer members newer.
	time.Sleep(1100 * time.Millisecond)
	pool := builders.MakePool("pool", e.ns, "tmpl").Obj()
	e.patch(pool, `{"spec":{"replicas":5}}`)
	e.waitPoolReady("pool", 5)
	t.Logf("writes: %v", e.writes())
	e.g.Expect(e.writes()).To(HaveKeyWithValue("create sandboxes success", 5.0), "no member created twice")

	e.patch(pool, `{"spec":{"replicas":2}}`)
	kept := names(e.waitPoolReady("pool", 2))
	e.g.Expect(kept).To(Equal(first), "scale-down deletes the newest members")

	// The scale subresource, as an HPA drives it.
	scale := &autoscalingv1.Scale{}
	e.g.Expect(e.Client.SubResource("scale").Get(e.ctx(), pool, scale)).To(Succeed())
	e.g.Expect(scale.Spec.Replicas).To(Equal(int32(2)))
	e.g.Expect(scale.Status.Replicas).To(Equal(int32(2)))
	e.g.Expect(scale.Status.Selector).To(Equal(agentsv1beta1.LabelWarmPoolSandbox + "=" + agentsv1beta1.NameHash("pool")))
	// The response of a scale write is a Scale: patch through a throwaway object.
	e.g.Expect(e.Client.SubResource("scale").Patch(e.ctx(), builders.MakePool("pool", e.ns, "tmpl").Obj(),
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`)))).To(Succeed())
	e.waitPoolReady("pool", 3)
	e.eventually(func(g Gomega) {
		s := &autoscalingv1.Scale{}
		g.Expect(e.Client.SubResource("scale").Get(e.ctx(), builders.MakePool("pool", e.ns, "tmpl").Obj(), s)).To(Succeed())
		g.Expect(s.Status.Replicas).To(Equal(int32(3)))
	})

	e.patch(pool, `{"spec":{"replicas":0}}`)
	e.waitPoolReady("pool", 0)
	time.Sleep(framework.Quiet)
	e.g.Expect(e.members(e.g, "pool")).To(BeEmpty())
	e.g.Expect(e.Metrics.Conflicts()).To(BeZero())
	checkInvariants(e.g, e)
}

// TestPoolReplacesFailedMembers: a member whose pod ended is replaced.
func TestPoolReplacesFailedMembers(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	failed := e.waitPoolReady("pool", 1)[0]
	pod := &corev1.Pod{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key(failed.Name), pod)).To(Succeed())
	e.g.Expect(e.Client.Status().Patch(e.ctx(), pod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"status":{"phase":"Failed","conditions":[{"type":"Ready","status":"False"}]}}`)))).To(Succeed())
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(1))
		g.Expect(members[0].Name).NotTo(Equal(failed.Name))
		g.Expect(meta.IsStatusConditionTrue(members[0].Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue())
	})
	checkInvariants(e.g, e)
}

// TestRecreateRolloutWhileClaimsArrive reproduces the public stale-adoption bug: claims keep
// arriving while the template changes under a Recreate pool. Every bound Sandbox must carry
// the template version its claim was stamped with, and a warm one must really be built from
// it.
func TestRecreateRolloutWhileClaimsArrive(t *testing.T) {
	e := setup(t, time.Second)
	e.create(builders.MakeTemplate("tmpl", e.ns).Image("agent:v1").Obj())
	// The versions' hashes as the controllers compute them, from the stored templates.
	imageOf := map[string]string{e.templateHash(e.g, "tmpl"): "agent:v1"}
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(6).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj())
	e.waitPoolReady("pool", 6)

	var claims []string
	var createErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 24 {
			name := fmt.Sprint("c", i)
			claims = append(claims, name)
			if err := e.Client.Create(e.ctx(), builders.MakeClaim(name, e.ns, "pool").Obj()); err != nil {
				createErr = err
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	e.patch(builders.MakeTemplate("tmpl", e.ns).Obj(), `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"agent:v2"}]}}}}`)
	imageOf[e.templateHash(e.g, "tmpl")] = "agent:v2"
	wg.Wait()
	e.g.Expect(createErr).NotTo(HaveOccurred())
	e.g.Expect(imageOf).To(HaveLen(2))

	e.eventually(func(g Gomega) {
		for name, sb := range e.boundAll(g, claims) {
			c := e.claim(g, name)
			g.Expect(ready(c.Status.Conditions)).To(BeTrue(), "claim %s", name)
			stamp := c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
			g.Expect(sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]).To(Equal(stamp), "claim %s bound to another version", name)
			if sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm {
				g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal(imageOf[stamp]), "warm sandbox %s built from another version than its label says", sb.Name)
			}
		}
		checkInvariants(g, e)
	})
	// The rollout happened while claims arrived: both versions were claimed.
	stamps := map[string]int{}
	for _, name := range claims {
		stamps[e.claim(e.g, name).Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]]++
	}
	e.g.Expect(stamps).To(HaveLen(2), "claims by stamp: %v", stamps)
	members := e.waitPoolReady("pool", 6)
	for _, m := range members {
		e.g.Expect(m.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal("agent:v2"), "stale member %s kept under Recreate", m.Name)
	}
	t.Logf("warm %v, cold %v, lost binds %v", e.Metrics.WarmHits(), e.Metrics.ColdStarts(), e.Metrics.BindConflicts())
}

// TestOnReplenishKeepsStaleMembers: after a template change an OnReplenish pool keeps its
// members until they are used up; replacements are of the new version; claims of the new
// version never get a stale member.
func TestOnReplenishKeepsStaleMembers(t *testing.T) {
	e := setup(t, 500*time.Millisecond)
	e.create(builders.MakeTemplate("tmpl", e.ns).Image("agent:v1").Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	stale := names(e.waitPoolReady("pool", 2))

	e.patch(builders.MakeTemplate("tmpl", e.ns).Obj(), `{"spec":{"podTemplate":{"spec":{"containers":[{"name":"main","image":"agent:v2"}]}}}}`)
	e.consistently(framework.Quiet, func(g Gomega) {
		g.Expect(names(e.members(g, "pool"))).To(Equal(stale), "stale members replaced under OnReplenish")
	})

	// A claim of the new version is not served a stale member.
	e.create(builders.MakeClaim("new", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("new")
	e.g.Expect(stale).NotTo(ContainElement(sb.Name))
	e.g.Expect(sb.Spec.PodTemplate.Spec.Containers[0].Image).To(Equal("agent:v2"))

	// A stale member used up (here: deleted) is replaced by one of the new version.
	e.g.Expect(e.Client.Delete(e.ctx(), &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: stale[0], Namespace: e.ns}})).To(Succeed())
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(2))
		images := map[string]string{}
		for _, m := range members {
			images[m.Name] = m.Spec.PodTemplate.Spec.Containers[0].Image
		}
		g.Expect(images).To(HaveKeyWithValue(stale[1], "agent:v1"), "the other stale member is kept")
		g.Expect(images).NotTo(HaveKey(stale[0]))
		for name, image := range images {
			if name != stale[1] {
				g.Expect(image).To(Equal("agent:v2"))
			}
		}
	})
	checkInvariants(e.g, e)
}

// TestRefillAfterTheBurst: while claims take a pool's members, the pool defers their
// replacements (RefillDeferred), then refills to replicas once claims pause (RefillResumed),
// creating exactly one member per claimed one. A pool run below its low-water mark refills at
// once, and one run dry still serves every claim.
func TestRefillAfterTheBurst(t *testing.T) {
	e := setup(t, time.Second)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(8).Obj())
	e.waitPoolReady("pool", 8)
	before := e.writes()

	// Claims arriving over a few seconds, more than the pool's quiet period apart in total
	// but less between any two.
	var claims []string
	for i := range 4 {
		name := fmt.Sprintf("b-%d", i)
		e.create(builders.MakeClaim(name, e.ns, "pool").Obj())
		claims = append(claims, name)
		time.Sleep(reconcilers.DefaultRefillQuietPeriod / 2)
	}
	e.expectAllServed(claims)
	e.waitPoolReady("pool", 8)
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "SandboxWarmPool", "pool")).To(ContainElements(reconcilers.EventRefillDeferred, reconcilers.EventRefillResumed))
	})
	e.g.Expect(delta(e.writes(), before)).To(HaveKeyWithValue("create sandboxes success", 4.0), "one replacement per claimed member")
	e.g.Expect(e.Metrics.WarmHits()).To(Equal(4.0))

	// More claims than members: below the low-water mark the pool refills at once, and the
	// claims beyond it are served cold after the grace, as before.
	more, err := e.createClaims("d", 12, 4, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.expectAllServed(more)
	e.waitPoolReady("pool", 8)
	checkInvariants(e.g, e)
}

// TestMetadataOnlyChangeRefreshesMembersInPlace: a template change of pod labels only does not
// replace a Recreate pool's members: they take on the new metadata in place, their pods
// follow, and claims stamped with the new version get members that are exactly it.
func TestMetadataOnlyChangeRefreshesMembersInPlace(t *testing.T) {
	e := setup(t, time.Second)
	e.create(builders.MakeTemplate("tmpl", e.ns).PodLabel("team", "a").Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(3).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj())
	uids := map[types.UID]bool{}
	for _, m := range e.waitPoolReady("pool", 3) {
		uids[m.UID] = true
	}
	e.patch(builders.MakeTemplate("tmpl", e.ns).Obj(), `{"spec":{"podTemplate":{"metadata":{"labels":{"team":"b"}}}}}`)
	hash := e.templateHash(e.g, "tmpl")
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(3))
		for _, m := range members {
			g.Expect(uids).To(HaveKey(m.UID), "member %s was replaced", m.Name)
			g.Expect(m.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateHash, hash))
			g.Expect(policy.SandboxHash(&m)).To(Equal(hash))
			pod := &corev1.Pod{}
			g.Expect(e.Client.Get(e.ctx(), e.key(m.Name), pod)).To(Succeed())
			g.Expect(pod.Labels).To(HaveKeyWithValue("team", "b"))
		}
	})
	e.create(builders.MakeClaim("after", e.ns, "pool").Obj())
	c, sb := e.waitClaimReady("after")
	e.g.Expect(uids).To(HaveKey(sb.UID), "served warm by a refreshed member")
	e.g.Expect(policy.SandboxHash(sb)).To(Equal(c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]))
	checkInvariants(e.g, e)
}

// TestRecreateSwitchToIdenticalTemplate: a Recreate pool switched to another template with the
// same spec is rolled: the members of the old template (whose pods its NetworkPolicy
// selects) go, and claims get members of the new one.
func TestRecreateSwitchToIdenticalTemplate(t *testing.T) {
	e := setup(t, time.Second)
	e.create(builders.MakeTemplate("a", e.ns).Obj())
	e.create(builders.MakeTemplate("b", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "a").Replicas(2).UpdateStrategy(extv1beta1.RecreateUpdateStrategy).Obj())
	old := map[types.UID]bool{}
	for _, m := range e.waitPoolReady("pool", 2) {
		old[m.UID] = true
	}
	e.patch(builders.MakePool("pool", e.ns, "a").Obj(), `{"spec":{"sandboxTemplateRef":{"name":"b"}}}`)
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(2))
		for _, m := range members {
			g.Expect(old).NotTo(HaveKey(m.UID), "member %s of template a kept", m.Name)
			g.Expect(m.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.NameHash("b")))
		}
	})
	e.create(builders.MakeClaim("after", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("after")
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.NameHash("b")))
	e.g.Expect(sb.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateRef, "b"))
	checkInvariants(e.g, e)
}
