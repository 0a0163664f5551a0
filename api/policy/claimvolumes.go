package policy

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// MaxClaimSandboxBytes bounds the JSON of the blueprint of a Sandbox built for a claim. The
// claim's env goes into every container it names (or all of them), so a claim well within its
// own limits can make a Sandbox, and a pod, many times its size: the API server stores an
// object of at most about 1.5 MiB (etcd's default request limit), which also holds the
// Sandbox's metadata and status; a larger one is admitted as a claim and then never built.
const MaxClaimSandboxBytes = 1 << 20

// podAnnotationOverhead is what the operator adds to a pod's annotations beyond the keys and
// values of its blueprint and the record of their keys (the record's own key and brackets,
// the warm pool's eviction mark): an upper bound.
const podAnnotationOverhead = 1024

// injectVolumeClaimTemplates adds a claim's volume claim templates to bp, the blueprint of its
// template tmpl. What a claim may add, and why:
//   - nothing under volumeClaimTemplatesPolicy Disallowed (the default);
//   - a new, empty volume only, provisioned as its storage class says: the operator creates the claim's PVCs with its own rights, so a
//     dataSource or dataSourceRef would clone data (another tenant's PVC, a snapshot, any
//     object a populator reads) that the claim's creator may not read, and a volumeName or
//     selector would bind to a PersistentVolume provisioned for someone else, and the
//     annotations of kubernetes.io's subdomains steer provisioning and binding. A template, which
//     the platform writes, may name them;
//   - no replacement of a volume of the template's pod (podTemplate.spec.volumes): the pod
//     mounts a volume claim template in place of a pod volume of the same name (the public API's
//     merge, kept for the Sandboxes and templates the platform writes), which would turn a
//     volume the platform defined (its policy in a ConfigMap, say) into the tenant's PVC while
//     the Sandbox's spec still shows the platform's;
//   - the replacement of one of the template's own volume claim templates only under
//     volumeClaimTemplatesPolicy Overrides;
//   - no more than MaxVolumeClaimTemplates with the template's: the Sandbox could not be built.
func injectVolumeClaimTemplates(tmpl *extv1beta1.SandboxTemplate, vcts []agentsv1beta1.PersistentVolumeClaimTemplate,
	bp *agentsv1beta1.SandboxBlueprint, fldPath *field.Path) field.ErrorList {
	if len(vcts) == 0 {
		return nil
	}
	policy := tmpl.Spec.VolumeClaimTemplatesPolicy
	if policy == "" {
		policy = extv1beta1.VolumeClaimTemplatesDisallowed
	}
	if policy == extv1beta1.VolumeClaimTemplatesDisallowed {
		return field.ErrorList{field.Forbidden(fldPath,
			fmt.Sprintf("template %s does not allow volumeClaimTemplates (volumeClaimTemplatesPolicy %s)", tmpl.Name, policy))}
	}
	podVolumes := sets.New[string]()
	for _, v := range bp.PodTemplate.Spec.Volumes {
		podVolumes.Insert(v.Name)
	}
	// Only the template's own are looked up: a claim's duplicate names are ValidateClaim's.
	own := len(bp.VolumeClaimTemplates)
	var errs field.ErrorList
	for i := range vcts {
		p := fldPath.Index(i)
		vct := vcts[i].DeepCopy()
		at := slices.IndexFunc(bp.VolumeClaimTemplates[:own], func(t agentsv1beta1.PersistentVolumeClaimTemplate) bool { return t.Name == vct.Name })
		switch {
		case at >= 0 && policy == extv1beta1.VolumeClaimTemplatesOverrides:
			bp.VolumeClaimTemplates[at] = *vct
		case at >= 0:
			errs = append(errs, field.Forbidden(p.Child("metadata", "name"), fmt.Sprintf(
				"template %s already has a volume claim template %q; replacing it needs volumeClaimTemplatesPolicy %s",
				tmpl.Name, vct.Name, extv1beta1.VolumeClaimTemplatesOverrides)))
		case podVolumes.Has(vct.Name):
			errs = append(errs, field.Forbidden(p.Child("metadata", "name"), fmt.Sprintf(
				"the pod of template %s has a volume %q (spec.podTemplate.spec.volumes), which a claim's volume would replace; a claim may add volumes, not replace the template's: choose another name",
				tmpl.Name, vct.Name)))
		default:
			bp.VolumeClaimTemplates = append(bp.VolumeClaimTemplates, *vct)
		}
		errs = append(errs, validateClaimVolumeMetadata(&vcts[i].EmbeddedObjectMetadata, p.Child("metadata"))...)
		errs = append(errs, ValidateClaimVolumeSource(&vcts[i].Spec, p.Child("spec"))...)
	}
	if n := len(bp.VolumeClaimTemplates); n > MaxVolumeClaimTemplates && len(vcts) <= MaxVolumeClaimTemplates {
		e := field.TooMany(fldPath, n, MaxVolumeClaimTemplates)
		e.Detail = fmt.Sprintf("with the %d of template %s, the Sandbox would have %d volume claim templates; a Sandbox may have at most %d",
			own, tmpl.Name, n, MaxVolumeClaimTemplates)
		errs = append(errs, e)
	}
	return errs
}

