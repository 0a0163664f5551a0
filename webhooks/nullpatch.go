package webhooks

import (
	"context"

	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// omitNulls keeps a defaulting webhook's patch from writing null for a field the request
// omitted. A defaulter's patch is the difference between the request's JSON and the defaulted
// Go object encoded again, and a few optional pointer fields of the core API are encoded
// without omitempty: the apiGroup of a PersistentVolumeClaim's dataSource and dataSourceRef,
// for one. The patch then adds "apiGroup": null to every volume claim template that leaves it
// out (a PVC of the core group, as the API documents), and the API server refuses the object:
// the CRD schema says string. No defaulter sets a field to null, so nothing one means to write
// is dropped: an added null, and every null inside an added value, is a field the request did
// not have.
type omitNulls struct {
	next admission.Handler
}

func (h omitNulls) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.next.Handle(ctx, req)
	if len(resp.Patches) == 0 {
		return resp
	}
	kept := make([]jsonpatch.JsonPatchOperation, 0, len(resp.Patches))
	for _, op := range resp.Patches {
		if op.Operation == "add" {
			if op.Value == nil {
				continue
			}
			op.Value = withoutNulls(op.Value)
		}
		kept = append(kept, op)
	}
	resp.Patches = kept
	if len(kept) == 0 {
		resp.PatchType = nil
	}
	return resp
}

// withoutNulls is v (a decoded JSON value) without the object members whose value is null, at
// any depth.
func withoutNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = withoutNulls(e)
		}
	case []any:
		for i, e := range t {
			t[i] = withoutNulls(e)
		}
	}
	return v
}
