//go:build integration

// Package claims_test runs the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers
// against a local control plane with kube-scheduler, the garbage collector and kwok nodes
// that start pods in one step. Each test gets its own namespace and its own manager watching
// only that namespace, so the writes it counts are its own.
//
// Every test ends by checking the binding invariants (checkInvariants): a claim is bound to
// at most one Sandbox and a Sandbox to at most one claim, every Sandbox has a controlling
// owner, every bound Sandbox carries its claim's template hash.
package claims_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/test/framework/invariants"
)

var cluster *framework.Cluster

// SANDGATE_TEST_LOG=<file> keeps the controllers' logs (see framework.RunSuite).
func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileFast, Webhooks: true},
		func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace and manager.
type env struct {
	*framework.Manager
	t    *testing.T
	g    *WithT
	ns   string
	opts framework.ManagerOptions
}

// setup creates the test's namespace and starts a manager with the extensions on it.
func setup(t *testing.T, grace time.Duration) *env {
	t.Helper()
	e := setupWithoutManager(t, grace)
	e.Manager = cluster.StartManager(t, e.opts)
	return e
}

// setupWithoutManager creates the test's namespace; the test starts managers itself.
func setupWithoutManager(t *testing.T, grace time.Duration) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	e := &env{t: t, g: NewWithT(t), ns: ns}
	e.opts = framework.ManagerOptions{Namespaces: []string{ns}, Extensions: true, Webhooks: true, ColdStartGrace: grace}
	direct, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.Manager = &framework.Manager{Client: direct}
	framework.CreateNamespace(t, e.Client, ns)
	return e
}

// sub is e for a subtest: failures end the subtest, not its parent.
func (e *env) sub(t *testing.T) *env {
	return &env{Manager: e.Manager, t: t, g: NewWithT(t), ns: e.ns, opts: e.opts}
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) create(obj client.Object) {
	e.t.Helper()
	e.g.Expect(e.Client.Create(e.ctx(), obj)).To(Succeed())
}

// patch merge-patches an object, as a user would with kubectl patch.
func (e *env) patch(obj client.Object, patch string) {
	e.t.Helper()
	e.g.Expect(e.Client.Patch(e.ctx(), obj, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

func (e *env) eventually(f func(g Gomega)) {
	e.t.Helper()
	e.g.Eventually(f).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

func (e *env) consistently(d time.Duration, f func(g Gomega)) {
	e.t.Helper()
	e.g.Consistently(f).WithTimeout(d).WithPolling(framework.Interval).Should(Succeed())
}

func (e *env) key(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.ns, Name: name} }

func (e *env) claim(g Gomega, name string) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), c)).To(Succeed())
	return c
}

func (e *env) pool(g Gomega, name string) *extv1beta1.SandboxWarmPool {
	p := &extv1beta1.SandboxWarmPool{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), p)).To(Succeed())
	return p
}

func (e *env) template(g Gomega, name string) *extv1beta1.SandboxTemplate {
	tmpl := &extv1beta1.SandboxTemplate{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), tmpl)).To(Succeed())
	return tmpl
}

// templateHash is the template's current hash, the stamp of new claims.
func (e *env) templateHash(g Gomega, name string) string {
	return policy.TemplateHash(e.template(g, name))
}

func (e *env) sandboxes(g Gomega) []agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	return list.Items
}

// members are the pool's unbound members, not being deleted.
func (e *env) members(g Gomega, pool string) []agentsv1beta1.Sandbox {
	var out []agentsv1beta1.Sandbox
	for _, sb := range e.sandboxes(g) {
		if ref := metav1.GetControllerOf(&sb); ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == pool && sb.DeletionTimestamp.IsZero() {
			out = append(out, sb)
		}
	}
	return out
}

// boundSandbox is the Sandbox bound to the claim (nil when none).
func (e *env) boundSandbox(g Gomega, c *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	var found []agentsv1beta1.Sandbox
	for _, sb := range e.sandboxes(g) {
		if sb.Labels[agentsv1beta1.LabelClaimUID] == string(c.UID) {
			found = append(found, sb)
		}
	}
	g.Expect(len(found)).To(BeNumerically("<=", 1), "claim %s bound to %d sandboxes", c.Name, len(found))
	if len(found) == 0 {
		return nil
	}
	return &found[0]
}

func ready(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, agentsv1beta1.ConditionReady)
}

func readyReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, agentsv1beta1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// waitPoolReady waits until the pool has n members, all ready, and says so in its status.
func (e *env) waitPoolReady(pool string, n int) []agentsv1beta1.Sandbox {
	e.t.Helper()
	var members []agentsv1beta1.Sandbox
	e.eventually(func(g Gomega) {
		members = e.members(g, pool)
		g.Expect(members).To(HaveLen(n))
		for _, m := range members {
			g.Expect(ready(m.Status.Conditions)).To(BeTrue(), "member %s not ready", m.Name)
		}
		p := e.pool(g, pool)
		g.Expect(p.Status.Replicas).To(Equal(int32(n)))
		g.Expect(p.Status.ReadyReplicas).To(Equal(int32(n)))
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	})
	return members
}

// waitClaimReady waits until the claim is Ready and returns it with its Sandbox.
func (e *env) waitClaimReady(name string) (*extv1beta1.SandboxClaim, *agentsv1beta1.Sandbox) {
	e.t.Helper()
	var c *extv1beta1.SandboxClaim
	var sb *agentsv1beta1.Sandbox
	e.eventually(func(g Gomega) {
		c = e.claim(g, name)
		g.Expect(ready(c.Status.Conditions)).To(BeTrue(), "claim %s conditions %+v", name, c.Status.Conditions)
		sb = e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil())
		g.Expect(c.Status.Sandbox.Name).To(Equal(sb.Name))
		g.Expect(c.Status.Sandbox.PodIPs).To(Equal(sb.Status.PodIPs))
		g.Expect(c.Status.Sandbox.PodIPs).NotTo(BeEmpty())
		cond := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
		g.Expect(cond.ObservedGeneration).To(Equal(c.Generation))
	})
	return c, sb
}

// claimEvents lists the reasons of the events about a claim.
func (e *env) claimEvents(g Gomega, claim string) []string {
	return e.events(g, "SandboxClaim", claim)
}

// events lists the reasons of the events about an object of the test's namespace.
func (e *env) events(g Gomega, kind, name string) []string {
	reasons, err := framework.EventReasons(e.ctx(), e.Client, e.ns, kind, name)
	g.Expect(err).NotTo(HaveOccurred())
	return reasons
}

// checkInvariants asserts what must hold at every moment, in every test (invariants.Check).
func checkInvariants(g Gomega, e *env) {
	invariants.Check(g, e.Client, e.ns)
}

// writes returns the counters of the manager's writes by "verb resource result".
func (e *env) writes() map[string]float64 { return e.Metrics.WritesByKey() }

func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
