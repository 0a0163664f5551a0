package controlplane

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// FakeNodeAnnotation marks the Nodes kwok simulates (value "fake").
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	// nodeTypeLabel is set to "kwok" on the simulated Nodes.
	nodeTypeLabel = "type"
	// nodeNamePrefix names the simulated Nodes kwok-node-0 ... kwok-node-<N-1>.
	nodeNamePrefix = "kwok-node-"
	// kwokNodeIP is the InternalIP of every simulated Node; pod IPs come from
	// Options.PodCIDR, in another range (kwok would give pods the node's IP otherwise).
	kwokNodeIP = "10.0.0.1"
	// DefaultPodCIDR is where pod IPs come from unless Options.PodCIDR says otherwise.
	DefaultPodCIDR = "10.244.0.0/16"
	// LoopbackPodCIDR gives pods addresses on which this machine can listen.
	LoopbackPodCIDR = "127.16.0.0/16"
	// nodesReadyTimeout bounds the wait for kwok to report the Nodes Ready.
	nodesReadyTimeout = 2 * time.Minute
)

// nodeNames returns the names of n simulated Nodes.
func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", nodeNamePrefix, i)
	}
	return names
}

// fakeNode returns a Node kwok manages, with room for many pods and no taints, so that any
// Pod without special scheduling constraints lands on it.
func fakeNode(name string) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				nodeTypeLabel:                   "kwok",
				corev1.LabelHostname:            name,
				corev1.LabelOSStable:            "linux",
				corev1.LabelArchStable:          "amd64",
				"node-role.kubernetes.io/agent": "",
			},
			Annotations: map[string]string{
				FakeNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:            "amd64",
				OperatingSystem:         "linux",
				KubeletVersion:          KubernetesVersion,
				ContainerRuntimeVersion: "kwok://simulated",
				OSImage:                 "simulated by kwok (sandgate local control plane)",
			},
		},
	}
}

// createNodes creates the simulated Nodes (keeping any that exist) and deletes their
// Leases: kwok ignores a Node whose Lease another kwok renewed until that Lease expires.
func createNodes(ctx context.Context, cs kubernetes.Interface, names []string) error {
	for _, name := range names {
		if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(name), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete stale lease of node %s: %w", name, err)
		}
	}
	return nil
}

// waitForNodesReady waits until every named Node is Ready and its Lease exists, failing
// early when kwok exits.
func waitForNodesReady(ctx context.Context, cs kubernetes.Interface, names []string, kwok *child) error {
	ctx, cancel := context.WithTimeout(ctx, nodesReadyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	pending := names
	for {
		var still []string
		for _, name := range pending {
			ready, err := nodeReady(ctx, cs, name)
			if err != nil {
				return err
			}
			if !ready {
				still = append(still, name)
			}
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		if done, _ := kwok.exited(); done {
			return kwok.failure()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for nodes %v to become Ready: %w; kwok log %s ends:\n%s",
				pending, ctx.Err(), kwok.logPath, tail(kwok.logPath, 20))
		case <-tick.C:
		}
	}
}

// nodeReady reports whether Node name is Ready and kwok holds its Lease.
func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) (bool, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return false, nil // reported by the caller
		}
		return false, fmt.Errorf("get node %s: %w", name, err)
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return false, nil
	}
	var lease *coordinationv1.Lease
	lease, err = cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("get lease of node %s: %w", name, err)
	}
	return lease.Spec.HolderIdentity != nil, nil
}
