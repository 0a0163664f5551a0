package load

// The light floor: the floor's three writes per claim (floor.go), bound to minimal Sandboxes
// the load generator made itself, that have no pods. Against the floor on the operator's own
// members it shows what the objects themselves cost the API server: the size of each
// member (its spec, labels, annotations and status) and the pods beside them that every
// watcher of pods holds.
//
// What is minimal, and why each part is still there:
//   - spec.podTemplate.spec.containers with one container and only its name: the CRD requires
//     spec.podTemplate.spec.containers and a container's name, nothing more (the API server
//     adds the defaults of shutdownPolicy and operatingMode itself);
//   - the warm-pool label and a controller reference to the run's pool: what makes the
//     Sandbox a member the bind patch takes over (it removes that label and replaces the
//     owner), so the patch has the same work to do as on an operator's member;
//   - status.conditions Ready=True and one podIP: what the claim's status patch mirrors.
//
// No pod, no template labels or annotations, no selector, node name or other conditions. The
// pool object stays, with zero replicas, so that claims name an existing pool and owner
// references resolve; the operator is stopped before the members are made, so nothing
// deletes them as surplus or builds pods for them. Members are made before the measurement
// window: their writes are not counted.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// lightWorkers is how many light members are made at once.
const lightWorkers = 8

// lightMember is the minimal Sandbox number i of pool, as created (status is a subresource:
// see lightStatusPatch).
func lightMember(pool *extv1beta1.SandboxWarmPool, i int) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name:            fmt.Sprintf("light-%05d", i),
			Namespace:       pool.Namespace,
			Labels:          map[string]string{agentsv1beta1.LabelWarmPoolSandbox: agentsv1beta1.NameHash(pool.Name)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind(kindSandboxWarmPool))},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent"}}}},
		}},
	}
}

// lightStatusPatch makes member i Ready with an address of its own, as a pool member's
// status reads once its pod is Ready, with nothing else.
func lightStatusPatch(i int, now time.Time) map[string]any {
	return map[string]any{"status": agentsv1beta1.SandboxStatus{
		PodIPs: []string{fmt.Sprintf("10.245.%d.%d", i/250, i%250+1)},
		Conditions: []metav1.Condition{{
			Type:               agentsv1beta1.ConditionReady,
			Status:             metav1.ConditionTrue,
			Reason:             agentsv1beta1.ReasonDependenciesReady,
			Message:            agentsv1beta1.MessagePodReady,
			ObservedGeneration: 1,
			LastTransitionTime: metav1.NewTime(now),
		}},
	}}
}

// makeLightMembers creates n minimal members of the run's pool, each Ready, and returns them
// as the floor hands them out, with the resourceVersion the bind patch is conditional on.
func (r *runner) makeLightMembers(ctx context.Context, n int) (*floorPool, error) {
	members := make([]*agentsv1beta1.Sandbox, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(lightWorkers, n) {
		wg.Go(func() {
			for i := range next {
				members[i], errs[i] = r.makeLightMember(ctx, i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return &floorPool{members: members}, nil
}

func (r *runner) makeLightMember(ctx context.Context, i int) (*agentsv1beta1.Sandbox, error) {
	sb := lightMember(r.pool, i)
	if err := r.c.Create(ctx, sb); err != nil {
		return nil, fmt.Errorf("creating light member %s: %w", sb.Name, err)
	}
	patch, err := mergePatch(lightStatusPatch(i, time.Now()))
	if err == nil {
		err = r.c.Status().Patch(ctx, sb, patch)
	}
	if err != nil {
		return nil, fmt.Errorf("making light member %s Ready: %w", sb.Name, err)
	}
	return sb, nil
}
