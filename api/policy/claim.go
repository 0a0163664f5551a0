package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimBlueprint is the blueprint of the Sandbox a claim gets when it is cold-started from
// tmpl: TemplateBlueprint plus the claim's env, volume claim templates and additional pod
// metadata, as the template's policies allow. When the claim asks for something the template
// does not allow, it returns the reasons, with the claim's field paths.
//
// The rules, the same for admission (422) and for the claim controller (Ready=False):
//   - env needs envVarsInjectionPolicy Allowed or Overrides. An entry with containerName goes
//     into that container or init container, which must exist; one without goes into every
//     container (not the init containers). Replacing a variable the template sets needs
//     Overrides; under Allowed, a target container must not use envFrom either, since its
//     variables could be overridden unseen.
//   - volumeClaimTemplates need volumeClaimTemplatesPolicy Allowed or Overrides; replacing one
//     the template defines (same name) needs Overrides. A claim's volume is a new, empty volume
//     (no dataSource, dataSourceRef, volumeName or selector) and never replaces a volume of the
//     template's pod (injectVolumeClaimTemplates).
//   - the Sandbox they make together must be buildable: within the limits a Sandbox and its pod
//     are held to (validateBuildable), or it would be admitted and retried forever.
//   - additionalPodMetadata may add keys, not change a value the template sets: a template's
//     pod labels are what its NetworkPolicy and other selectors rely on.
func ClaimBlueprint(tmpl *extv1beta1.SandboxTemplate, claim *extv1beta1.SandboxClaim) (agentsv1beta1.SandboxBlueprint, field.ErrorList) {
	bp := TemplateBlueprint(tmpl)
	spec := field.NewPath("spec")
	errs := injectEnv(tmpl, claim.Spec.Env, &bp.PodTemplate.Spec, spec.Child("env"))
	errs = append(errs, injectVolumeClaimTemplates(tmpl, claim.Spec.VolumeClaimTemplates, &bp, spec.Child("volumeClaimTemplates"))...)
	errs = append(errs, WithPodMetadata(&bp, claim.Spec.AdditionalPodMetadata, tmpl.Name, spec.Child("additionalPodMetadata"))...)
	if len(errs) == 0 {
		errs = validateBuildable(tmpl.Name, claim, &bp, spec)
	}
	return bp, errs
}

// AddsToTemplate reports whether a claim asks for anything beyond its template's blueprint
// (env, volume claim templates, pod metadata): only such a claim can be refused by
// ClaimBlueprint, so callers skip the check (and the template read) for the others.
func AddsToTemplate(claim *extv1beta1.SandboxClaim) bool {
	md := claim.Spec.AdditionalPodMetadata
	return len(claim.Spec.Env)+len(claim.Spec.VolumeClaimTemplates)+len(md.Labels)+len(md.Annotations) > 0
}

// ValidateClaimAgainstTemplate says why a claim cannot be cold-started from tmpl; empty when
// it can. It is ClaimBlueprint's error list.
func ValidateClaimAgainstTemplate(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate) field.ErrorList {
	_, errs := ClaimBlueprint(tmpl, claim)
	return errs
}

// WithPodMetadata adds a claim's additional pod metadata to a blueprint's pod template: the
// only change binding a warm member makes to its spec, and part of a cold start. A key the
// blueprint already sets to another value is refused (the blueprint is left unchanged for
// it); source names the template in the message.
func WithPodMetadata(bp *agentsv1beta1.SandboxBlueprint, add agentsv1beta1.PodMetadata, source string, fldPath *field.Path) field.ErrorList {
	md := &bp.PodTemplate.ObjectMeta
	errs := mergeKeys(&md.Labels, add.Labels, source, fldPath.Child("labels"))
	return append(errs, mergeKeys(&md.Annotations, add.Annotations, source, fldPath.Child("annotations"))...)
}

func mergeKeys(dst *map[string]string, add map[string]string, source string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(add) {
		v := add[k]
		if cur, ok := (*dst)[k]; ok && cur != v {
			errs = append(errs, field.Invalid(fldPath.Key(k), v, fmt.Sprintf("template %s sets it to %q; a claim may add pod metadata, not change it", source, cur)))
			continue
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[k] = v
	}
	return errs
}

func injectEnv(tmpl *extv1beta1.SandboxTemplate, env []extv1beta1.EnvVar, spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if len(env) == 0 {
		return nil
	}
	policy := tmpl.Spec.EnvVarsInjectionPolicy
	if policy == "" {
		policy = extv1beta1.EnvVarsInjectionDisallowed
	}
	if policy == extv1beta1.EnvVarsInjectionDisallowed {
		return field.ErrorList{field.Forbidden(fldPath,
			fmt.Sprintf("template %s does not allow env injection (envVarsInjectionPolicy %s)", tmpl.Name, policy))}
	}
	// Each container's variables by name, kept current as entries go in: one lookup per entry
	// and container, so a claim's env costs linear time whatever its length.
	byName := map[*corev1.Container]map[string]int{}
	indexOf := func(c *corev1.Container) map[string]int {
		idx, ok := byName[c]
		if !ok {
			idx = make(map[string]int, len(c.Env))
			for i, e := range c.Env {
				idx[e.Name] = i
			}
			byName[c] = idx
		}
		return idx
	}
	var errs field.ErrorList
	for i, v := range env {
		p := fldPath.Index(i)
		targets := envTargets(spec, v.ContainerName)
		if len(targets) == 0 && v.ContainerName != "" {
			errs = append(errs, field.NotFound(p.Child("containerName"), v.ContainerName))
			continue
		}
		for _, c := range targets {
			idx := indexOf(c)
			at, set := idx[v.Name]
			switch {
			case policy == extv1beta1.EnvVarsInjectionOverrides && set:
				c.Env[at] = corev1.EnvVar{Name: v.Name, Value: v.Value}
				continue
			case set:
				errs = append(errs, field.Forbidden(p.Child("name"), fmt.Sprintf(
					"container %s of template %s already sets %s; overriding it needs envVarsInjectionPolicy %s",
					c.Name, tmpl.Name, v.Name, extv1beta1.EnvVarsInjectionOverrides)))
			case policy != extv1beta1.EnvVarsInjectionOverrides && len(c.EnvFrom) > 0:
				errs = append(errs, field.Forbidden(p.Child("name"), fmt.Sprintf(
					"container %s of template %s takes variables from envFrom, which %s could override unseen; injecting into it needs envVarsInjectionPolicy %s",
					c.Name, tmpl.Name, v.Name, extv1beta1.EnvVarsInjectionOverrides)))
			default:
				idx[v.Name] = len(c.Env)
				c.Env = append(c.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
				continue
			}
			break
		}
	}
	return errs
}

// envTargets are the containers an env entry goes into: the container or init container it
// names, or every container.
func envTargets(spec *corev1.PodSpec, name string) []*corev1.Container {
	var out []*corev1.Container
	if name == "" {
		for i := range spec.Containers {
			out = append(out, &spec.Containers[i])
		}
		return out
	}
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return []*corev1.Container{&list[i]}
			}
		}
	}
	return nil
}
