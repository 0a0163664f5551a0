//go:build integration

package claims_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// Claims that never pause (docs/design.md, "Refill after the burst"): the public project's
// rapid-burst recipe sends bursts back to back; the pool's wait for a pause ended only at its
// low-water mark, when it refilled everything at once, and the claims that found it dry
// waited out their grace, then cold-started Sandboxes that queued behind the refill.

// TestClaimAmidOthersIsNotHeldByTheRefill: claims keep coming, never a quiet period apart,
// and take every member of the pool, which holds its refill back until they pause (its
// low-water mark and the deferral's bound are off here). A claim that then finds nothing to
// take is served while the claims keep coming (cold, as it came amid others; a claim that
// waits for a member would end the pool's wait and take the member it starts), rather than
// wait out its grace (as long as the test waits) for members the pool holds back: before, it
// waited, and was served only once the claims stopped.
func TestClaimAmidOthersIsNotHeldByTheRefill(t *testing.T) {
	e := setupWithoutManager(t, framework.Timeout)
	e.opts.Refill = &reconcilers.RefillPolicy{QuietPeriod: reconcilers.DefaultRefillQuietPeriod}
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	initial := map[string]bool{}
	for _, m := range e.waitPoolReady("pool", 2) {
		initial[m.Name] = true
	}

	// Claims arrive a quarter of the quiet period apart, from a goroutine of their own, until
	// one beyond the pool's two members is Ready: the claims never pause while the test looks.
	ctx, stop := context.WithCancel(e.ctx())
	created := make(chan string, 64)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	wg.Go(func() {
		defer close(created)
		tick := time.NewTicker(reconcilers.DefaultRefillQuietPeriod / 4)
		defer tick.Stop()
		for i := 0; ; i++ {
			name := fmt.Sprint("c-", i)
			if err := e.Client.Create(ctx, builders.MakeClaim(name, e.ns, "pool").Obj()); err != nil {
				if ctx.Err() == nil {
					t.Errorf("creating claim %s: %v", name, err)
				}
				return
			}
			created <- name
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	var claims []string
	var served *extv1beta1.SandboxClaim
	for name := range created {
		claims = append(claims, name)
		if served == nil {
			e.g.Expect(len(claims)).To(BeNumerically("<", 40), "no claim beyond the pool's %d members was served while claims kept arriving", len(initial))
			if served = e.servedBeyond(initial); served != nil {
				stop()
			}
		}
	}
	t.Logf("claim %s, amid the others, was served by Sandbox %s (launch type %s)", served.Name,
		e.boundSandbox(e.g, served).Name, e.boundSandbox(e.g, served).Labels[agentsv1beta1.LabelLaunchType])
	e.expectAllServed(claims)
	checkInvariants(e.g, e)
}

// TestColdClaimGoesBeforeTheRefill: a claim whose pool is empty does not wait behind the
// members another pool is starting. With one Sandbox worker the members queue up one behind
// the other; the claim's cold-started Sandbox, queued after them, gets its pod before those
// still waiting. Before, it waited for every one of them (first in, first out).
func TestColdClaimGoesBeforeTheRefill(t *testing.T) {
	e := setupWithoutManager(t, time.Second)
	e.opts.Configure = func(o *operator.Options) { o.SandboxWorkers = 1 }
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("empty", e.ns, "tmpl").Replicas(0).Obj())
	e.create(builders.MakePool("big", e.ns, "tmpl").Replicas(150).Obj())

	// Members without a pod yet are queued in the Sandbox controller, ahead of what comes next.
	var queued []string
	e.eventually(func(g Gomega) {
		pods := e.podNames(g)
		queued = nil
		for _, m := range e.members(g, "big") {
			if !pods[m.Annotations[agentsv1beta1.AnnotationPodName]] {
				queued = append(queued, m.Annotations[agentsv1beta1.AnnotationPodName])
			}
		}
		g.Expect(len(queued)).To(BeNumerically(">=", 50))
	})
	e.create(builders.MakeClaim("cold", e.ns, "empty").Obj())
	_, sb := e.waitClaimReady("cold")
	e.g.Expect(sb.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeCold))
	e.waitPoolReady("big", 150)

	// Pods' resourceVersions are ordered: which pod was created first.
	rv := func(name string) int64 {
		pod := &corev1.Pod{}
		e.g.Expect(e.Client.Get(e.ctx(), e.key(name), pod)).To(Succeed())
		v, err := strconv.ParseInt(pod.ResourceVersion, 10, 64)
		e.g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	cold := rv(sb.Annotations[agentsv1beta1.AnnotationPodName])
	after := 0
	for _, name := range queued {
		if rv(name) > cold {
			after++
		}
	}
	t.Logf("the cold claim's pod came before %d of the %d members queued ahead of it", after, len(queued))
	e.g.Expect(after).To(BeNumerically(">", 0), "the cold claim's pod was created after every member queued before it")
	checkInvariants(e.g, e)
}

// servedBeyond returns a Ready claim bound to a Sandbox that is none of initial, if any.
func (e *env) servedBeyond(initial map[string]bool) *extv1beta1.SandboxClaim {
	var claims extv1beta1.SandboxClaimList
	e.g.Expect(e.Client.List(e.ctx(), &claims, client.InNamespace(e.ns))).To(Succeed())
	byUID := map[string]string{}
	for _, sb := range e.sandboxes(e.g) {
		if uid := sb.Labels[agentsv1beta1.LabelClaimUID]; uid != "" {
			byUID[uid] = sb.Name
		}
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if sb, ok := byUID[string(c.UID)]; ok && !initial[sb] && ready(c.Status.Conditions) {
			return c
		}
	}
	return nil
}

// podNames are the names of the test namespace's pods.
func (e *env) podNames(g Gomega) map[string]bool {
	var pods corev1.PodList
	g.Expect(e.Client.List(e.ctx(), &pods, client.InNamespace(e.ns))).To(Succeed())
	out := make(map[string]bool, len(pods.Items))
	for _, p := range pods.Items {
		out[p.Name] = true
	}
	return out
}
