// Package indexes names the field indexes of the manager's cache and registers them. The
// controllers, the binding guard, the test suites and fake clients all use these names, so an
// index is declared once and a query cannot name one that was never registered.
package indexes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

const (
	// PodController indexes pods by the name of the Sandbox that controls them.
	PodController = "sandgate.podController"
	// SandboxClaimUID indexes Sandboxes by their claim-uid label: how a claim finds the
	// Sandbox bound to it, after a restart too, and how the binding guard finds a claim's
	// other Sandboxes.
	SandboxClaimUID = "sandgate.sandboxClaimUID"
	// SandboxPool indexes Sandboxes by the name of the pool that controls them.
	SandboxPool = "sandgate.sandboxPool"
	// PoolTemplate indexes SandboxWarmPools by spec.sandboxTemplateRef.name.
	PoolTemplate = "sandgate.poolTemplate"
	// ClaimPool indexes SandboxClaims by spec.warmPoolRef.name.
	ClaimPool = "sandgate.claimPool"
	// AutoscalerPool indexes WarmPoolAutoscalers by spec.poolRef.name: which autoscalers a
	// pool's claims, members and writers wake.
	AutoscalerPool = "sandgate.autoscalerPool"
)

// Index is one field index: the kind it indexes, its name and how a key is extracted.
type Index struct {
	Object  client.Object
	Name    string
	Extract client.IndexerFunc
	// Extension is true for the indexes of the extensions group's kinds (and of what only
	// their controllers query): registered only when those controllers run, since indexing a
	// kind starts an informer for it.
	Extension bool
	// Autoscaler is true for the indexes only the warm pool autoscaler queries: registered
	// only when it runs.
	Autoscaler bool
	what       string
}

// All lists every index the operator registers.
func All() []Index {
	return []Index{
		{&corev1.Pod{}, PodController, PodControllerSandbox, false, false, "pods by controlling sandbox"},
		{&agentsv1beta1.Sandbox{}, SandboxClaimUID, SandboxClaimUIDOf, false, false, "sandboxes by claim uid"},
		{&agentsv1beta1.Sandbox{}, SandboxPool, SandboxPoolOf, true, false, "sandboxes by controlling pool"},
		{&extv1beta1.SandboxWarmPool{}, PoolTemplate, PoolTemplateOf, true, false, "pools by template"},
		{&extv1beta1.SandboxClaim{}, ClaimPool, ClaimPoolOf, true, false, "claims by pool"},
		{&autoscalingv1alpha1.WarmPoolAutoscaler{}, AutoscalerPool, AutoscalerPoolOf, false, true, "autoscalers by pool"},
	}
}

// Setup registers the indexes with indexer: those of the core kinds, those of the extensions
// group's controllers with extensions, and the autoscaler's with autoscaler.
func Setup(ctx context.Context, indexer client.FieldIndexer, extensions, autoscaler bool) error {
	for _, ix := range All() {
		if (ix.Extension && !extensions) || (ix.Autoscaler && !autoscaler) {
			continue
		}
		if err := indexer.IndexField(ctx, ix.Object, ix.Name, ix.Extract); err != nil {
			return fmt.Errorf("indexing %s: %w", ix.what, err)
		}
	}
	return nil
}

// SandboxClaimUIDOf extracts a Sandbox's claim-uid label.
func SandboxClaimUIDOf(obj client.Object) []string {
	if uid := obj.GetLabels()[agentsv1beta1.LabelClaimUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

// SandboxPoolOf extracts the name of the pool that controls a Sandbox.
func SandboxPoolOf(obj client.Object) []string {
	if ref := policy.ControllerOf(obj, policy.PoolKind); ref != nil {
		return []string{ref.Name}
	}
	return nil
}

// PoolTemplateOf extracts a pool's template name.
func PoolTemplateOf(obj client.Object) []string {
	if p, ok := obj.(*extv1beta1.SandboxWarmPool); ok && p.Spec.SandboxTemplateRef.Name != "" {
		return []string{p.Spec.SandboxTemplateRef.Name}
	}
	return nil
}

// ClaimPoolOf extracts a claim's pool name.
func ClaimPoolOf(obj client.Object) []string {
	if c, ok := obj.(*extv1beta1.SandboxClaim); ok && c.Spec.WarmPoolRef.Name != "" {
		return []string{c.Spec.WarmPoolRef.Name}
	}
	return nil
}

// AutoscalerPoolOf extracts the name of an autoscaler's pool.
func AutoscalerPoolOf(obj client.Object) []string {
	if a, ok := obj.(*autoscalingv1alpha1.WarmPoolAutoscaler); ok && a.Spec.PoolRef.Name != "" {
		return []string{a.Spec.PoolRef.Name}
	}
	return nil
}

// PodControllerSandbox extracts the name of the Sandbox that controls a pod.
func PodControllerSandbox(obj client.Object) []string {
	if ref := policy.ControllerOf(obj, policy.SandboxKind); ref != nil {
		return []string{ref.Name}
	}
	return nil
}
