package webhooks

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The rules below are what the CRD schema cannot say (or says only for the API server, not for
// Go callers). Every function is pure: same object in, same list out, no API reads.

// ValidateReferenceName checks the name of a referenced object (pool, template): required and a
// DNS-1123 subdomain, as object names are.
func ValidateReferenceName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// validateVolumeClaimTemplates is policy.ValidateVolumeClaimTemplates: unique DNS-1123
// names, at most policy.MaxVolumeClaimTemplates, no reserved keys in their metadata.
func validateVolumeClaimTemplates(vcts []agentsv1beta1.PersistentVolumeClaimTemplate, fldPath *field.Path) field.ErrorList {
	return policy.ValidateVolumeClaimTemplates(vcts, fldPath)
}

// validateBlueprint checks what sandboxes, templates and (through templates) pools share.
func validateBlueprint(bp *agentsv1beta1.SandboxBlueprint, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, policy.ValidateTemplatePodMetadata(&bp.PodTemplate.ObjectMeta, fldPath.Child("podTemplate", "metadata"))...)
	errs = append(errs, validateVolumeClaimTemplates(bp.VolumeClaimTemplates, fldPath.Child("volumeClaimTemplates"))...)
	if len(bp.PodTemplate.Spec.Containers) == 0 {
		errs = append(errs, field.Required(fldPath.Child("podTemplate", "spec", "containers"), "a sandbox pod runs at least one container"))
	}
	return errs
}

// ValidateSandbox checks a Sandbox: its blueprint and its enums.
func ValidateSandbox(sb *agentsv1beta1.Sandbox) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateBlueprint(&sb.Spec.SandboxBlueprint, spec)
	errs = append(errs, enum(string(sb.Spec.ShutdownPolicy), spec.Child("shutdownPolicy"),
		agentsv1beta1.ShutdownPolicyDelete, agentsv1beta1.ShutdownPolicyRetain)...)
	errs = append(errs, enum(string(sb.Spec.OperatingMode), spec.Child("operatingMode"),
		agentsv1beta1.OperatingModeRunning, agentsv1beta1.OperatingModeSuspended)...)
	return errs
}

// ValidateTemplate checks a SandboxTemplate: its blueprint and its policies.
func ValidateTemplate(t *extv1beta1.SandboxTemplate) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateBlueprint(&t.Spec.SandboxBlueprint, spec)
	errs = append(errs, enum(string(t.Spec.NetworkPolicyManagement), spec.Child("networkPolicyManagement"),
		extv1beta1.NetworkPolicyManaged, extv1beta1.NetworkPolicyUnmanaged)...)
	errs = append(errs, enum(string(t.Spec.EnvVarsInjectionPolicy), spec.Child("envVarsInjectionPolicy"),
		extv1beta1.EnvVarsInjectionAllowed, extv1beta1.EnvVarsInjectionOverrides, extv1beta1.EnvVarsInjectionDisallowed)...)
	errs = append(errs, enum(string(t.Spec.VolumeClaimTemplatesPolicy), spec.Child("volumeClaimTemplatesPolicy"),
		extv1beta1.VolumeClaimTemplatesDisallowed, extv1beta1.VolumeClaimTemplatesAllowed, extv1beta1.VolumeClaimTemplatesOverrides)...)
	return errs
}

// ValidatePool checks a SandboxWarmPool: a template reference is required and must be a valid
// name, replicas are between 0 and MaxWarmPoolReplicas, the update strategy is known.
func ValidatePool(p *extv1beta1.SandboxWarmPool) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateReferenceName(p.Spec.SandboxTemplateRef.Name, spec.Child("sandboxTemplateRef", "name"))
	if r := p.Spec.Replicas; r != nil && (*r < 0 || *r > extv1beta1.MaxWarmPoolReplicas) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *r, fmt.Sprintf("must be between 0 and %d", extv1beta1.MaxWarmPoolReplicas)))
	}
	errs = append(errs, enum(string(p.Spec.UpdateStrategy.Type), spec.Child("updateStrategy", "type"),
		extv1beta1.RecreateUpdateStrategy, extv1beta1.OnReplenishUpdateStrategy)...)
	return errs
}

