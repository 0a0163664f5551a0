//go:build integration

// Package conversion_test proves the deprecated v1alpha1 API against a local control plane
// with the real webhooks and controllers: the API server converts every v1alpha1 request
// through the manager's conversion webhook (CRDs installed as test/env/controlplane installs them,
// pointed at the local webhook address with the local CA), and admits it through the v1beta1
// admission webhooks (matchPolicy Equivalent). kubectl applies, lists and scales v1alpha1
// objects; a v1alpha1 claim is served warm from a pool, stamped at admission, and a
// non-operator's v1alpha1 binding is refused. Each test gets its own namespace and manager;
// they run one after the other because one webhook port serves them all.
package conversion_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileFast, Webhooks: true},
		func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace and manager.
type env struct {
	*framework.Manager
	t  *testing.T
	g  *WithT
	ns string
}

// setup creates the test's namespace and starts a manager with the extensions and the
// webhooks on it. Claims wait for a warm member as long as a test waits for anything: when a
// test wants a warm binding, a cold start is a failure, not a fallback.
func setup(t *testing.T) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	mgr := cluster.StartManager(t, framework.ManagerOptions{
		Namespaces: []string{ns}, Extensions: true, Webhooks: true, ColdStartGrace: framework.Timeout,
	})
	framework.CreateNamespace(t, mgr.Client, ns)
	return &env{Manager: mgr, t: t, g: NewWithT(t), ns: ns}
}

func (e *env) ctx() context.Context { return context.Background() }

// kubectl runs kubectl as the cluster admin in the test's namespace and returns its output
// and, apart, the API server's warnings it printed.
func (e *env) kubectl(args ...string) (out, warnings string) {
	e.t.Helper()
	cmd := cluster.Kubectl(append([]string{"-n", e.ns}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	e.g.Expect(cmd.Run()).To(Succeed(), "kubectl %v: %s%s", args, stdout.String(), stderr.String())
	return stdout.String(), stderr.String()
}

// samples is config/samples/v1alpha1.
func samples(t *testing.T) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", "samples", "v1alpha1")
}

// alphaSandbox is the v1alpha1 form of a v1beta1 Sandbox built by internal/testing/builders.
func alphaSandbox(t *testing.T, sb *agentsv1beta1.Sandbox) *agentsv1alpha1.Sandbox {
	t.Helper()
	out := &agentsv1alpha1.Sandbox{}
	if err := out.ConvertFrom(sb); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) get(g Gomega, key string, obj client.Object) {
	g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: key}, obj)).To(Succeed())
}
