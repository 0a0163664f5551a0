//go:build integration

package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// Generous bounds: these tests share small, busy machines.
const (
	eventually = 60 * time.Second
	poll       = 100 * time.Millisecond
)

// cluster is the kubelet-profile cluster most tests share.
var cluster *controlplane.Cluster

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	start := time.Now()
	c, err := controlplane.Start(ctx, controlplane.Options{Profile: controlplane.ProfileKubelet, Log: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the test cluster: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "test cluster started in %s\n", time.Since(start).Round(time.Millisecond))
	cluster = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the test cluster: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// clientset returns a typed client for c.
func clientset(t *testing.T, c *controlplane.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// podRun is what a watch saw of one Pod from creation to Ready.
type podRun struct {
	ready *corev1.Pod
	// afterBinding are the distinct statuses the Pod went through after the scheduler bound
	// it (the updates the simulated kubelet wrote), the last one Ready.
	afterBinding []corev1.PodStatus
}

// runPodToReady creates a bare Pod (no node name, no tolerations) in ns and watches it until
// it is Ready.
func runPodToReady(t *testing.T, g Gomega, cs kubernetes.Interface, ns string) podRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*eventually)
	defer cancel()
	const name = "app"
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: "registry.example/app:1"},
			{Name: "sidecar", Image: "registry.example/sidecar:1"},
		}},
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var run podRun
	var last *corev1.PodStatus
	bound := false
	for run.ready == nil {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("pod %s/%s did not become Ready; statuses after binding: %+v", ns, name, run.afterBinding)
		}
		g.Expect(ev.Type).To(BeElementOf(watch.Added, watch.Modified), "watch event %v", ev.Object)
		p := ev.Object.(*corev1.Pod)
		if bound && (last == nil || !apiequality.Semantic.DeepEqual(*last, p.Status)) {
			run.afterBinding = append(run.afterBinding, *p.Status.DeepCopy())
		}
		bound = bound || p.Spec.NodeName != ""
		last = p.Status.DeepCopy()
		if conditionTrue(p.Status.Conditions, corev1.PodReady) {
			run.ready = p
		}
	}
	return run
}

// summarize describes statuses briefly, for the test log.
func summarize(statuses []corev1.PodStatus) string {
	parts := make([]string, 0, len(statuses))
	for _, st := range statuses {
		var conds []string
		for _, c := range st.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
		parts = append(parts, fmt.Sprintf("[%s ip=%q %s]", st.Phase, st.PodIP, strings.Join(conds, ",")))
	}
	return strings.Join(parts, " -> ")
}

// conditionTrue reports whether conditions has condition typ with status True.
func conditionTrue(conditions []corev1.PodCondition, typ corev1.PodConditionType) bool {
	for _, c := range conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectRunningAndReady checks the final state both profiles write.
func expectRunningAndReady(g Gomega, pod *corev1.Pod) {
	g.Expect(pod.Spec.NodeName).To(HavePrefix("kwok-node-"))
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	g.Expect(pod.Status.PodIP).To(HavePrefix("10.244."))
	g.Expect(pod.Status.HostIP).NotTo(BeEmpty())
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		g.Expect(conditionTrue(pod.Status.Conditions, typ)).To(BeTrue(), "condition %s", typ)
	}
	g.Expect(pod.Status.ContainerStatuses).To(HaveLen(len(pod.Spec.Containers)))
	for _, cs := range pod.Status.ContainerStatuses {
		g.Expect(cs.Ready).To(BeTrue(), "container %s ready", cs.Name)
		g.Expect(cs.State.Running).NotTo(BeNil(), "container %s running", cs.Name)
	}
}