// ValidateClaim checks a SandboxClaim on its own: pool reference, pod metadata, env entries,
// volume claim templates and lifecycle. policy.ValidateClaimAgainstTemplate adds the template's policies.
func ValidateClaim(c *extv1beta1.SandboxClaim) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateReferenceName(c.Spec.WarmPoolRef.Name, spec.Child("warmPoolRef", "name"))
	errs = append(errs, policy.ValidateClaimPodMetadata(&c.Spec.AdditionalPodMetadata, spec.Child("additionalPodMetadata"))...)
	errs = append(errs, policy.ValidateClaimLists(c)...)
	if len(c.Spec.Env) <= policy.MaxClaimEnv { // a longer list is refused whole, not walked
		errs = append(errs, validateClaimEnv(c.Spec.Env, spec.Child("env"))...)
	}
	errs = append(errs, validateVolumeClaimTemplates(c.Spec.VolumeClaimTemplates, spec.Child("volumeClaimTemplates"))...)
	if lc := c.Spec.Lifecycle; lc != nil {
		p := spec.Child("lifecycle")
		// A ttl on a sandbox that never finishes is harmless (it never expires by ttl); only a
		// negative one is meaningless.
		if lc.TTLSecondsAfterFinished != nil && *lc.TTLSecondsAfterFinished < 0 {
			errs = append(errs, field.Invalid(p.Child("ttlSecondsAfterFinished"), *lc.TTLSecondsAfterFinished, "must be greater than or equal to 0"))
		}
		errs = append(errs, enum(string(lc.ShutdownPolicy), p.Child("shutdownPolicy"),
			extv1beta1.ClaimShutdownPolicyDelete, extv1beta1.ClaimShutdownPolicyDeleteForeground, extv1beta1.ClaimShutdownPolicyRetain)...)
	}
	return errs
}

func validateClaimEnv(env []extv1beta1.EnvVar, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	type key struct{ name, container string }
	seen := sets.New[key]()
	for i, e := range env {
		p := fldPath.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), e.Name, msg))
			}
		}
		if e.ContainerName != "" {
			for _, msg := range validation.IsDNS1123Label(e.ContainerName) {
				errs = append(errs, field.Invalid(p.Child("containerName"), e.ContainerName, msg))
			}
		}
		k := key{e.Name, e.ContainerName}
		if e.Name != "" && seen.Has(k) {
			errs = append(errs, field.Duplicate(p.Child("name"), e.Name))
		}
		seen.Insert(k)
	}
	return errs
}

// ValidateNewClaimBinding refuses a new claim that names a Sandbox in its
// agents.x-k8s.io/sandbox-name annotation, unless trusted creates it: clients of the public API
// read it as the Sandbox the claim is bound to, and a tenant's new claim is bound to none. The
// operator writes it once the claim has its Sandbox (ValidateClaimUpdate keeps it so); the
// platform may carry it over when it restores or moves claims whose Sandboxes come with them.
func ValidateNewClaimBinding(c *extv1beta1.SandboxClaim, trusted bool) field.ErrorList {
	v, ok := c.Annotations[agentsv1beta1.AnnotationSandboxName]
	if !ok || trusted {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(agentsv1beta1.AnnotationSandboxName),
		fmt.Sprintf("names the Sandbox the claim is bound to, and a new claim is bound to none (%q was given); the operator sets it once the claim has its Sandbox: leave it unset", v))}
}

// ValidateClaimUpdate checks what may change on a claim: warmPoolRef never (the stamp and any
// binding were made for that pool), the template-hash stamp, the first-observed times admission
// stamps (the platform's startup metrics are read from those times: a claim's owner must not be
// able to rewrite them) and the sandbox-name annotation (the binding clients read) only by the
// operator, the creator and what ClaimPolicies count it by (the creator's groups, its
// reservation) never.
func ValidateClaimUpdate(newClaim, oldClaim *extv1beta1.SandboxClaim, byOperator bool) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(newClaim.Spec.WarmPoolRef, oldClaim.Spec.WarmPoolRef,
		field.NewPath("spec", "warmPoolRef"))
	if !byOperator {
		errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationSandboxTemplateHash,
			field.NewPath("metadata", "annotations"), "set by admission and the operator only")...)
		for _, key := range []string{agentsv1beta1.AnnotationWebhookFirstObservedAt, agentsv1beta1.AnnotationControllerFirstObservedAt} {
			errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, key,
				field.NewPath("metadata", "annotations"), "the time admission first saw the claim, recorded by admission")...)
		}
		errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationSandboxName,
			field.NewPath("metadata", "annotations"), "names the Sandbox the claim is bound to, set by the operator only")...)
	}
	errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationCreator,
		field.NewPath("metadata", "annotations"), "the identity that created the claim, recorded by admission")...)
	// What its ClaimPolicies count the claim by: changed, a claim would move to another tenant
	// (its slot freed while it stays), or carry a reservation it was not given.
	errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, tenancyv1alpha1.AnnotationCreatorGroups,
		field.NewPath("metadata", "annotations"), "the groups of the identity that created the claim, recorded by admission")...)
	errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, tenancyv1alpha1.AnnotationReservation,
		field.NewPath("metadata", "annotations"), "the claim's reservation in its ClaimPolicies' ledgers, recorded by admission")...)
	return errs
}

// immutableKey reports a change (set, changed or removed) of one map key.
func immutableKey(newMap, oldMap map[string]string, key string, fldPath *field.Path, why string) field.ErrorList {
	nv, nok := newMap[key]
	ov, ook := oldMap[key]
	if nok == ook && nv == ov {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath.Key(key), nv, "field is immutable: "+why)}
}

