package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/sandgate-dev/sandgate/api/internal/extras"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Annotations that keep conversion lossless (values are JSON, written and removed by the
// conversion webhook; clients never need to set them).
const (
	// AnnotationV1alpha1Fields, on a v1beta1 object, keeps v1alpha1 values that have no
	// v1beta1 field: a Sandbox's replicas outside 0 and 1, an empty shutdownPolicy, a
	// status.replicas that its status does not imply; a SandboxClaim's sandboxTemplateRef and
	// warmpool; a SandboxWarmPool's empty updateStrategy.
	AnnotationV1alpha1Fields = extras.V1alpha1Key
	// AnnotationV1beta1Fields, on a v1alpha1 object, keeps v1beta1 values that have no
	// v1alpha1 field: a Sandbox's status.nodeName (and an operatingMode other than Running
	// and Suspended); a SandboxClaim's volumeClaimTemplates (and a warmPoolRef that v1alpha1
	// cannot name); a SandboxTemplate's volumeClaimTemplatesPolicy; a SandboxWarmPool's unset
	// replicas and status.observedGeneration.
	AnnotationV1beta1Fields = extras.V1beta1Key
)

// Sandbox conversion. The two versions differ in three places:
//
//	v1alpha1                          v1beta1
//	spec.replicas: nil | 1 | 0        spec.operatingMode: "" | Running | Suspended
//	spec.shutdownPolicy (pointer)     spec.shutdownPolicy ("" when unset)
//	status.replicas                   (none: 1 while the Sandbox has a pod, i.e. a PodScheduled condition)
//	(none)                            status.nodeName
//
// Everything else (podTemplate, volumeClaimTemplates, service, shutdownTime, serviceFQDN,
// service, conditions, selector, podIPs) is the same data under the same JSON names. Values
// without an exact counterpart travel in AnnotationV1alpha1Fields / AnnotationV1beta1Fields.

// sandboxAlphaFields are the v1alpha1 values v1beta1 cannot hold, kept on the v1beta1 object.
type sandboxAlphaFields struct {
	Spec   *sandboxAlphaSpec   `json:"spec,omitempty"`
	Status *sandboxAlphaStatus `json:"status,omitempty"`
}

type sandboxAlphaSpec struct {
	Replicas       *int32          `json:"replicas,omitempty"`
	ShutdownPolicy *ShutdownPolicy `json:"shutdownPolicy,omitempty"`
}

type sandboxAlphaStatus struct {
	Replicas int32 `json:"replicas"`
	// Of is the fingerprint of the v1beta1 status Replicas was saved with.
	Of string `json:"of"`
}

// sandboxBetaFields are the v1beta1 values v1alpha1 cannot hold, kept on the v1alpha1 object.
type sandboxBetaFields struct {
	Spec   *sandboxBetaSpec   `json:"spec,omitempty"`
	Status *sandboxBetaStatus `json:"status,omitempty"`
}

type sandboxBetaSpec struct {
	OperatingMode agentsv1beta1.OperatingMode `json:"operatingMode"`
}

type sandboxBetaStatus struct {
	NodeName string `json:"nodeName"`
	// Of is the fingerprint of the v1alpha1 status NodeName was saved with.
	Of string `json:"of"`
}

var _ conversion.Convertible = &Sandbox{}

// ConvertTo converts this v1alpha1 Sandbox to v1beta1, the hub.
func (src *Sandbox) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*agentsv1beta1.Sandbox)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1alpha1Key)
	var beta sandboxBetaFields
	hasBeta := extras.Take(&dst.Annotations, extras.V1beta1Key, &beta)
	dst.Spec = sandboxSpecTo(&src.Spec)
	dst.Status = sandboxStatusTo(&src.Status)
	// A saved operatingMode counts only if it still reads as these replicas.
	if hasBeta && beta.Spec != nil && equality.Semantic.DeepEqual(replicasFor(beta.Spec.OperatingMode), src.Spec.Replicas) {
		dst.Spec.OperatingMode = beta.Spec.OperatingMode
	}
	if hasBeta && beta.Status != nil && beta.Status.Of == extras.Fingerprint(src.Status) {
		dst.Status.NodeName = beta.Status.NodeName
	}

	var alpha sandboxAlphaFields
	if !equality.Semantic.DeepEqual(replicasFor(dst.Spec.OperatingMode), src.Spec.Replicas) ||
		!equality.Semantic.DeepEqual(shutdownPolicyFrom(dst.Spec.ShutdownPolicy), src.Spec.ShutdownPolicy) {
		alpha.Spec = &sandboxAlphaSpec{Replicas: src.Spec.Replicas, ShutdownPolicy: src.Spec.ShutdownPolicy}
	}
	if src.Status.Replicas != sandboxReplicas(&dst.Status) {
		alpha.Status = &sandboxAlphaStatus{Replicas: src.Status.Replicas, Of: extras.Fingerprint(dst.Status)}
	}
	if alpha != (sandboxAlphaFields{}) {
		extras.Put(&dst.Annotations, extras.V1alpha1Key, alpha)
	}
	return nil
}

