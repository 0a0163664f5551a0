//go:build integration

package claims_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// createClaims creates n claims named <prefix><i> from parallel goroutines, retrying a
// create that fails (the webhook may be down while a manager restarts), and returns their
// names. started is closed once the first claim exists.
func (e *env) createClaims(prefix string, n, parallel int, started chan<- struct{}) ([]string, error) {
	names := make([]string, n)
	var next atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	errs := make([]error, parallel)
	for w := range parallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				names[i] = fmt.Sprint(prefix, i)
				deadline := time.Now().Add(framework.Timeout)
				for {
					err := e.Client.Create(e.ctx(), builders.MakeClaim(names[i], e.ns, "pool").Obj())
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						errs[w] = fmt.Errorf("creating claim %s: %w", names[i], err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				if started != nil {
					once.Do(func() { close(started) })
				}
			}
		})
	}
	wg.Wait()
	return names, errors.Join(errs...)
}

// expectAllServed waits until every claim is Ready and bound, and checks the invariants.
func (e *env) expectAllServed(claims []string) map[string]*agentsv1beta1.Sandbox {
	e.t.Helper()
	var bound map[string]*agentsv1beta1.Sandbox
	e.eventually(func(g Gomega) {
		bound = e.boundAll(g, claims)
		for _, name := range claims {
			c := e.claim(g, name)
			g.Expect(ready(c.Status.Conditions)).To(BeTrue(), "claim %s: %+v", name, c.Status.Conditions)
			g.Expect(c.Status.Sandbox.Name).To(Equal(bound[name].Name))
		}
		checkInvariants(g, e)
	})
	seen := map[string]string{}
	for claim, sb := range bound {
		prev, twice := seen[sb.Name]
		e.g.Expect(twice).To(BeFalse(), "sandbox %s bound to %s and %s", sb.Name, prev, claim)
		seen[sb.Name] = claim
	}
	return bound
}

// expectNothingLeaked: every Sandbox is a pool member or bound to an existing claim, and the
// pool holds exactly its replicas.
func (e *env) expectNothingLeaked(claims []string, replicas int) {
	e.t.Helper()
	e.eventually(func(g Gomega) {
		members := e.members(g, "pool")
		g.Expect(members).To(HaveLen(replicas))
		g.Expect(e.sandboxes(g)).To(HaveLen(len(claims)+replicas), "sandboxes beyond claims and pool")
		checkInvariants(g, e)
	})
}

// TestBurst: 100 claims created at once against a pool of 50. Each claim is bound exactly
// once, no Sandbox twice, and no write on a claim's status conflicts.
//
// At once, so without admission's shedding: on a cluster that has served nothing yet, it
// refuses the claims past the pool's 50 and 20 more for its retry hint, and they come back as
// the refill's members become Ready (a burst in two waves, another scenario: its binds can
// race the new members' status writes, a 409 each).
func TestBurst(t *testing.T) {
	e := setupWithoutManager(t, 0)
	opts := e.opts
	opts.Configure = func(o *operator.Options) { o.ClaimAdmissionMaxWait = 0 }
	e.Manager = cluster.StartManager(t, opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(50).Obj())
	e.waitPoolReady("pool", 50)
	claims, err := e.createClaims("b", 100, 20, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.expectAllServed(claims)
	e.expectNothingLeaked(claims, 50)

	m := e.Metrics
	t.Logf("warm %v, cold %v, lost binds %v, writes %v", m.WarmHits(), m.ColdStarts(), m.BindConflicts(), m.WritesByKey())
	e.g.Expect(m.WarmHits()+m.ColdStarts()).To(Equal(100.0), "each claim served once")
	e.g.Expect(m.WarmHits()).To(BeNumerically(">=", 50))
	e.g.Expect(m.Writes("patch", "sandboxclaims/status")).To(BeNumerically(">=", 100))
	e.g.Expect(m.WritesByKey()).NotTo(HaveKey("patch sandboxclaims/status conflict"), "conflicts on claim status")
	e.g.Expect(m.Conflicts()).To(BeZero(), "409s of any write")
	e.g.Expect(m.Writes("update", "")).To(BeZero())
	// One bind per warm claim: the in-memory reservation keeps this process's claims from
	// racing for a member.
	e.g.Expect(m.Writes("patch", "sandboxes")).To(Equal(m.WarmHits()))
	// The pool made exactly the members it needed: one per warm claim on top of the first 50
	// (expectations keep a lagging cache from over-creating), and had none to delete.
	e.g.Expect(m.WritesByKey()).To(HaveKeyWithValue("create sandboxes success", 50+m.WarmHits()+m.ColdStarts()))
	e.g.Expect(m.Writes("delete", "sandboxes")).To(BeZero())
}

// TestRestartMidBurst: the manager stops while claims pour in and another starts. After it
// settles every claim is served once, nothing is bound twice and nothing leaked.
func TestRestartMidBurst(t *testing.T) {
	e := setupWithoutManager(t, 0)
	var claims []string
	var createErr error
	done := make(chan struct{})
	// The first manager runs in a subtest and stops when the subtest ends: mid-burst, with
	// some claims bound and others not yet created.
	t.Run("first-manager", func(t *testing.T) {
		e := e.sub(t)
		first := cluster.StartManager(t, e.opts)
		e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
		e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(20).Obj())
		e.waitPoolReady("pool", 20)
		started := make(chan struct{})
		go func() {
			defer close(done)
			claims, createErr = e.createClaims("r", 60, 6, started)
		}()
		<-started
		e.g.Eventually(func(g Gomega) {
			g.Expect(first.Metrics.WarmHits()).To(BeNumerically(">=", 5))
		}).WithTimeout(framework.Timeout).WithPolling(5 * time.Millisecond).Should(Succeed())
		t.Logf("stopping the first manager after %v warm binds", first.Metrics.WarmHits())
	})
	second := cluster.StartManager(t, e.opts)
	e.Manager = second
	<-done
	e.g.Expect(createErr).NotTo(HaveOccurred())
	bound := e.expectAllServed(claims)
	e.g.Expect(bound).To(HaveLen(60))
	e.expectNothingLeaked(claims, 20)
	t.Logf("second manager: warm %v, cold %v, lost binds %v", second.Metrics.WarmHits(), second.Metrics.ColdStarts(), second.Metrics.BindConflicts())
}
