package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/internal/extras"
)

// SandboxWarmPool conversion. The two versions differ in three places:
//
//	v1alpha1                           v1beta1
//	spec.replicas (required)           spec.replicas (optional, default 1): unset reads as 1
//	spec.updateStrategy (pointer)      spec.updateStrategy (value): none and {} are both {}
//	(none)                             status.observedGeneration
//
// Values without an exact counterpart travel in the conversion.sandgate.dev annotations.

// poolAlphaFields are the v1alpha1 values v1beta1 cannot hold, kept on the v1beta1 object.
type poolAlphaFields struct {
	Spec *poolAlphaSpec `json:"spec,omitempty"`
}

type poolAlphaSpec struct {
	UpdateStrategy *UpdateStrategy `json:"updateStrategy"`
}

// poolBetaFields are the v1beta1 values v1alpha1 cannot hold, kept on the v1alpha1 object.
type poolBetaFields struct {
	Spec   *poolBetaSpec   `json:"spec,omitempty"`
	Status *poolBetaStatus `json:"status,omitempty"`
}

type poolBetaSpec struct {
	Replicas *int32 `json:"replicas"`
}

type poolBetaStatus struct {
	ObservedGeneration int64 `json:"observedGeneration"`
	// Of is the fingerprint of the v1alpha1 status ObservedGeneration was saved with.
	Of string `json:"of"`
}

// defaultPoolReplicas is v1beta1's default for spec.replicas, what v1alpha1 shows when unset.
const defaultPoolReplicas = 1

var _ conversion.Convertible = &SandboxWarmPool{}

// ConvertTo converts this v1alpha1 SandboxWarmPool to v1beta1, the hub.
func (src *SandboxWarmPool) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*extv1beta1.SandboxWarmPool)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1alpha1Key)
	var beta poolBetaFields
	hasBeta := extras.Take(&dst.Annotations, extras.V1beta1Key, &beta)
	replicas := src.Spec.Replicas
	dst.Spec = extv1beta1.SandboxWarmPoolSpec{
		Replicas:           &replicas,
		SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: src.Spec.TemplateRef.Name},
		UpdateStrategy:     updateStrategyTo(src.Spec.UpdateStrategy),
	}
	dst.Status = extv1beta1.SandboxWarmPoolStatus{
		Replicas:      src.Status.Replicas,
		ReadyReplicas: src.Status.ReadyReplicas,
		Selector:      src.Status.Selector,
	}
	// A saved unset replicas counts only while v1alpha1 still shows its default.
	if hasBeta && beta.Spec != nil && poolReplicasFrom(beta.Spec.Replicas) == src.Spec.Replicas {
		dst.Spec.Replicas = beta.Spec.Replicas
	}
	if hasBeta && beta.Status != nil && beta.Status.Of == extras.Fingerprint(src.Status) {
		dst.Status.ObservedGeneration = beta.Status.ObservedGeneration
	}
	if !equality.Semantic.DeepEqual(updateStrategyFrom(dst.Spec.UpdateStrategy), src.Spec.UpdateStrategy) {
		extras.Put(&dst.Annotations, extras.V1alpha1Key, poolAlphaFields{Spec: &poolAlphaSpec{UpdateStrategy: src.Spec.UpdateStrategy}})
	}
	return nil
}

// ConvertFrom converts a v1beta1 SandboxWarmPool, the hub, to this v1alpha1 SandboxWarmPool.
func (dst *SandboxWarmPool) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*extv1beta1.SandboxWarmPool)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1beta1Key)
	var alpha poolAlphaFields
	hasAlpha := extras.Take(&dst.Annotations, extras.V1alpha1Key, &alpha)
	dst.Spec = SandboxWarmPoolSpec{
		Replicas:       poolReplicasFrom(src.Spec.Replicas),
		TemplateRef:    SandboxTemplateRef{Name: src.Spec.SandboxTemplateRef.Name},
		UpdateStrategy: updateStrategyFrom(src.Spec.UpdateStrategy),
	}
	dst.Status = SandboxWarmPoolStatus{
		Replicas:      src.Status.Replicas,
		ReadyReplicas: src.Status.ReadyReplicas,
		Selector:      src.Status.Selector,
	}
	// A saved updateStrategy counts only if it still means this one.
	if hasAlpha && alpha.Spec != nil && updateStrategyTo(alpha.Spec.UpdateStrategy) == src.Spec.UpdateStrategy {
		dst.Spec.UpdateStrategy = alpha.Spec.UpdateStrategy
	}
	var beta poolBetaFields
	if src.Spec.Replicas == nil {
		beta.Spec = &poolBetaSpec{Replicas: src.Spec.Replicas}
	}
	if src.Status.ObservedGeneration != 0 {
		beta.Status = &poolBetaStatus{ObservedGeneration: src.Status.ObservedGeneration, Of: extras.Fingerprint(dst.Status)}
	}
	if beta != (poolBetaFields{}) {
		extras.Put(&dst.Annotations, extras.V1beta1Key, beta)
	}
	return nil
}

func poolReplicasFrom(replicas *int32) int32 {
	if replicas == nil {
		return defaultPoolReplicas
	}
	return *replicas
}

// updateStrategyTo is the v1beta1 strategy of a v1alpha1 one: none is the empty strategy.
func updateStrategyTo(in *UpdateStrategy) extv1beta1.UpdateStrategy {
	if in == nil {
		return extv1beta1.UpdateStrategy{}
	}
	return extv1beta1.UpdateStrategy{Type: extv1beta1.UpdateStrategyType(in.Type)}
}

// updateStrategyFrom is the v1alpha1 strategy of a v1beta1 one: the empty strategy is none.
func updateStrategyFrom(in extv1beta1.UpdateStrategy) *UpdateStrategy {
	if in == (extv1beta1.UpdateStrategy{}) {
		return nil
	}
	return &UpdateStrategy{Type: UpdateStrategyType(in.Type)}
}
