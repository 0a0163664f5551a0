//go:build integration

package takeover_test

// What the public agent-sandbox controller writes since v1.0 (released from 2026-08-28) where
// it differs from v0.5 (public_test.go, whose builders serve v1.0 too unless named here). The
// module proxy does not serve v1.0; the facts come from its merged pull requests and from
// controllers/sandbox_controller.go @00a24329, a stored version of its main that has them all:
//
//	[pods]    #1423 "fix: propagate claim UID label to Pods" (and #1067, #1139 before it):
//	          the Sandbox controller no longer copies podTemplate keys under agents.x-k8s.io/
//	          or extensions.agents.x-k8s.io/ to the pod; it copies from the Sandbox's own
//	          labels claim-uid (when a claim controls the Sandbox), warm-pool-sandbox (when a
//	          pool does), sandbox-template-ref-hash and created-by; the propagated-labels and
//	          propagated-annotations records list the other keys only
//	          (computeExtensionPodLabels, reconcilePod, updatePodMetadata).
//	[ready]   #1317 "fix(sandboxclaim): use claim generation for Ready condition": a claim's
//	          Ready is its Sandbox's, with observedGeneration the claim's generation.
//	[waiting] #1315 "perf(sandboxclaim): reconcile claims when template is created": a claim
//	          of a pool whose template is missing waits with Ready=False TemplateNotFound until
//	          the template's creation wakes it.
//	[crds]    #1393, #1404 (epic #1265, tracker #1307): v1alpha1 and the conversion webhook
//	          are gone; the CRDs serve and store v1beta1 only, conversion None, and
//	          status.storedVersions is [v1beta1] (the v0.5 → v1.0 upgrade drops v1alpha1 from
//	          it once stored objects are rewritten).
//
// Pool members, adopted and cold Sandboxes, Services and NetworkPolicies are built as in
// v0.5 (publicMember, publicAdopt, publicColdSandbox, publicService, publicNetworkPolicy): the
// pull requests above leave them as they were.

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// publicV1Manager is the field manager of the public controller's writes in the v1.0 test: the
// user agent of its binary, so that its writes are told apart from sandgate's (the same test
// binary, another user agent) in the objects' managedFields.
const publicV1Manager = "agent-sandbox-controller"

// publicV1Reserved reports whether a key is one v1.0 never copies from a podTemplate [pods].
func publicV1Reserved(k string) bool {
	return strings.HasPrefix(k, agentsv1beta1.Domain) || strings.HasPrefix(k, agentsv1beta1.ExtensionsDomain)
}

// publicV1Pod is the pod v1.0's Sandbox controller creates for a Sandbox, or brings an
// adopted member's pod to [pods]: named after the Sandbox and controlled by it, its podTemplate's
// spec, the podTemplate's labels and annotations but for reserved keys, the name hash, the
// extension labels taken from the Sandbox's metadata, and the records of the keys it copied.
func publicV1Pod(sb *agentsv1beta1.Sandbox) *corev1.Pod {
	labels, annotations := map[string]string{}, map[string]string{}
	var labelKeys, annotationKeys []string
	for k, v := range sb.Spec.PodTemplate.ObjectMeta.Labels {
		if !publicV1Reserved(k) {
			labels[k] = v
			labelKeys = append(labelKeys, k)
		}
	}
	for k, v := range sb.Spec.PodTemplate.ObjectMeta.Annotations {
		if !publicV1Reserved(k) {
			annotations[k] = v
			annotationKeys = append(annotationKeys, k)
		}
	}
	labels[agentsv1beta1.LabelSandboxNameHash] = agentsv1beta1.NameHash(sb.Name)
	extension := []string{agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.LabelCreatedBy}
	switch {
	case policy.ControllerOf(sb, policy.ClaimKind) != nil:
		extension = append(extension, agentsv1beta1.LabelClaimUID)
	case policy.ControllerOf(sb, policy.PoolKind) != nil:
		extension = append(extension, agentsv1beta1.LabelWarmPoolSandbox)
	}
	for _, k := range extension {
		if v := sb.Labels[k]; v != "" {
			labels[k] = v
		}
	}
	if len(labelKeys) > 0 {
		annotations[publicPropagatedLabels] = strings.Join(slices.Sorted(slices.Values(labelKeys)), ",")
	}
	if len(annotationKeys) > 0 {
		annotations[publicPropagatedAnnotations] = strings.Join(slices.Sorted(slices.Values(annotationKeys)), ",")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))},
		},
		Spec: *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
}

// publicV1ClaimStatus is what v1.0 writes for a claim served by sb [ready]: the Sandbox's
// Ready condition at the claim's generation, and the Sandbox's name and IPs.
func publicV1ClaimStatus(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) extv1beta1.SandboxClaimStatus {
	st := publicClaimStatus(sb)
	st.Conditions[0].ObservedGeneration = claim.Generation
	return st
}

// publicV1WaitingStatus is what v1.0 writes for a claim whose pool's template is missing
// [waiting]: Ready False TemplateNotFound, the message of computeReadyCondition (v0.5.6's
// extensions/controllers/sandboxclaim_controller.go, unchanged by #1315), which quotes the
// template's name where sandgate's message does not.
func publicV1WaitingStatus(claim *extv1beta1.SandboxClaim, template string) extv1beta1.SandboxClaimStatus {
	return extv1beta1.SandboxClaimStatus{Conditions: []metav1.Condition{{
		Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: claim.Generation,
		Reason: extv1beta1.ReasonTemplateNotFound, Message: fmt.Sprintf("SandboxTemplate %q not found", template),
		LastTransitionTime: metav1.Now(),
	}}}
}
