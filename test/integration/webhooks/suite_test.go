//go:build integration

// Package webhooks_test checks sandgate's admission through real API calls: the API server of
// a local control plane calls the webhooks as config/webhook configures them, served by a
// manager in the test process. Writes come from three identities: the cluster admin, the
// operator (webhooks.DefaultOperatorUser, as the manager itself runs) and another user; only
// the operator may bind. Each test gets its own namespace and manager; the tests run one after
// the other because one webhook port serves them all.
package webhooks_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/webhooks"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	// No pod runs in these tests: admission is all they look at. The garbage collector runs:
	// its writes go through admission too.
	os.Exit(framework.RunSuite(m, controlplane.Options{Webhooks: true, NoKwok: true, NoScheduler: true},
		func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace, manager and clients.
type env struct {
	t  *testing.T
	g  *WithT
	ns string
	// admin is the cluster admin (system:masters, not the operator).
	admin client.Client
	// operator acts as webhooks.DefaultOperatorUser.
	operator client.Client
	// user is another user, in system:masters too: the API server would let it do anything,
	// admission is what stops it.
	user client.Client
}

const otherUser = "jane@example.com"

func setup(t *testing.T) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	mgr := cluster.StartManager(t, framework.ManagerOptions{Namespaces: []string{ns}, Webhooks: true})
	operator, err := cluster.ClientAs(webhooks.DefaultOperatorUser)
	if err != nil {
		t.Fatal(err)
	}
	user, err := cluster.ClientAs(otherUser)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, g: NewWithT(t), ns: ns, admin: mgr.Client, operator: operator, user: user}
	framework.CreateNamespace(t, e.admin, ns)
	return e
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) create(c client.Client, obj client.Object) {
	e.t.Helper()
	e.g.Expect(c.Create(e.ctx(), obj)).To(Succeed())
}

func (e *env) get(obj client.Object) {
	e.t.Helper()
	e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

// mergePatch sends a JSON merge patch, as `kubectl patch --type=merge` does.
func mergePatch(ctx context.Context, c client.Client, obj client.Object, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// templatePool creates a template and a pool on it (as admin), and returns the template
// as stored (with the schema's defaults, which the hash covers).
func (e *env) templatePool(name string) *extv1beta1.SandboxTemplate {
	e.t.Helper()
	tmpl := builders.MakeTemplate(name, e.ns).Obj()
	e.create(e.admin, tmpl)
	e.create(e.admin, builders.MakePool(name, e.ns, name).Obj())
	e.get(tmpl)
	return tmpl
}

// member creates, as the operator, an unbound member of the pool named after tmpl, built from
// tmpl exactly as the warm pool controller builds one.
func (e *env) member(name string, tmpl *extv1beta1.SandboxTemplate) *agentsv1beta1.Sandbox {
	e.t.Helper()
	return e.memberOf(name, tmpl.Name, policy.TemplateBlueprint(tmpl), policy.TemplateHash(tmpl))
}

// memberOf creates, as the operator, a member of pool with blueprint bp and the template-hash
// label hash: what the pool controller would build, or not.
func (e *env) memberOf(name, pool string, bp agentsv1beta1.SandboxBlueprint, hash string) *agentsv1beta1.Sandbox {
	e.t.Helper()
	p := &extv1beta1.SandboxWarmPool{}
	e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: pool}, p)).To(Succeed())
	sb := builders.MakeSandbox(name, e.ns).
		Label(agentsv1beta1.LabelSandboxTemplateHash, hash).
		Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash(pool)).Obj()
	sb.Spec.SandboxBlueprint = bp
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(p, extv1beta1.GroupVersion.WithKind("SandboxWarmPool"))}
	e.create(e.operator, sb)
	return sb
}

// bindPatch is the binding of the agreed protocol: one merge patch with the resourceVersion as
// precondition that makes the claim the Sandbox's controller, sets the claim-uid and
// launch-type labels and removes the warm-pool label.
func bindPatch(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) map[string]any {
	return map[string]any{"metadata": map[string]any{
		"resourceVersion": sb.ResourceVersion,
		"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))},
		"labels": map[string]any{
			agentsv1beta1.LabelClaimUID:        string(claim.UID),
			agentsv1beta1.LabelLaunchType:      agentsv1beta1.LaunchTypeWarm,
			agentsv1beta1.LabelWarmPoolSandbox: nil,
		},
	}}
}

// bind sends the binding patch as c, based on the Sandbox as it is now: the Sandbox controller
// writes to a new Sandbox too, and a conflict is retried with the new version as the claim
// controller does. The result is the admission's answer.
func (e *env) bind(c client.Client, sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) error {
	e.t.Helper()
	var err error
	for range 20 {
		latest := &agentsv1beta1.Sandbox{}
		e.g.Expect(e.admin.Get(e.ctx(), client.ObjectKeyFromObject(sb), latest)).To(Succeed())
		if err = mergePatch(e.ctx(), c, latest, bindPatch(latest, claim)); !apierrors.IsConflict(err) {
			return err
		}
		time.Sleep(framework.Interval)
	}
	return err
}

// expectInvalid asserts a 422 Invalid naming the field path.
func expectInvalid(g Gomega, err error, field string) {
	g.Expect(err).To(HaveOccurred(), "want 422 Invalid at %s", field)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid at %s, got %v", field, err)
	var fields []string
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	g.Expect(fields).To(ContainElement(field), "error %v", err)
}

// expectForbidden asserts a 403 Forbidden whose message contains every part.
func expectForbidden(g Gomega, err error, parts ...string) {
	g.Expect(err).To(HaveOccurred(), "want 403 Forbidden")
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403 Forbidden, got %v", err)
	for _, p := range parts {
		g.Expect(err.Error()).To(ContainSubstring(p))
	}
}
