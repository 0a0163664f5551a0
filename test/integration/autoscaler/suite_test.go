//go:build integration

// Package autoscaler_test runs the WarmPoolAutoscaler against a local control plane with
// kube-scheduler, the garbage collector and kwok nodes that start pods in one step, beside the
// SandboxWarmPool and SandboxClaim controllers and the admission webhooks (whose claim stamper
// records the arrivals the autoscaler decides from).
//
// Member start-up is the test's to decide where it matters: a "gated" template's pods need a
// node label that no node carries until the test opens the gate, so no member of such a pool
// starts before the test says so, and what the autoscaler did before that cannot have waited
// for one. Nothing here asserts a duration.
package autoscaler_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
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

// gateLabel is the node label a gated template's pods need: its value is the test's
// namespace, so one test's gate is its own.
const gateLabel = "autoscaler-test.sandgate.dev/gate"

// env is one test's namespace and manager.
type env struct {
	*framework.Manager
	t    *testing.T
	g    *WithT
	ns   string
	opts framework.ManagerOptions
}

// setup creates the test's namespace and starts a manager with every controller (the
// autoscaler is on by default) and the webhooks.
func setup(t *testing.T) *env {
	t.Helper()
	e := setupWithoutManager(t)
	e.Manager = cluster.StartManager(t, e.opts)
	return e
}

// setupWithoutManager creates the test's namespace; the test starts managers itself.
func setupWithoutManager(t *testing.T) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	e := &env{t: t, g: NewWithT(t), ns: ns}
	e.opts = framework.ManagerOptions{Namespaces: []string{ns}, Extensions: true, Webhooks: true}
	direct, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	e.Manager = &framework.Manager{Client: direct}
	framework.CreateNamespace(t, e.Client, ns)
	return e
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) key(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.ns, Name: name} }

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

// gatedTemplate creates a template whose pods start only once the test opens its gate
// (openGate).
func (e *env) gatedTemplate(name string) {
	e.t.Helper()
	tmpl := builders.MakeTemplate(name, e.ns).Obj()
	tmpl.Spec.PodTemplate.Spec.NodeSelector = map[string]string{gateLabel: e.ns}
	e.create(tmpl)
}

// openGate labels every node so that the gated template's pods schedule and start.
func (e *env) openGate() {
	e.t.Helper()
	var nodes corev1.NodeList
	e.g.Expect(e.Client.List(e.ctx(), &nodes)).To(Succeed())
	e.g.Expect(nodes.Items).NotTo(BeEmpty())
	for i := range nodes.Items {
		e.patch(&nodes.Items[i], `{"metadata":{"labels":{"`+gateLabel+`":"`+e.ns+`"}}}`)
	}
	e.t.Cleanup(func() {
		for i := range nodes.Items {
			_ = e.Client.Patch(e.ctx(), &nodes.Items[i], client.RawPatch("application/merge-patch+json",
				[]byte(`{"metadata":{"labels":{"`+gateLabel+`":null}}}`)))
		}
	})
}

func (e *env) autoscaler(g Gomega, name string) *autoscalingv1alpha1.WarmPoolAutoscaler {
	a := &autoscalingv1alpha1.WarmPoolAutoscaler{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), a)).To(Succeed())
	return a
}

func (e *env) pool(g Gomega, name string) *extv1beta1.SandboxWarmPool {
	p := &extv1beta1.SandboxWarmPool{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), p)).To(Succeed())
	return p
}

func (e *env) replicas(g Gomega, pool string) int32 {
	p := e.pool(g, pool)
	g.Expect(p.Spec.Replicas).NotTo(BeNil())
	return *p.Spec.Replicas
}

// members are the pool's unbound members, not being deleted.
func (e *env) members(g Gomega, pool string) []agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	var out []agentsv1beta1.Sandbox
	for _, sb := range list.Items {
		if ref := metav1.GetControllerOf(&sb); ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == pool && sb.DeletionTimestamp.IsZero() {
			out = append(out, sb)
		}
	}
	return out
}

// condition is the autoscaler's condition of type typ (nil when absent).
func condition(a *autoscalingv1alpha1.WarmPoolAutoscaler, typ string) *metav1.Condition {
	return meta.FindStatusCondition(a.Status.Conditions, typ)
}

// createClaims creates n claims of pool, one after the other, as a client would.
func (e *env) createClaims(prefix, pool string, n int) []string {
	e.t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + "-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		e.create(builders.MakeClaim(names[i], e.ns, pool).Obj())
	}
	return names
}

// autoscalerEvents lists the events about the autoscaler with the given reason. An event sent
// again with the same message would be counted in its series, which counts here too.
func (e *env) autoscalerEvents(g Gomega, name, reason string) int {
	var list eventsv1.EventList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	n := 0
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "WarmPoolAutoscaler" && ev.Regarding.Name == name && ev.Reason == reason {
			n++
			if ev.Series != nil {
				n += int(ev.Series.Count) - 1
			}
		}
	}
	return n
}

// scale writes the pool's replicas through its /scale subresource as field manager owner,
// as an HPA or `kubectl scale` does.
func (e *env) scale(pool string, n int32, owner string) {
	e.t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)))
	e.g.Expect(e.Client.SubResource("scale").Patch(e.ctx(), builders.MakePool(pool, e.ns, "").Obj(), patch,
		client.WithSubResourceBody(&autoscalingv1.Scale{}), client.FieldOwner(owner))).To(Succeed())
}

// checkInvariants asserts the binding invariants every suite checks at the end of a test.
func checkInvariants(g Gomega, e *env) {
	invariants.Check(g, e.Client, e.ns)
}
