package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Which pod label and annotation keys users may not set, by who writes the metadata:
//
//   - a pod template (of a SandboxTemplate or a Sandbox), written by whoever may create those
//     and so may set the whole pod spec anyway: keys of this API's domains
//     (agents.x-k8s.io, extensions.agents.x-k8s.io and their subdomains, which the operator
//     sets and clients select on), and the bare kubernetes.io/ and k8s.io/ prefixes, which
//     Kubernetes keeps for itself. Subdomains such as app.kubernetes.io stay open there.
//   - a claim's additionalPodMetadata, written by a tenant onto a pod the platform's template
//     defines: additionally every subdomain of kubernetes.io and k8s.io (such keys configure
//     the node and the cluster, e.g. an AppArmor profile), except the annotations in
//     claimKeyExceptions.
//
// Admission refuses such keys (422); the Sandbox controller leaves them off the pod for
// objects admitted before a rule existed (PodMetadataFromTemplate).

// systemDomains are the domains Kubernetes keeps for itself.
var systemDomains = []string{"kubernetes.io", "k8s.io"}

// claimKeyExceptions are keys under systemDomains a claim may still set: they concern only
// the claim's own pod.
var claimKeyExceptions = []string{"cluster-autoscaler.kubernetes.io/safe-to-evict"}

// IsReservedTemplateKey reports whether a pod template may not carry the key.
func IsReservedTemplateKey(key string) bool {
	if agentsv1beta1.IsReservedKey(key) {
		return true
	}
	prefix, _, found := strings.Cut(key, "/")
	return found && slices.Contains(systemDomains, prefix)
}

// IsReservedClaimKey reports whether a claim's additionalPodMetadata may not carry the key.
func IsReservedClaimKey(key string) bool {
	if IsReservedTemplateKey(key) {
		return true
	}
	prefix, _, found := strings.Cut(key, "/")
	if !found || slices.Contains(claimKeyExceptions, key) {
		return false
	}
	return slices.ContainsFunc(systemDomains, func(d string) bool { return strings.HasSuffix(prefix, "."+d) })
}

// ValidateTemplatePodMetadata checks the metadata of a pod template: valid keys and values, no
// key IsReservedTemplateKey refuses.
func ValidateTemplatePodMetadata(md *agentsv1beta1.PodMetadata, fldPath *field.Path) field.ErrorList {
	return validatePodMetadata(md, fldPath, IsReservedTemplateKey,
		"keys under agents.x-k8s.io/, extensions.agents.x-k8s.io/, sandgate.dev/, kubernetes.io/ and k8s.io/ are reserved")
}

// ValidateClaimPodMetadata checks a claim's additionalPodMetadata: valid keys and values, no
// key IsReservedClaimKey refuses, and no annotation a container runtime reads its options from
// (RuntimeAnnotationPrefixes).
func ValidateClaimPodMetadata(md *agentsv1beta1.PodMetadata, fldPath *field.Path) field.ErrorList {
	errs := validatePodMetadata(md, fldPath, IsReservedClaimKey,
		"keys of the agents.x-k8s.io, sandgate.dev, kubernetes.io and k8s.io domains and their subdomains are reserved")
	for _, k := range sortedKeys(md.Annotations) {
		if isRuntimeAnnotation(k) {
			errs = append(errs, field.Forbidden(fldPath.Child("annotations").Key(k), fmt.Sprintf(
				"annotations under the container runtimes' prefixes (%s) configure how the pod runs; a claim may not set them",
				strings.Join(RuntimeAnnotationPrefixes(), ", "))))
		}
	}
	return errs
}

func validatePodMetadata(md *agentsv1beta1.PodMetadata, fldPath *field.Path, reserved func(string) bool, why string) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(md.Labels, fldPath.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(md.Annotations, fldPath.Child("annotations"))...)
	return append(errs, forbiddenKeys(md.Labels, md.Annotations, fldPath, reserved, why)...)
}

// forbiddenKeys refuses, with why, each key of labels and annotations (at fldPath's labels and
// annotations) that refused says may not be set.
func forbiddenKeys(labels, annotations map[string]string, fldPath *field.Path, refused func(string) bool, why string) field.ErrorList {
	var errs field.ErrorList
	for _, part := range []struct {
		m    map[string]string
		name string
	}{{labels, "labels"}, {annotations, "annotations"}} {
		for _, k := range sortedKeys(part.m) {
			if refused(k) {
				errs = append(errs, field.Forbidden(fldPath.Child(part.name).Key(k), why))
			}
		}
	}
	return errs
}

// PodIdentityLabels are the reserved pod-template labels that do reach the pod: the operator
// writes them into the blueprints it builds (TemplateBlueprint), admission refuses them from
// anyone else, and the template's NetworkPolicy selects on them. They come from the Sandbox's
// spec, which the binding guard keeps, never from its metadata, which is easier to reach.
var PodIdentityLabels = []string{agentsv1beta1.LabelSandboxTemplateRefHash, agentsv1beta1.LabelTemplateUID}

// PodMetadataFromTemplate is what of a pod template's metadata goes onto the pod: every key
// but those IsReservedTemplateKey refuses.
func PodMetadataFromTemplate(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !IsReservedTemplateKey(k) {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
