package check

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

var templateKind = extv1beta1.GroupVersion.WithKind("SandboxTemplate").GroupKind()

// checkFinal proves what must hold once the load stopped and the system settled: every claim
// served by exactly one Sandbox of its stamped version, nothing left without its owner, every
// pool full.
func (c *checker) checkFinal() {
	f := &c.in.Final
	claims := map[types.UID]bool{}
	for i := range f.Claims {
		claims[f.Claims[i].UID] = true
	}
	pools := map[types.UID]bool{}
	for i := range f.Pools {
		pools[f.Pools[i].UID] = true
	}
	templates := map[types.UID]bool{}
	for i := range f.Templates {
		templates[f.Templates[i].UID] = true
	}
	sandboxes := map[types.UID]bool{}
	bound := map[types.UID][]*agentsv1beta1.Sandbox{}
	members := map[types.UID]int{}
	for i := range f.Sandboxes {
		sb := &f.Sandboxes[i]
		sandboxes[sb.UID] = true
		c.checkFinalSandbox(sb, claims, pools)
		if claim, _ := bindingOf(sb); claim != "" {
			bound[claim] = append(bound[claim], sb)
		}
		if ref := policy.ControllerOf(sb, policy.PoolKind); ref != nil {
			members[ref.UID]++
		}
	}
	for i := range f.Claims {
		if claim := &f.Claims[i]; claim.DeletionTimestamp == nil {
			c.checkFinalClaim(claim, bound[claim.UID])
		}
	}
	for i := range f.Pools {
		pool := &f.Pools[i]
		if pool.DeletionTimestamp != nil {
			continue
		}
		want := int32(1) // the API's default
		if pool.Spec.Replicas != nil {
			want = *pool.Spec.Replicas
		}
		if got := members[pool.UID]; int32(got) != want || pool.Status.ReadyReplicas != want {
			c.violate(InvariantPoolAtReplicas, "SandboxWarmPool "+pool.Namespace+"/"+pool.Name, time.Time{},
				"spec.replicas %d, but %d members and status.readyReplicas %d", want, got, pool.Status.ReadyReplicas)
		}
	}
	for i := range f.Pods {
		c.checkChild("Pod", &f.Pods[i].ObjectMeta, sandboxes, templates)
	}
	for i := range f.PVCs {
		c.checkChild("PersistentVolumeClaim", &f.PVCs[i].ObjectMeta, sandboxes, templates)
	}
	for i := range f.Services {
		c.checkChild("Service", &f.Services[i].ObjectMeta, sandboxes, templates)
	}
	for i := range f.NetworkPolicies {
		c.checkChild("NetworkPolicy", &f.NetworkPolicies[i].ObjectMeta, sandboxes, templates)
	}
}

// checkFinalSandbox proves that a Sandbox's controlling claim or pool is still there, and the
// claim its label names. A Sandbox controlled by another kind is not sandgate's to clean up.
func (c *checker) checkFinalSandbox(sb *agentsv1beta1.Sandbox, claims, pools map[types.UID]bool) {
	obj := sandboxObject(sb.Namespace, sb.Name)
	leak := func(format string, args ...any) {
		c.violate(InvariantNoLeakedSandbox, obj, time.Time{}, format, args...)
	}
	ref := metav1.GetControllerOfNoCopy(sb)
	switch {
	case ref == nil:
		leak("no controlling owner")
	case policy.RefersTo(ref, policy.PoolKind) && !pools[ref.UID]:
		leak("its pool %s (UID %s) is gone", ref.Name, ref.UID)
	case policy.RefersTo(ref, policy.ClaimKind) && !claims[ref.UID]:
		leak("its claim %s (UID %s) is gone", ref.Name, ref.UID)
	default:
		if uid := sb.Labels[agentsv1beta1.LabelClaimUID]; uid != "" && !claims[types.UID(uid)] {
			leak("bound (label %s) to claim %s, which is gone", agentsv1beta1.LabelClaimUID, uid)
		}
	}
}

// checkFinalClaim proves that a claim is Ready, with exactly one Sandbox, built from the
// claim's stamped template version.
func (c *checker) checkFinalClaim(claim *extv1beta1.SandboxClaim, sbs []*agentsv1beta1.Sandbox) {
	obj := claimObject(claim.Namespace, claim.Name)
	if !isReady(claim.Status.Conditions) {
		why := "no Ready condition"
		if cond := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady); cond != nil {
			why = fmt.Sprintf("Ready is %s (%s: %s)", cond.Status, cond.Reason, cond.Message)
		}
		c.violate(InvariantClaimReady, obj, time.Time{}, "not Ready: %s", why)
	}
	if len(sbs) != 1 {
		names := make([]string, len(sbs))
		for i, sb := range sbs {
			names[i] = sb.Name
		}
		c.violate(InvariantClaimOneSandbox, obj, time.Time{}, "%d Sandboxes bound to it, want 1: [%s]", len(sbs), strings.Join(names, " "))
		return
	}
	sb := sbs[0]
	if !policy.IsControlledBy(sb, policy.ClaimKind, claim.UID) || sb.Labels[agentsv1beta1.LabelClaimUID] != string(claim.UID) {
		c.violate(InvariantClaimOneSandbox, obj, time.Time{}, "its Sandbox %s is not both controlled by it and labelled %s=%s",
			sb.Name, agentsv1beta1.LabelClaimUID, claim.UID)
	}
	stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
	switch label := sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]; {
	case stamp == "":
		c.violate(InvariantClaimTemplateVersion, obj, time.Time{}, "served by Sandbox %s but never stamped", sb.Name)
	case label != stamp:
		c.violate(InvariantClaimTemplateVersion, obj, time.Time{}, "stamped %s, but its Sandbox %s is labelled with version %q", stamp, sb.Name, label)
	case !policy.AddsToTemplate(claim) && policy.SandboxHash(sb) != stamp:
		c.violate(InvariantClaimTemplateVersion, obj, time.Time{}, "stamped %s, but its Sandbox %s is built from version %s", stamp, sb.Name, policy.SandboxHash(sb))
	}
}

// checkChild proves that a pod, PVC, Service or NetworkPolicy of sandgate's still has what it
// was made for. It is sandgate's when it is controlled by a Sandbox or a template, or carries
// the sandgate.dev/sandbox-uid label (a child whose owner reference was taken off).
func (c *checker) checkChild(kind string, om *metav1.ObjectMeta, sandboxes, templates map[types.UID]bool) {
	obj := kind + " " + om.Namespace + "/" + om.Name
	ref := metav1.GetControllerOfNoCopy(om)
	switch {
	case ref != nil && policy.RefersTo(ref, policy.SandboxKind):
		if !sandboxes[ref.UID] {
			c.violate(InvariantNoLeakedChild, obj, time.Time{}, "its Sandbox %s (UID %s) is gone", ref.Name, ref.UID)
		}
	case ref != nil && policy.RefersTo(ref, templateKind):
		if !templates[ref.UID] {
			c.violate(InvariantNoLeakedChild, obj, time.Time{}, "its SandboxTemplate %s (UID %s) is gone", ref.Name, ref.UID)
		}
	default:
		if uid := om.Labels[agentsv1beta1.LabelSandboxUID]; uid != "" && !sandboxes[types.UID(uid)] {
			c.violate(InvariantNoLeakedChild, obj, time.Time{}, "built for Sandbox UID %s (label %s), which is gone", uid, agentsv1beta1.LabelSandboxUID)
		}
	}
}
