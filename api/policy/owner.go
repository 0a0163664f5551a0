package policy

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The kinds whose controller reference decides what an object is.
var (
	SandboxKind = agentsv1beta1.GroupVersion.WithKind("Sandbox").GroupKind()
	ClaimKind   = extv1beta1.GroupVersion.WithKind("SandboxClaim").GroupKind()
	PoolKind    = extv1beta1.GroupVersion.WithKind("SandboxWarmPool").GroupKind()
)

// ControllerOf returns obj's controller reference when it names an object of kind gk (of any
// version of gk's group), nil otherwise. A reference of another kind or group is not one, even
// with the right name or UID: anyone may write such references.
func ControllerOf(obj metav1.Object, gk schema.GroupKind) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || !RefersTo(ref, gk) {
		return nil
	}
	return ref
}

// IsControlledBy reports whether obj's controller is the object of kind gk with the given UID.
func IsControlledBy(obj metav1.Object, gk schema.GroupKind, uid types.UID) bool {
	ref := ControllerOf(obj, gk)
	return ref != nil && uid != "" && ref.UID == uid
}

// RefersTo reports whether an owner reference names an object of kind gk, of any version of
// gk's group.
func RefersTo(ref *metav1.OwnerReference, gk schema.GroupKind) bool {
	if ref.Kind != gk.Kind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gk.Group
}
