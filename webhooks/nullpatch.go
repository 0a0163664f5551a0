package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// conversionWithoutNulls removes the nulls from the objects a conversion answer carries, for
// the reason omitNulls drops them from patches: a converted object is the Go object encoded
// again, so a v1alpha1 client's volume claim template without dataSource.apiGroup came back
// with "apiGroup": null and was refused. No field of the four kinds' schemas is nullable, so
// a null in a converted object is never a value to keep.
type conversionWithoutNulls struct {
	next http.Handler
}

func (h conversionWithoutNulls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &bufferedResponse{header: w.Header(), status: http.StatusOK}
	h.next.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.status == http.StatusOK {
		if cleaned, err := convertedWithoutNulls(body); err == nil {
			body = cleaned
		}
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(body) // the API server sees a short answer as an error
}

// convertedWithoutNulls is a ConversionReview's JSON with the nulls of its converted objects
// removed.
func convertedWithoutNulls(body []byte) ([]byte, error) {
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, err
	}
	if review.Response == nil {
		return body, nil
	}
	for i, obj := range review.Response.ConvertedObjects {
		var v any
		if err := json.Unmarshal(obj.Raw, &v); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(withoutNulls(v))
		if err != nil {
			return nil, err
		}
		review.Response.ConvertedObjects[i] = runtime.RawExtension{Raw: raw}
	}
	return json.Marshal(&review)
}

// bufferedResponse keeps what a handler writes, to be changed before it is sent.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
