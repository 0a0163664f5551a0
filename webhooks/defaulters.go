package webhooks

import (
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The CRD schema declares the same defaults; the defaulting webhooks apply them too so that
// objects written through the webhook are complete in the stored form whatever schema version
// the cluster runs (an older CRD, a schema without defaults after a manual edit), and so that
// validators and Go callers see the values the controllers assume.

// DefaultSandbox fills in a Sandbox's defaults: shutdownPolicy Retain, operatingMode Running,
// and the agents.x-k8s.io/pod-name annotation clients read (the pod is named after the
// Sandbox), so that the controller need not write it later. A Sandbox created with
// generateName has no name yet at admission: the controller records the name then.
func DefaultSandbox(sb *agentsv1beta1.Sandbox) {
	if _, ok := sb.Annotations[agentsv1beta1.AnnotationPodName]; !ok && sb.Name != "" {
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		sb.Annotations[agentsv1beta1.AnnotationPodName] = sb.Name
	}
	if sb.Spec.ShutdownPolicy == "" {
		sb.Spec.ShutdownPolicy = agentsv1beta1.ShutdownPolicyRetain
	}
	if sb.Spec.OperatingMode == "" {
		sb.Spec.OperatingMode = agentsv1beta1.OperatingModeRunning
	}
}

// DefaultTemplate fills in a SandboxTemplate's defaults: network policy Managed, env and volume
// claim template injection Disallowed.
func DefaultTemplate(t *extv1beta1.SandboxTemplate) {
	if t.Spec.NetworkPolicyManagement == "" {
		t.Spec.NetworkPolicyManagement = extv1beta1.NetworkPolicyManaged
	}
	if t.Spec.EnvVarsInjectionPolicy == "" {
		t.Spec.EnvVarsInjectionPolicy = extv1beta1.EnvVarsInjectionDisallowed
	}
	if t.Spec.VolumeClaimTemplatesPolicy == "" {
		t.Spec.VolumeClaimTemplatesPolicy = extv1beta1.VolumeClaimTemplatesDisallowed
	}
}

// DefaultPool fills in a SandboxWarmPool's defaults: 1 replica, update strategy OnReplenish.
func DefaultPool(p *extv1beta1.SandboxWarmPool) {
	if p.Spec.Replicas == nil {
		p.Spec.Replicas = ptr.To[int32](1)
	}
	if p.Spec.UpdateStrategy.Type == "" {
		p.Spec.UpdateStrategy.Type = extv1beta1.OnReplenishUpdateStrategy
	}
}

// DefaultClaim fills in a SandboxClaim's defaults: a lifecycle, when given, shuts down with
// policy Retain.
func DefaultClaim(c *extv1beta1.SandboxClaim) {
	if c.Spec.Lifecycle != nil && c.Spec.Lifecycle.ShutdownPolicy == "" {
		c.Spec.Lifecycle.ShutdownPolicy = extv1beta1.ClaimShutdownPolicyRetain
	}
}
