package v1alpha1

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/internal/extras"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ShadowPoolPrefix starts the name of the pool a v1alpha1 claim is served from when it names
// no pool of its own (warmpool unset, "default" or "none"): shadow-pool-<template>. The
// public project's migration uses the same convention, so pools created for it serve
// sandgate too. Such a pool must exist in the claim's namespace and name the claim's
// template; with replicas 0 it serves cold starts only, as "none" asked.
const ShadowPoolPrefix = "shadow-pool-"

// SandboxClaim conversion. A v1alpha1 claim names a template and a warm pool policy, a
// v1beta1 claim names a pool (whose template it gets):
//
//	v1alpha1                                            v1beta1
//	warmpool: <pool>, sandboxTemplateRef: <any>         warmPoolRef.name: <pool>
//	warmpool: "" | default | none, template <t>         warmPoolRef.name: shadow-pool-<t>
//	(none)                                              volumeClaimTemplates
//
// Going back, warmPoolRef shadow-pool-<t> reads as template <t> with warmpool "default", and
// any other pool <p> as warmpool <p> with an empty sandboxTemplateRef (a claim does not
// record its pool's template) — unless the claim was written through v1alpha1, whose
// sandboxTemplateRef and warmpool are kept in conversion.sandgate.dev/v1alpha1-fields and
// come back as written for as long as they still name the claim's pool. lifecycle, env,
// additionalPodMetadata and the status are the same data under the same JSON names. A v1beta1
// claim's volumeClaimTemplates travel in conversion.sandgate.dev/v1beta1-fields on the
// v1alpha1 object, so that a v1alpha1 client's update keeps them.
//
// Unlike the public project's webhook, conversion never derives a pool from the name of the
// claim's Sandbox: sandgate stores claims only as v1beta1, whose warmPoolRef is authoritative
// (and immutable), and a cold-started Sandbox named <claim>-xxxxx would be mistaken for a
// member of a pool named <claim>.

// UpstreamClaimStateAnnotation is where the public project's conversion webhook keeps a
// v1alpha1 claim (its whole JSON) on the v1beta1 object. Claims it stored that way read back
// through sandgate's v1alpha1 with their sandboxTemplateRef and warmpool, under the same
// check as sandgate's own annotation; the annotation is not shown to v1alpha1 clients, so
// their next write replaces it with sandgate's.
const UpstreamClaimStateAnnotation = "api.agents.x-k8s.io/v1alpha1-sandboxclaim-state"

// claimAlphaFields are the v1alpha1 values v1beta1 cannot hold, kept on the v1beta1 object.
type claimAlphaFields struct {
	Spec *claimAlphaSpec `json:"spec,omitempty"`
}

type claimAlphaSpec struct {
	TemplateRef SandboxTemplateRef `json:"sandboxTemplateRef"`
	WarmPool    *WarmPoolPolicy    `json:"warmpool,omitempty"`
}

// claimBetaFields are the v1beta1 values v1alpha1 cannot hold, kept on the v1alpha1 object.
type claimBetaFields struct {
	Spec *claimBetaSpec `json:"spec,omitempty"`
}

type claimBetaSpec struct {
	// WarmPoolRef is kept when v1alpha1 cannot name the pool (a pool called "default",
	// "none" or "").
	WarmPoolRef          *extv1beta1.WarmPoolRef                       `json:"warmPoolRef,omitempty"`
	VolumeClaimTemplates []agentsv1beta1.PersistentVolumeClaimTemplate `json:"volumeClaimTemplates,omitempty"`
}

var _ conversion.Convertible = &SandboxClaim{}

// ConvertTo converts this v1alpha1 SandboxClaim to v1beta1, the hub.
func (src *SandboxClaim) ConvertTo(hub conversion.Hub) error {
	dst := hub.(*extv1beta1.SandboxClaim)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1alpha1Key)
	var beta claimBetaFields
	hasBeta := extras.Take(&dst.Annotations, extras.V1beta1Key, &beta)
	s := &src.Spec
	dst.Spec = extv1beta1.SandboxClaimSpec{
		WarmPoolRef:           extv1beta1.WarmPoolRef{Name: poolOf(s)},
		Lifecycle:             lifecycleTo(s.Lifecycle),
		AdditionalPodMetadata: agentsv1beta1.PodMetadata(*s.AdditionalPodMetadata.DeepCopy()),
		Env:                   envTo(s.Env),
	}
	dst.Status = extv1beta1.SandboxClaimStatus{
		Conditions: extras.Conditions(src.Status.Conditions),
		Sandbox:    extv1beta1.SandboxStatusRef{Name: src.Status.SandboxStatus.Name, PodIPs: slices.Clone(src.Status.SandboxStatus.PodIPs)},
	}
	if hasBeta && beta.Spec != nil {
		// v1alpha1 cannot change volume claim templates: saved ones always still hold. A
		// saved pool counts only if it still reads as the claim's warmpool and template.
		dst.Spec.VolumeClaimTemplates = beta.Spec.VolumeClaimTemplates
		if ref := beta.Spec.WarmPoolRef; ref != nil && equality.Semantic.DeepEqual(claimRefsFrom(ref.Name), claimRefsOf(s)) {
			dst.Spec.WarmPoolRef = *ref
		}
	}
	if back := claimRefsFrom(dst.Spec.WarmPoolRef.Name); !equality.Semantic.DeepEqual(back, claimRefsOf(s)) {
		extras.Put(&dst.Annotations, extras.V1alpha1Key, claimAlphaFields{Spec: &claimAlphaSpec{TemplateRef: s.TemplateRef, WarmPool: s.WarmPool}})
	}
	return nil
}

