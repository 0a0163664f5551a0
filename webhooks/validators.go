package webhooks

import (
	"fmt"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
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
// binding were made for that pool), the template-hash stamp and the sandbox-name annotation
// (the binding clients read) only by the operator, the creator never.
func ValidateClaimUpdate(newClaim, oldClaim *extv1beta1.SandboxClaim, byOperator bool) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(newClaim.Spec.WarmPoolRef, oldClaim.Spec.WarmPoolRef,
		field.NewPath("spec", "warmPoolRef"))
	if !byOperator {
		errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationSandboxTemplateHash,
			field.NewPath("metadata", "annotations"), "set by admission and the operator only")...)
		errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationSandboxName,
			field.NewPath("metadata", "annotations"), "names the Sandbox the claim is bound to, set by the operator only")...)
	}
	errs = append(errs, immutableKey(newClaim.Annotations, oldClaim.Annotations, agentsv1beta1.AnnotationCreator,
		field.NewPath("metadata", "annotations"), "the identity that created the claim, recorded by admission")...)
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