// ConvertFrom converts a v1beta1 Sandbox, the hub, to this v1alpha1 Sandbox.
func (dst *Sandbox) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*agentsv1beta1.Sandbox)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1beta1Key)
	var alpha sandboxAlphaFields
	hasAlpha := extras.Take(&dst.Annotations, extras.V1alpha1Key, &alpha)
	dst.Spec = sandboxSpecFrom(&src.Spec)
	dst.Status = sandboxStatusFrom(&src.Status)
	// Saved replicas and shutdownPolicy count only if they still mean this operatingMode and
	// shutdownPolicy.
	if hasAlpha && alpha.Spec != nil &&
		modeFor(alpha.Spec.Replicas) == src.Spec.OperatingMode &&
		shutdownPolicyTo(alpha.Spec.ShutdownPolicy) == src.Spec.ShutdownPolicy {
		dst.Spec.Replicas, dst.Spec.ShutdownPolicy = alpha.Spec.Replicas, alpha.Spec.ShutdownPolicy
	}
	if hasAlpha && alpha.Status != nil && alpha.Status.Of == extras.Fingerprint(src.Status) {
		dst.Status.Replicas = alpha.Status.Replicas
	}

	var beta sandboxBetaFields
	if modeFor(dst.Spec.Replicas) != src.Spec.OperatingMode {
		beta.Spec = &sandboxBetaSpec{OperatingMode: src.Spec.OperatingMode}
	}
	if src.Status.NodeName != "" {
		beta.Status = &sandboxBetaStatus{NodeName: src.Status.NodeName, Of: extras.Fingerprint(dst.Status)}
	}
	if beta != (sandboxBetaFields{}) {
		extras.Put(&dst.Annotations, extras.V1beta1Key, beta)
	}
	return nil
}

// sandboxSpecTo is the v1beta1 meaning of a v1alpha1 spec: replicas 0 is Suspended, any
// other count Running, none unset; a shutdownPolicy pointer becomes its value.
func sandboxSpecTo(in *SandboxSpec) agentsv1beta1.SandboxSpec {
	out := agentsv1beta1.SandboxSpec{
		SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate:          PodTemplateTo(&in.PodTemplate),
			VolumeClaimTemplates: ClaimTemplatesTo(in.VolumeClaimTemplates),
			Service:              extras.Ptr(in.Service),
		},
		ShutdownTime:   in.ShutdownTime.DeepCopy(),
		ShutdownPolicy: shutdownPolicyTo(in.ShutdownPolicy),
		OperatingMode:  modeFor(in.Replicas),
	}
	return out
}

// sandboxSpecFrom is the v1alpha1 form of a v1beta1 spec.
func sandboxSpecFrom(in *agentsv1beta1.SandboxSpec) SandboxSpec {
	return SandboxSpec{
		PodTemplate:          PodTemplateFrom(&in.PodTemplate),
		VolumeClaimTemplates: ClaimTemplatesFrom(in.VolumeClaimTemplates),
		Lifecycle:            Lifecycle{ShutdownTime: in.ShutdownTime.DeepCopy(), ShutdownPolicy: shutdownPolicyFrom(in.ShutdownPolicy)},
		Replicas:             replicasFor(in.OperatingMode),
		Service:              extras.Ptr(in.Service),
	}
}

