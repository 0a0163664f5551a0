//go:build integration

// Package sandbox_test runs the Sandbox controller against a local control plane with
// kube-scheduler, the garbage collector and kwok nodes that start pods in kubelet-like steps.
// Each test gets its own namespace and its own manager watching only that namespace, so the
// reconciles and writes it counts are its own.
package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileKubelet, Webhooks: true}, func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace and manager.
type env struct {
	*framework.Manager
	t  *testing.T
	g  *WithT
	ns string
}

func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the operator's options changed by configure.
func setupWith(t *testing.T, configure func(*operator.Options)) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	mgr := cluster.StartManager(t, framework.ManagerOptions{Namespaces: []string{ns}, Webhooks: true, Configure: configure})
	framework.CreateNamespace(t, mgr.Client, ns)
	return &env{Manager: mgr, t: t, g: NewWithT(t), ns: ns}
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) create(obj client.Object) {
	e.t.Helper()
	e.g.Expect(e.Client.Create(e.ctx(), obj)).To(Succeed())
}

// patchSpec merge-patches a Sandbox's spec, as a user would with kubectl patch.
func (e *env) patchSandbox(name string, patch string) {
	e.t.Helper()
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	e.g.Expect(e.Client.Patch(e.ctx(), sb, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

func (e *env) sandbox(g Gomega, name string) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{}
	g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: name}, sb)).To(Succeed())
	return sb
}

func (e *env) pod(g Gomega, name string) *corev1.Pod {
	pod := &corev1.Pod{}
	g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: name}, pod)).To(Succeed())
	return pod
}

// gone asserts that obj does not exist (or is being deleted, for objects kwok removes).
func (e *env) gone(g Gomega, obj client.Object) {
	err := e.Client.Get(e.ctx(), client.ObjectKeyFromObject(obj), obj)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists (err %v)", obj, obj.GetName(), err)
}

// eventually runs f until it passes.
func (e *env) eventually(f func(g Gomega)) {
	e.t.Helper()
	e.g.Eventually(f).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

// consistently runs f for a while and requires it to pass every time.
func (e *env) consistently(f func(g Gomega)) {
	e.t.Helper()
	e.g.Consistently(f).WithTimeout(framework.Quiet).WithPolling(framework.Interval).Should(Succeed())
}

// wantCondition is a condition as a test expects it; an empty Message is not compared.
type wantCondition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

func expectCondition(g Gomega, sb *agentsv1beta1.Sandbox, typ string, want wantCondition) {
	c := meta.FindStatusCondition(sb.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "condition %s missing; conditions: %+v", typ, sb.Status.Conditions)
	got := wantCondition{Status: c.Status, Reason: c.Reason, Message: c.Message}
	if want.Message == "" {
		got.Message = ""
	}
	g.Expect(got).To(Equal(want), "condition %s", typ)
	g.Expect(c.ObservedGeneration).To(Equal(sb.Generation), "condition %s observedGeneration", typ)
}

func expectNoCondition(g Gomega, sb *agentsv1beta1.Sandbox, typ string) {
	g.Expect(meta.FindStatusCondition(sb.Status.Conditions, typ)).To(BeNil(), "condition %s should be absent", typ)
}

var (
	readyPod        = wantCondition{metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady}
	readyPodService = wantCondition{metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReadyServiceExists}
	notSuspended    = wantCondition{metav1.ConditionFalse, agentsv1beta1.ReasonNotSuspended, ""}
)

// waitReady waits until the Sandbox is Ready with the given condition and returns it.
func (e *env) waitReady(name string, want wantCondition) *agentsv1beta1.Sandbox {
	e.t.Helper()
	var sb *agentsv1beta1.Sandbox
	e.eventually(func(g Gomega) {
		sb = e.sandbox(g, name)
		expectCondition(g, sb, agentsv1beta1.ConditionReady, want)
	})
	return sb
}

// counts are the counters a test compares before and after a step.
type counts struct {
	reconciles, writes, conflicts, updates float64
	byKey                                  map[string]float64
}

func (e *env) counts() counts {
	m := e.Metrics
	return counts{
		reconciles: m.Reconciles("sandbox"),
		writes:     m.Writes("", ""),
		conflicts:  m.Conflicts(),
		updates:    m.Writes("update", ""),
		byKey:      m.WritesByKey(),
	}
}

func (c counts) minus(before counts) counts {
	d := counts{
		reconciles: c.reconciles - before.reconciles,
		writes:     c.writes - before.writes,
		conflicts:  c.conflicts - before.conflicts,
		updates:    c.updates - before.updates,
		byKey:      map[string]float64{},
	}
	for k, v := range c.byKey {
		if n := v - before.byKey[k]; n != 0 {
			d.byKey[k] = n
		}
	}
	return d
}

func (c counts) String() string {
	return fmt.Sprintf("reconciles=%v writes=%v conflicts=%v updates=%v %v", c.reconciles, c.writes, c.conflicts, c.updates, c.byKey)
}
