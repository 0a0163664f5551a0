//go:build integration

// Package takeover_test hands sandgate a cluster populated exactly as the public
// agent-sandbox controller (v0.5.x, and v1.0.x with its v1beta1-only CRDs) leaves it, and
// checks that afterwards every binding invariant of the claims suite holds (test/framework/invariants),
// that nothing was deleted or recreated, and that claims old and new are served.
//
// It is a suite of its own because the switch-over happens before sandgate's admission
// exists: sandgate's webhook configurations are cluster-wide and fail closed, and they would
// refuse (or rewrite) what the public controller wrote. The test removes them, writes the
// public controller's objects as the cluster admin, applies them again — the switch-over's
// "apply sandgate's webhooks" step — and only then starts sandgate's manager. In the claims
// suite's cluster that would stop admission for every other test.
package takeover_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

var cluster *framework.Cluster

// SANDGATE_TEST_LOG=<file> keeps the controllers' logs (see framework.RunSuite).
func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileFast, Webhooks: true},
		func(c *framework.Cluster) { cluster = c }))
}

// env is the test's namespace, its admin client and, once started, sandgate's manager.
type env struct {
	*framework.Manager
	t  *testing.T
	g  *WithT
	ns string
}

// setup creates the test's namespace; the manager starts after the population step.
func setup(t *testing.T) *env {
	t.Helper()
	g := NewWithT(t)
	admin, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	e := &env{Manager: &framework.Manager{Client: admin}, t: t, g: g, ns: framework.NamespaceName(t)}
	framework.CreateNamespace(t, admin, e.ns)
	return e
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) key(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.ns, Name: name} }

func (e *env) create(obj client.Object) {
	e.t.Helper()
	e.g.Expect(e.Client.Create(e.ctx(), obj)).To(Succeed())
}

func (e *env) eventually(f func(g Gomega)) {
	e.t.Helper()
	e.g.Eventually(f).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

func (e *env) consistently(f func(g Gomega)) {
	e.t.Helper()
	e.g.Consistently(f).WithTimeout(framework.Quiet).WithPolling(framework.Interval).Should(Succeed())
}

func (e *env) get(g Gomega, name string, obj client.Object) {
	g.Expect(e.Client.Get(e.ctx(), e.key(name), obj)).To(Succeed())
}
