package reconcilers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// Test objects more than one controller's tests use; fakeclient_test.go is the API server
// they are served from.

// planNow is the time of every test clock.
var planNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// poolMember is a Sandbox as a pool makes it: controlled by pool "p", hash h, ready or not.
func poolMember(name, hash string, ready bool, rv string) *agentsv1beta1.Sandbox {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()
	sb := builders.MakeSandbox(name, "ns").UID(types.UID("uid-"+name)).
		Label(agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.NameHash("p")).
		Label(agentsv1beta1.LabelSandboxTemplateHash, hash).
		ControlledBy(pool, extv1beta1.GroupVersion.WithKind(policy.PoolKind.Kind)).Obj()
	sb.ResourceVersion = rv
	sb.Status = agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: status}}}
	return sb
}

// podOf is the pod the Sandbox controller builds for sb, as the API server stores it: named
// as the Sandbox says, controlled by it, with the metadata the Sandbox gave it when built.
func podOf(sb *agentsv1beta1.Sandbox) *corev1.Pod {
	pod := desiredPod(sb, nil)
	pod.UID = types.UID("pod-" + string(sb.UID))
	pod.CreationTimestamp = sb.CreationTimestamp // made with its Sandbox
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: agentsv1beta1.GroupVersion.String(), Kind: policy.SandboxKind.Kind,
		Name: sb.Name, UID: sb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	return pod
}
