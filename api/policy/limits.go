package policy

import (
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The list limits. A fail-closed webhook and the controllers walk these lists on every
// admission and reconcile: without a bound, one object of megabytes costs every claim after
// it. The CRDs say the same in maxItems (the markers on the types must match these numbers),
// so the API server refuses an oversized list before any webhook is called; admission says it
// again with the field path for objects the CRD has not bounded (an older CRD).
const (
	// MaxClaimEnv bounds a claim's spec.env.
	MaxClaimEnv = extv1beta1.MaxClaimEnv
	// MaxVolumeClaimTemplates bounds the volumeClaimTemplates of a blueprint (Sandbox,
	// template) and of a claim.
	MaxVolumeClaimTemplates = agentsv1beta1.MaxVolumeClaimTemplates
)

// DefaultRuntimeAnnotationPrefixes are the annotation prefixes container runtimes read pod
// options from (CRI-O, Kata Containers, gVisor, containerd): a claim that sets one changes how
// the platform's pod runs, not what it is, so claims may not.
var DefaultRuntimeAnnotationPrefixes = []string{"io.kubernetes.cri-o.", "io.katacontainers.", "dev.gvisor.", "io.containerd."}

var runtimeAnnotationPrefixes atomic.Pointer[[]string]

// SetRuntimeAnnotationPrefixes replaces the annotation prefixes claims may not set (the
// operator's --claim-refused-annotation-prefixes); nil restores the defaults.
func SetRuntimeAnnotationPrefixes(prefixes []string) {
	if prefixes == nil {
		runtimeAnnotationPrefixes.Store(nil)
		return
	}
	p := append([]string(nil), prefixes...)
	runtimeAnnotationPrefixes.Store(&p)
}

// RuntimeAnnotationPrefixes are the annotation prefixes claims may not set now.
func RuntimeAnnotationPrefixes() []string {
	if p := runtimeAnnotationPrefixes.Load(); p != nil {
		return *p
	}
	return DefaultRuntimeAnnotationPrefixes
}

// isRuntimeAnnotation reports whether an annotation key configures the container runtime.
func isRuntimeAnnotation(key string) bool {
	for _, prefix := range RuntimeAnnotationPrefixes() {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// ValidateVolumeClaimTemplates checks a list of volume claim templates (of a Sandbox, a
// template or a claim): at most MaxVolumeClaimTemplates, each with a unique DNS-1123 label name
// (the PVC is named <name>-<sandbox> and the pod mounts it by that name), and metadata with no
// key the operator reserves: its PVCs carry the operator's identity labels, which a template
// must not be able to forge (an adoptable label would let a Sandbox take over a PVC someone
// else provisioned).
func ValidateVolumeClaimTemplates(vcts []agentsv1beta1.PersistentVolumeClaimTemplate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(vcts) > MaxVolumeClaimTemplates {
		errs = append(errs, field.TooMany(fldPath, len(vcts), MaxVolumeClaimTemplates))
	}
	seen := sets.New[string]()
	for i := range vcts {
		p := fldPath.Index(i).Child("metadata")
		name := vcts[i].Name
		switch {
		case name == "":
			errs = append(errs, field.Required(p.Child("name"), "the PVC is named <name>-<sandbox>"))
		case seen.Has(name):
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		default:
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
		}
		seen.Insert(name)
		md := agentsv1beta1.PodMetadata{Labels: vcts[i].Labels, Annotations: vcts[i].Annotations}
		errs = append(errs, validatePodMetadata(&md, p, IsReservedTemplateKey,
			"keys under agents.x-k8s.io/, extensions.agents.x-k8s.io/, sandgate.dev/, kubernetes.io/ and k8s.io/ are reserved")...)
	}
	return errs
}

// ValidateClaimLists checks the lengths of a claim's lists against the limits.
func ValidateClaimLists(claim *extv1beta1.SandboxClaim) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if n := len(claim.Spec.Env); n > MaxClaimEnv {
		errs = append(errs, field.TooMany(spec.Child("env"), n, MaxClaimEnv))
	}
	return errs
}

// PVCMetadataFromTemplate is what of a volume claim template's metadata goes onto its PVC:
// every key but the reserved ones, for templates admitted before the rule existed.
func PVCMetadataFromTemplate(m map[string]string) map[string]string {
	return PodMetadataFromTemplate(m)
}
