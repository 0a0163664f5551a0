package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The patch helpers below are the only way the controllers write existing objects, and they
// all write one kind of patch: a JSON merge patch (mergePatch) whose body holds just the
// fields the controller owns, so concurrent writers of other fields never conflict with it.
// patchStatus computes that body from the old and new status; metadataPatch builds it for
// labels and annotations; other writes spell it out as a map. A resourceVersion precondition
// is added only where the write decides ownership (adoption, binding), where losing a race
// must fail rather than win.

// patchStatus writes the status of obj when it differs from old's, as a JSON merge patch of
// the status subresource. It reports whether it wrote.
//
// The patch is the merge-patch difference of the two statuses: changed fields are set, and
// fields old had but obj has not are set to null (a merge patch leaves absent keys alone, so
// a status that shrinks — an expired Sandbox losing its podIPs — needs the nulls). Lists are
// replaced whole, as merge patches do, so no stale condition survives either.
func patchStatus[T client.Object](ctx context.Context, c client.Client, old, obj T, status func(T) any) (bool, error) {
	if equality.Semantic.DeepEqual(status(old), status(obj)) {
		return false, nil
	}
	before, err := json.Marshal(map[string]any{"status": status(old)})
	if err != nil {
		return false, fmt.Errorf("encoding status patch: %w", err)
	}
	after, err := json.Marshal(map[string]any{"status": status(obj)})
	if err != nil {
		return false, fmt.Errorf("encoding status patch: %w", err)
	}
	data, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return false, fmt.Errorf("computing status patch: %w", err)
	}
	if string(data) == "{}" { // semantically different, identical on the wire
		return false, nil
	}
	if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		return false, err
	}
	return true, nil
}

// metadataPatch builds a JSON merge patch of labels and annotations: a nil value removes
// the key.
type metadataPatch struct {
	Labels      map[string]*string `json:"labels,omitempty"`
	Annotations map[string]*string `json:"annotations,omitempty"`
	// OwnerReferences, when set, replaces the list (merge patches replace lists).
	OwnerReferences any `json:"ownerReferences,omitempty"`
	// ResourceVersion, when set, makes the patch fail with 409 if the object changed.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func (p *metadataPatch) setLabel(key string, value *string) {
	if p.Labels == nil {
		p.Labels = map[string]*string{}
	}
	p.Labels[key] = value
}

func (p *metadataPatch) setAnnotation(key string, value *string) {
	if p.Annotations == nil {
		p.Annotations = map[string]*string{}
	}
	p.Annotations[key] = value
}

func (p *metadataPatch) empty() bool {
	return len(p.Labels) == 0 && len(p.Annotations) == 0 && p.OwnerReferences == nil
}

// patchMetadata sends p as a merge patch of obj's metadata, unless it is empty.
func patchMetadata(ctx context.Context, c client.Client, obj client.Object, p *metadataPatch) error {
	if p.empty() {
		return nil
	}
	return mergePatch(ctx, c, obj, map[string]any{"metadata": p})
}

// mergePatch sends body as a JSON merge patch of obj.
func mergePatch(ctx context.Context, c client.Client, obj client.Object, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
}
