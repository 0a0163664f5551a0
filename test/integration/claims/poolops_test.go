//go:build integration

package claims_test

import (
	"math"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The warm pool operations of the public controller's flags (--enable-warm-pool-eviction,
// --sandbox-warm-pool-readiness-grace-period, --sandbox-warm-pool-unschedulable-recheck-interval,
// --sandbox-warm-pool-max-batch-size, --sandbox-warm-pool-max-refill-rate,
// --sandbox-warm-pool-replenish-delay) and its NodeSpread pick.

// setupWarmPool starts the test's manager with the warm pool settings changed by configure.
func setupWarmPool(t *testing.T, configure func(*operator.WarmPoolSettings)) *env {
	t.Helper()
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) { configure(&o.WarmPool) }
	e.Manager = cluster.StartManager(t, e.opts)
	return e
}

// podOfSandbox is the pod of a Sandbox (named as its pod-name annotation says).
func (e *env) podOfSandbox(g Gomega, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	pod := &corev1.Pod{}
	g.Expect(e.Client.Get(e.ctx(), e.key(sb.Annotations[agentsv1beta1.AnnotationPodName]), pod)).To(Succeed())
	return pod
}

// TestPoolEvictionMark: the pods of idle members are safe to evict, the pod of a claimed
// member is not, and the claim costs no write more for it (one pod patch, made anyway).
func TestPoolEvictionMark(t *testing.T) {
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	members := e.waitPoolReady("pool", 2)
	for _, m := range members {
		e.eventually(func(g Gomega) {
			g.Expect(e.podOfSandbox(g, &m).Annotations).To(HaveKeyWithValue(reconcilers.AnnotationSafeToEvict, "true"), "idle member %s", m.Name)
		})
	}

	time.Sleep(framework.Quiet)
	before := e.writes()
	e.create(builders.MakeClaim("c1", e.ns, "pool").Obj())
	_, sb := e.waitClaimReady("c1")
	// Ready means the claim's pod write is done: the mark is gone with it.
	pod := e.podOfSandbox(e.g, sb)
	e.g.Expect(pod.Annotations).NotTo(HaveKey(reconcilers.AnnotationSafeToEvict), "claimed pod %s", pod.Name)
	e.g.Expect(pod.Labels).NotTo(HaveKey(agentsv1beta1.LabelWarmPoolSandbox))
	e.g.Expect(sb.Annotations).NotTo(HaveKey(reconcilers.AnnotationSafeToEvict), "claimed Sandbox %s", sb.Name)

	for _, m := range e.waitPoolReady("pool", 2) {
		e.eventually(func(g Gomega) {
			g.Expect(e.podOfSandbox(g, &m).Annotations).To(HaveKeyWithValue(reconcilers.AnnotationSafeToEvict, "true"), "refilled member %s", m.Name)
		})
	}
	time.Sleep(framework.Quiet)
	d := delta(e.writes(), before)
	t.Logf("writes for one warm claim, refill included: %v", d)
	e.g.Expect(d).To(HaveKeyWithValue("patch pods success", 1.0), "one pod write: the claim's")
	e.g.Expect(d).To(HaveKeyWithValue("patch sandboxes success", 1.0), "one Sandbox write: the bind")
	e.g.Expect(e.Metrics.Conflicts()).To(BeZero())
	checkInvariants(e.g, e)
}

// TestPoolEvictionMarkOff: with --enable-warm-pool-eviction=false no pod is marked.
func TestPoolEvictionMarkOff(t *testing.T) {
	e := setupWarmPool(t, func(w *operator.WarmPoolSettings) { w.EnableEviction = false })
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	m := e.waitPoolReady("pool", 1)[0]
	e.g.Expect(m.Annotations).NotTo(HaveKey(reconcilers.AnnotationSafeToEvict))
	e.g.Expect(e.podOfSandbox(e.g, &m).Annotations).NotTo(HaveKey(reconcilers.AnnotationSafeToEvict))
}

// TestPoolReplacesStuckMember: a member whose pod never becomes Ready (bound to a node no
// kubelet runs) is replaced once the readiness grace period is over, not before.
func TestPoolReplacesStuckMember(t *testing.T) {
	const grace = 4 * time.Second
	e := setupWarmPool(t, func(w *operator.WarmPoolSettings) { w.ReadinessGracePeriod = grace })
	tmpl := builders.MakeTemplate("tmpl", e.ns).Obj()
	tmpl.Spec.PodTemplate.Spec.NodeName = "no-kubelet-runs-here"
	e.create(tmpl)
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())

	var first agentsv1beta1.Sandbox
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(1))
		first = members[0]
	})
	e.consistently(grace/2, func(g Gomega) {
		g.Expect(names(e.members(g, "pool"))).To(Equal([]string{first.Name}), "replaced within the grace period")
	})
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(1))
		g.Expect(members[0].Name).NotTo(Equal(first.Name), "stuck member not replaced")
		g.Expect(members[0].CreationTimestamp.Sub(first.CreationTimestamp.Time)).To(BeNumerically(">=", grace-time.Second))
	})
	e.g.Expect(e.writes()).To(HaveKey("delete sandboxes success"))
}