// expectPodDeleted deletes the Pod and waits until the simulated kubelet has removed it.
func expectPodDeleted(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod still there (err %v)", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

func TestKubeletProfilePodBecomesReadyInSteps(t *testing.T) {
	g := NewWithT(t)
	cs := clientset(t, cluster)
	ns := namespace(t, cs, "kubelet-profile")

	run := runPodToReady(t, g, cs, ns)
	t.Logf("status updates after binding: %s", summarize(run.afterBinding))
	expectRunningAndReady(g, run.ready)
	g.Expect(len(run.afterBinding)).To(BeNumerically(">=", 3),
		"the kubelet profile writes separate status updates; saw %d", len(run.afterBinding))
	first := run.afterBinding[0]
	g.Expect(first.PodIP).NotTo(BeEmpty(), "the first update assigns the IP")
	g.Expect(conditionTrue(first.Conditions, corev1.PodInitialized)).To(BeTrue())
	g.Expect(conditionTrue(first.Conditions, corev1.PodReady)).To(BeFalse())
	g.Expect(first.Phase).To(Equal(corev1.PodPending))

	expectPodDeleted(t, cs, run.ready)
}

func TestFastProfilePodBecomesReadyInOneUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fast, err := controlplane.Start(ctx, controlplane.Options{Nodes: 1, Profile: controlplane.ProfileFast, NoControllerManager: true})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if err := fast.Stop(); err != nil {
			t.Errorf("stopping the fast-profile cluster: %v", err)
		}
	}()
	g.Expect(fast.NodeNames).To(Equal([]string{"kwok-node-0"}))
	cs := clientset(t, fast)
	ns := namespace(t, cs, "fast-profile")

	run := runPodToReady(t, g, cs, ns)
	t.Logf("status updates after binding: %s", summarize(run.afterBinding))
	expectRunningAndReady(g, run.ready)
	g.Expect(run.afterBinding).To(HaveLen(1), "the fast profile takes a pod to Ready in one update")
	expectPodDeleted(t, cs, run.ready)

	// Stop ends the processes and removes the cluster's directory (but the logs with
	// SANDGATE_KEEP_LOGS=1); a second Stop is a no-op.
	g.Expect(fast.Stop()).To(Succeed())
	if os.Getenv("SANDGATE_KEEP_LOGS") == "1" {
		entries, err := os.ReadDir(fast.Dir)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(entries).To(HaveLen(1))
		g.Expect(entries[0].Name()).To(Equal("logs"))
		g.Expect(os.RemoveAll(fast.Dir)).To(Succeed())
	} else {
		g.Expect(fast.Dir).NotTo(BeADirectory())
	}
	g.Expect(fast.Stop()).To(Succeed())
	g.Expect(fast.Err()).To(Succeed())
}

func TestGarbageCollectorAndNamespaceControllerRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cs := clientset(t, cluster)
	ns := namespace(t, cs, "garbage-collection")

	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "child", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "child", metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "child still there (err %v)", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())

	g.Expect(cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace still there (err %v)", err)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
}

func TestSandgateCRDsAreEstablished(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	names := []string{"sandboxes.agents.x-k8s.io"}
	for _, crd := range cluster.Env.CRDs {
		names = append(names, crd.Name)
	}
	for _, name := range names {
		g.Eventually(func(g Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(c.Get(context.Background(), client.ObjectKey{Name: name}, &crd)).To(Succeed())
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(BeTrue(), "CRD %s established", name)
		}).WithTimeout(eventually).WithPolling(poll).Should(Succeed())
	}
}

func TestKubectlAndNodes(t *testing.T) {
	g := NewWithT(t)
	out, err := cluster.Kubectl("get", "nodes", "-l", "type=kwok", "-o", "name").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.Fields(string(out))).To(ConsistOf("node/kwok-node-0", "node/kwok-node-1", "node/kwok-node-2"))

	cs := clientset(t, cluster)
	for _, name := range cluster.NodeNames {
		node, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(node.Spec.Taints).To(BeEmpty())
		g.Expect(node.Annotations).To(HaveKeyWithValue(controlplane.FakeNodeAnnotation, "fake"))
	}
	g.Expect(cluster.Err()).To(Succeed())
}