// ValidateClaimVolumeSource refuses what would make a claim's PVC anything but a new, empty
// volume provisioned for it (see injectVolumeClaimTemplates for why).
func ValidateClaimVolumeSource(spec *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	const clone = "the operator creates a claim's PVCs with its own rights, so a claim's volume starts empty: a data source would copy data the claim's creator may not be allowed to read. A template may name one"
	const bind = "a claim's volume is provisioned for it: binding to an existing PersistentVolume would hand it data provisioned for someone else. A template may name one"
	var errs field.ErrorList
	if spec.DataSource != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("dataSource"), clone))
	}
	if spec.DataSourceRef != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("dataSourceRef"), clone))
	}
	if spec.VolumeName != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("volumeName"), bind))
	}
	if spec.Selector != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("selector"), bind))
	}
	return errs
}

// validateClaimVolumeMetadata refuses the keys of a claim's volume claim template that only a
// claim may not set: those under the subdomains of kubernetes.io and k8s.io, which steer how a
// PVC is provisioned and bound (volume.kubernetes.io/selected-node picks the node,
// volume.beta.kubernetes.io/storage-provisioner the provisioner). The keys no volume claim
// template may carry are ValidateVolumeClaimTemplates'.
func validateClaimVolumeMetadata(md *agentsv1beta1.EmbeddedObjectMetadata, fldPath *field.Path) field.ErrorList {
	return forbiddenKeys(md.Labels, md.Annotations, fldPath,
		func(k string) bool { return IsReservedClaimKey(k) && !IsReservedTemplateKey(k) },
		"keys of the kubernetes.io and k8s.io subdomains steer how a volume is provisioned and bound; a claim's volume may not set them")
}

// validateBuildable refuses a claim whose Sandbox (bp, built from template tmpl) could never
// be built, although the claim and the template are each within their own limits: a Sandbox
// object larger than MaxClaimSandboxBytes, or a pod whose annotations exceed the API server's
// total (the template's and the claim's, with the record of their keys the operator keeps on
// the pod). The error is on the claim's field that adds the most.
func validateBuildable(tmpl string, claim *extv1beta1.SandboxClaim, bp *agentsv1beta1.SandboxBlueprint, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n := podAnnotationBytes(&bp.PodTemplate.ObjectMeta); n > apivalidation.TotalAnnotationSizeLimitB {
		errs = append(errs, field.TooLong(spec.Child("additionalPodMetadata", "annotations"), "", apivalidation.TotalAnnotationSizeLimitB))
		errs[len(errs)-1].Detail = fmt.Sprintf(
			"with the pod metadata of template %s, the pod would carry about %d bytes of annotations (keys, values and the operator's record of their keys); a pod may carry at most %d",
			tmpl, n, apivalidation.TotalAnnotationSizeLimitB)
	}
	data, err := json.Marshal(bp)
	if err != nil { // a blueprint of plain values always encodes
		return append(errs, field.InternalError(spec, fmt.Errorf("encoding the Sandbox's blueprint: %w", err)))
	}
	if n := len(data); n > MaxClaimSandboxBytes {
		at := spec.Child("env")
		switch {
		case len(claim.Spec.Env) > 0:
		case len(claim.Spec.VolumeClaimTemplates) > 0:
			at = spec.Child("volumeClaimTemplates")
		default:
			at = spec.Child("additionalPodMetadata")
		}
		e := field.TooLong(at, "", MaxClaimSandboxBytes)
		e.Detail = fmt.Sprintf(
			"with template %s (a claim's env goes into every container it names), the Sandbox's spec would be %d bytes; a claim's Sandbox may have at most %d, or the API server could not store it or its pod",
			tmpl, n, MaxClaimSandboxBytes)
		errs = append(errs, e)
	}
	return errs
}

// podAnnotationBytes is an upper bound of the size of the annotations a pod built from md
// carries, as the API server counts it: the keys and values that reach the pod, their keys
// again (and the label keys) in the operator's record of propagated keys, and
// podAnnotationOverhead.
func podAnnotationBytes(md *agentsv1beta1.PodMetadata) int {
	n := podAnnotationOverhead
	for k, v := range md.Annotations {
		if !IsReservedTemplateKey(k) {
			n += len(k) + len(v) + len(k) + len(`"",`)
		}
	}
	for k := range md.Labels {
		n += len(k) + len(`"",`)
	}
	return n
}