// ConvertFrom converts a v1beta1 SandboxClaim, the hub, to this v1alpha1 SandboxClaim.
func (dst *SandboxClaim) ConvertFrom(hub conversion.Hub) error {
	src := hub.(*extv1beta1.SandboxClaim)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	extras.Drop(&dst.Annotations, extras.V1beta1Key)
	var alpha claimAlphaFields
	hasAlpha := extras.Take(&dst.Annotations, extras.V1alpha1Key, &alpha)
	var upstream SandboxClaim
	if extras.Take(&dst.Annotations, UpstreamClaimStateAnnotation, &upstream) && !hasAlpha {
		alpha.Spec, hasAlpha = &claimAlphaSpec{TemplateRef: upstream.Spec.TemplateRef, WarmPool: upstream.Spec.WarmPool}, true
	}
	s := &src.Spec
	refs := claimRefsFrom(s.WarmPoolRef.Name)
	dst.Spec = SandboxClaimSpec{
		TemplateRef:           refs.TemplateRef,
		Lifecycle:             lifecycleFrom(s.Lifecycle),
		WarmPool:              refs.WarmPool,
		AdditionalPodMetadata: agentsv1alpha1.PodMetadata(*s.AdditionalPodMetadata.DeepCopy()),
		Env:                   envFrom(s.Env),
	}
	dst.Status = SandboxClaimStatus{
		Conditions:    extras.Conditions(src.Status.Conditions),
		SandboxStatus: SandboxStatusRef{Name: src.Status.Sandbox.Name, PodIPs: slices.Clone(src.Status.Sandbox.PodIPs)},
	}
	// Saved template and warmpool count only if they still name the claim's pool.
	if hasAlpha && alpha.Spec != nil && poolOf(&SandboxClaimSpec{TemplateRef: alpha.Spec.TemplateRef, WarmPool: alpha.Spec.WarmPool}) == s.WarmPoolRef.Name {
		dst.Spec.TemplateRef, dst.Spec.WarmPool = alpha.Spec.TemplateRef, alpha.Spec.WarmPool
	}
	var beta claimBetaSpec
	if poolOf(&dst.Spec) != s.WarmPoolRef.Name {
		ref := s.WarmPoolRef
		beta.WarmPoolRef = &ref
	}
	if s.VolumeClaimTemplates != nil {
		beta.VolumeClaimTemplates = s.VolumeClaimTemplates
	}
	if beta.WarmPoolRef != nil || beta.VolumeClaimTemplates != nil {
		extras.Put(&dst.Annotations, extras.V1beta1Key, claimBetaFields{Spec: &beta})
	}
	return nil
}

// claimRefs are the two fields through which a v1alpha1 claim names its pool.
type claimRefs struct {
	TemplateRef SandboxTemplateRef
	WarmPool    *WarmPoolPolicy
}

func claimRefsOf(s *SandboxClaimSpec) claimRefs {
	return claimRefs{TemplateRef: s.TemplateRef, WarmPool: s.WarmPool}
}

// poolOf is the pool a v1alpha1 claim is served from: the pool its warmpool names, else its
// template's shadow pool.
func poolOf(s *SandboxClaimSpec) string {
	if s.WarmPool != nil && s.WarmPool.IsSpecificPool() {
		return string(*s.WarmPool)
	}
	return ShadowPoolPrefix + s.TemplateRef.Name
}

// claimRefsFrom is how v1alpha1 names the pool a v1beta1 claim is served from.
func claimRefsFrom(pool string) claimRefs {
	if template, ok := strings.CutPrefix(pool, ShadowPoolPrefix); ok {
		policy := WarmPoolPolicyDefault
		return claimRefs{TemplateRef: SandboxTemplateRef{Name: template}, WarmPool: &policy}
	}
	policy := WarmPoolPolicy(pool)
	return claimRefs{WarmPool: &policy}
}

func lifecycleTo(in *Lifecycle) *extv1beta1.Lifecycle {
	if in == nil {
		return nil
	}
	return &extv1beta1.Lifecycle{
		ShutdownTime:            in.ShutdownTime.DeepCopy(),
		TTLSecondsAfterFinished: extras.Ptr(in.TTLSecondsAfterFinished),
		ShutdownPolicy:          extv1beta1.ClaimShutdownPolicy(in.ShutdownPolicy),
	}
}

func lifecycleFrom(in *extv1beta1.Lifecycle) *Lifecycle {
	if in == nil {
		return nil
	}
	return &Lifecycle{
		ShutdownTime:            in.ShutdownTime.DeepCopy(),
		TTLSecondsAfterFinished: extras.Ptr(in.TTLSecondsAfterFinished),
		ShutdownPolicy:          ShutdownPolicy(in.ShutdownPolicy),
	}
}

func envTo(in []EnvVar) []extv1beta1.EnvVar {
	if in == nil {
		return nil
	}
	out := make([]extv1beta1.EnvVar, len(in))
	for i, e := range in {
		out[i] = extv1beta1.EnvVar(e)
	}
	return out
}

func envFrom(in []extv1beta1.EnvVar) []EnvVar {
	if in == nil {
		return nil
	}
	out := make([]EnvVar, len(in))
	for i, e := range in {
		out[i] = EnvVar(e)
	}
	return out
}