// modeFor is the operatingMode of v1alpha1 replicas: 0 is Suspended, any other count
// Running, none unset.
func modeFor(replicas *int32) agentsv1beta1.OperatingMode {
	switch {
	case replicas == nil:
		return ""
	case *replicas == 0:
		return agentsv1beta1.OperatingModeSuspended
	default:
		return agentsv1beta1.OperatingModeRunning
	}
}

// replicasFor is the v1alpha1 replicas of an operatingMode: Running 1, Suspended 0, else none.
func replicasFor(mode agentsv1beta1.OperatingMode) *int32 {
	switch mode {
	case agentsv1beta1.OperatingModeRunning:
		return int32Ptr(1)
	case agentsv1beta1.OperatingModeSuspended:
		return int32Ptr(0)
	default:
		return nil
	}
}

func shutdownPolicyTo(p *ShutdownPolicy) agentsv1beta1.ShutdownPolicy {
	if p == nil {
		return ""
	}
	return agentsv1beta1.ShutdownPolicy(*p)
}

func shutdownPolicyFrom(p agentsv1beta1.ShutdownPolicy) *ShutdownPolicy {
	if p == "" {
		return nil
	}
	out := ShutdownPolicy(p)
	return &out
}

func sandboxStatusTo(in *SandboxStatus) agentsv1beta1.SandboxStatus {
	return agentsv1beta1.SandboxStatus{
		ServiceFQDN: in.ServiceFQDN,
		Service:     in.Service,
		Conditions:  extras.Conditions(in.Conditions),
		Selector:    in.LabelSelector,
		PodIPs:      slices.Clone(in.PodIPs),
	}
}

func sandboxStatusFrom(in *agentsv1beta1.SandboxStatus) SandboxStatus {
	return SandboxStatus{
		ServiceFQDN:   in.ServiceFQDN,
		Service:       in.Service,
		Conditions:    extras.Conditions(in.Conditions),
		Replicas:      sandboxReplicas(in),
		LabelSelector: in.Selector,
		PodIPs:        slices.Clone(in.PodIPs),
	}
}

// sandboxReplicas is v1alpha1's status.replicas of a v1beta1 status: the number of pods the
// Sandbox has. Its PodScheduled condition mirrors the pod's and is there exactly while it
// has one.
func sandboxReplicas(st *agentsv1beta1.SandboxStatus) int32 {
	for _, c := range st.Conditions {
		if c.Type == agentsv1beta1.ConditionPodScheduled {
			return 1
		}
	}
	return 0
}

// PodTemplateTo converts a v1alpha1 pod template to v1beta1 (the same data).
func PodTemplateTo(in *PodTemplate) agentsv1beta1.PodTemplate {
	return agentsv1beta1.PodTemplate{
		Spec:       *in.Spec.DeepCopy(),
		ObjectMeta: agentsv1beta1.PodMetadata(*in.ObjectMeta.DeepCopy()),
	}
}

// PodTemplateFrom converts a v1beta1 pod template to v1alpha1 (the same data).
func PodTemplateFrom(in *agentsv1beta1.PodTemplate) PodTemplate {
	return PodTemplate{
		Spec:       *in.Spec.DeepCopy(),
		ObjectMeta: PodMetadata(*in.ObjectMeta.DeepCopy()),
	}
}

// ClaimTemplatesTo converts v1alpha1 volume claim templates to v1beta1 (the same data).
func ClaimTemplatesTo(in []PersistentVolumeClaimTemplate) []agentsv1beta1.PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]agentsv1beta1.PersistentVolumeClaimTemplate, len(in))
	for i := range in {
		out[i] = agentsv1beta1.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata(*in[i].EmbeddedObjectMetadata.DeepCopy()),
			Spec:                   *in[i].Spec.DeepCopy(),
		}
	}
	return out
}

// ClaimTemplatesFrom converts v1beta1 volume claim templates to v1alpha1 (the same data).
func ClaimTemplatesFrom(in []agentsv1beta1.PersistentVolumeClaimTemplate) []PersistentVolumeClaimTemplate {
	if in == nil {
		return nil
	}
	out := make([]PersistentVolumeClaimTemplate, len(in))
	for i := range in {
		out[i] = PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: EmbeddedObjectMetadata(*in[i].EmbeddedObjectMetadata.DeepCopy()),
			Spec:                   *in[i].Spec.DeepCopy(),
		}
	}
	return out
}

func int32Ptr(v int32) *int32 { return &v }