// RatchetUpdate drops from the errors of an updated object those the old object already had
// (same type and field path): an update is not refused for a problem it did not introduce,
// such as a reserved key on an object created before the rule existed.
func RatchetUpdate(newErrs, oldErrs field.ErrorList) field.ErrorList {
	type key struct {
		typ  field.ErrorType
		path string
	}
	old := sets.New[key]()
	for _, e := range oldErrs {
		old.Insert(key{e.Type, e.Field})
	}
	var errs field.ErrorList
	for _, e := range newErrs {
		if !old.Has(key{e.Type, e.Field}) {
			errs = append(errs, e)
		}
	}
	return errs
}

// enum checks an optional enum value ("" passes: the default applies).
func enum[T ~string](value string, fldPath *field.Path, allowed ...T) field.ErrorList {
	if value == "" {
		return nil
	}
	valid := make([]string, len(allowed))
	for i, a := range allowed {
		if string(a) == value {
			return nil
		}
		valid[i] = string(a)
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

// A claim's metadata may say nothing about other objects' lives, nor outlive its deletion:
// what a claim's creator (anyone but the operator, the platform and the Kubernetes
// controllers: Authority.trusted) may not put on it, and how they may not delete it.
const (
	msgClaimOwnerReference = "a claim carries no owner references but the platform's: one to an object that is not yours " +
		"holds up that object's deletion (blockOwnerDeletion), and the claim would end with an object you do not control; " +
		"remove it, and delete the claim when you are done with it"
	msgClaimFinalizer = "a claim carries no finalizers but the platform's: sandgate removes none, so the claim and its Sandbox " +
		"would outlive their deletion; remove it"
	msgClaimOrphaned = "deleting a claim ends its Sandbox: orphaning would leave the Sandbox and its pod running, owned by " +
		"nothing, beyond the claim's lifecycle and out of your reach; delete with propagationPolicy Background (the " +
		"default; kubectl delete --cascade=background) or Foreground"
)

// ValidateClaimReferences checks the owner references and finalizers a claim gains (every one
// of a new claim: oldClaim nil) in a request of its creator's: it may gain none. An owner
// reference of a tenant's choosing ties the claim's life to an object the tenant may not own,
// and with blockOwnerDeletion (and a finalizer nobody removes) keeps that object's foreground
// deletion waiting for ever; a finalizer keeps a deleted claim, and with it its Sandbox, until
// someone removes it, which the tenant cannot (no update right) and sandgate never does. No
// public client sets either on a claim. A reference or finalizer the claim had already is not
// held against an update; the ones the API server and the garbage collector add while
// deleting a claim (orphan, foregroundDeletion) are not admission's to see.
func ValidateClaimReferences(newClaim, oldClaim *extv1beta1.SandboxClaim) field.ErrorList {
	var oldRefs []metav1.OwnerReference
	var oldFinalizers []string
	if oldClaim != nil {
		oldRefs, oldFinalizers = oldClaim.OwnerReferences, oldClaim.Finalizers
	}
	var errs field.ErrorList
	md := field.NewPath("metadata")
	for i, ref := range newClaim.OwnerReferences {
		if !slices.ContainsFunc(oldRefs, func(o metav1.OwnerReference) bool { return equality.Semantic.DeepEqual(o, ref) }) {
			errs = append(errs, field.Forbidden(md.Child("ownerReferences").Index(i), msgClaimOwnerReference))
		}
	}
	for i, f := range newClaim.Finalizers {
		if !slices.Contains(oldFinalizers, f) {
			errs = append(errs, field.Forbidden(md.Child("finalizers").Index(i), msgClaimFinalizer))
		}
	}
	return errs
}

// ValidateClaimDeletion checks how a claim of its creator's is deleted (opts, as the request
// carries them; nil for none): never so that its Sandbox outlives it. The API server orphans a
// deleted object's dependents when opts say so (propagationPolicy Orphan, or the deprecated
// orphanDependents), or, when they name no policy, when the object carries the orphan
// finalizer; the garbage collector then strips the Sandbox's owner reference and the Sandbox
// runs on, counted by no claim and deleted by no lifecycle.
func ValidateClaimDeletion(opts *metav1.DeleteOptions, c *extv1beta1.SandboxClaim) field.ErrorList {
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	//nolint:staticcheck // SA1019: the deprecated option still orphans, so it is checked
	if o := opts.OrphanDependents; o != nil {
		if *o {
			return field.ErrorList{field.Forbidden(field.NewPath("orphanDependents"), msgClaimOrphaned)}
		}
		return nil
	}
	if p := opts.PropagationPolicy; p != nil {
		if *p == metav1.DeletePropagationOrphan {
			return field.ErrorList{field.Forbidden(field.NewPath("propagationPolicy"), msgClaimOrphaned)}
		}
		return nil
	}
	for i, f := range c.Finalizers {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers").Index(i), msgClaimOrphaned)}
		case metav1.FinalizerDeleteDependents:
			return nil
		}
	}
	return nil
}