// TestPoolHoldsUnschedulableMembers: members whose pods cannot be scheduled (a node selector no
// node matches) are held past the grace period, not deleted and recreated, and the pool says
// so in a WarmPoolNotProgressing event; once they can be scheduled, the pool fills.
func TestPoolHoldsUnschedulableMembers(t *testing.T) {
	const grace, recheck = 2 * time.Second, time.Second
	e := setupWarmPool(t, func(w *operator.WarmPoolSettings) {
		w.ReadinessGracePeriod, w.UnschedulableRecheckInterval = grace, recheck
	})
	tmpl := builders.MakeTemplate("tmpl", e.ns).Obj()
	tmpl.Spec.PodTemplate.Spec.NodeSelector = map[string]string{"sandgate.dev/test-no-such-node": "true"}
	e.create(tmpl)
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())

	var held []string
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(2))
		for _, m := range members {
			pod := e.podOfSandbox(g, &m)
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodScheduled), HaveField("Status", corev1.ConditionFalse),
				HaveField("Reason", corev1.PodReasonUnschedulable))), "pod %s not unschedulable yet", pod.Name)
		}
		held = names(members)
	})
	// Past the grace period, through several rechecks: the same members.
	e.consistently(grace+4*recheck, func(g Gomega) {
		g.Expect(names(e.members(g, "pool"))).To(Equal(held), "unschedulable members churned")
	})
	e.g.Expect(e.writes()).NotTo(HaveKey("delete sandboxes success"))
	e.eventually(func(g Gomega) {
		g.Expect(e.events(g, "SandboxWarmPool", "pool")).To(ContainElement(reconcilers.EventWarmPoolNotProgressing))
	})
}

// TestPoolPacing: --sandbox-warm-pool-max-refill-rate and --sandbox-warm-pool-max-batch-size
// spread a pool's fill over time (a bucket of 2 creates a second for 6 members), and
// --sandbox-warm-pool-replenish-delay holds the replacement of a claimed member for the delay
// (the quiet period of the refill deferral is off here, so that only the delay holds it).
func TestPoolPacing(t *testing.T) {
	const replicas, delay = 6, 3 * time.Second
	e := setupWithoutManager(t, 0)
	e.opts.Refill = &reconcilers.RefillPolicy{}
	e.opts.Configure = func(o *operator.Options) {
		o.WarmPool.MaxRefillRate, o.WarmPool.MaxBatchSize, o.WarmPool.ReplenishDelay = 2, 2, delay
	}
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(replicas).Obj())
	members := e.waitPoolReady("pool", replicas)
	first, last := members[0].CreationTimestamp.Time, members[0].CreationTimestamp.Time
	for _, m := range members {
		first, last = minTime(first, m.CreationTimestamp.Time), maxTime(last, m.CreationTimestamp.Time)
	}
	// 2 at once, then one every 500ms: about 2s; creationTimestamp has a resolution of 1s.
	t.Logf("fill: first member created %s, last %s", first, last)
	e.g.Expect(last.Sub(first)).To(BeNumerically(">=", time.Second), "the fill was not paced")

	time.Sleep(framework.Quiet)
	e.create(builders.MakeClaim("c1", e.ns, "pool").Obj())
	e.waitClaimReady("c1")
	e.consistently(delay-time.Second, func(g Gomega) {
		g.Expect(e.members(g, "pool")).To(HaveLen(replicas-1), "replaced within the replenish delay")
	})
	e.waitPoolReady("pool", replicas)
	checkInvariants(e.g, e)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestBurstSpreadsOverNodes: a burst's claims take members from every node rather than
// emptying one: no node gives more than ceil(claims/nodes)+1, as long as its members allow
// (a node may have to give more when the others have run out, which NodeSpread's own
// order says: a node that starts with many more members gives its surplus first).
func TestBurstSpreadsOverNodes(t *testing.T) {
	const replicas, claims = 30, 12
	e := setup(t, 0)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(replicas).Obj())
	members := e.waitPoolReady("pool", replicas)
	perNode := map[string]int{}
	for _, m := range members {
		e.g.Expect(m.Status.NodeName).NotTo(BeEmpty(), "member %s on no node", m.Name)
		perNode[m.Status.NodeName]++
	}
	t.Logf("members per node before the burst: %v", perNode)

	names, err := e.createClaims("s", claims, claims, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	bound := e.expectAllServed(names)
	picked := map[string]int{}
	for _, sb := range bound {
		e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm))
		picked[sb.Status.NodeName]++
	}
	t.Logf("claims per node: %v", picked)

	// NodeSpread's picks from the members as they were (the most members left first), the
	// bound the test allows at most one beyond, and never less than an even share.
	want := nodeSpread(perNode, claims)
	limit := int(math.Ceil(float64(claims)/float64(controlplane.DefaultNodes))) + 1
	for _, n := range want {
		limit = max(limit, n+1)
	}
	for node, n := range picked {
		e.g.Expect(n).To(BeNumerically("<=", limit), "node %s gave %d of %d claims (members %v, picks %v)", node, n, claims, perNode, picked)
	}
	e.g.Expect(len(picked)).To(BeNumerically(">=", len(want)), "nodes that gave members: %v, NodeSpread's: %v", picked, want)
}

// nodeSpread is how many of n picks NodeSpread takes from each node of counts.
func nodeSpread(counts map[string]int, n int) map[string]int {
	left := map[string]int{}
	nodes := make([]string, 0, len(counts))
	for k, v := range counts {
		left[k] = v
		nodes = append(nodes, k)
	}
	sort.Strings(nodes)
	out := map[string]int{}
	for range n {
		best := ""
		for _, k := range nodes {
			if left[k] > 0 && (best == "" || left[k] > left[best]) {
				best = k
			}
		}
		if best == "" {
			break
		}
		left[best]--
		out[best]++
	}
	return out
}
