package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// invalid wraps a non-empty error list as a 422 Invalid; nil for an empty one.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// decodeErrors turns the bare 400 of an object that does not decode into its Go type (a value
// out of range for its field, such as replicas 2^31 or a ttl of 2^63-1, which the schema's
// integer type lets through) into the 422 Invalid a user expects, with the field path.
// Mutating webhooks run before the API server checks the schema, so they are the first to
// see such values.
type decodeErrors struct {
	next admission.Handler
	gk   schema.GroupKind
	// proto is an empty object of the kind, copied for each diagnosis.
	proto runtime.Object
}

func (h decodeErrors) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := h.next.Handle(ctx, req)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || len(req.Object.Raw) == 0 {
		return resp
	}
	errs := DecodeErrors(req.Object.Raw, h.proto.DeepCopyObject())
	if len(errs) == 0 {
		return resp
	}
	status := apierrors.NewInvalid(h.gk, req.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

// DecodeErrors says which fields of raw do not fit their Go types (nil when raw decodes, or
// fails for another reason): the type errors of encoding/json, which name the field's path.
func DecodeErrors(raw []byte, into any) field.ErrorList {
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(raw, into); !errors.As(err, &typeErr) || typeErr.Field == "" {
		return nil
	}
	parts := strings.Split(typeErr.Field, ".")
	value := strings.TrimPrefix(typeErr.Value, "number ")
	return field.ErrorList{field.Invalid(field.NewPath(parts[0], parts[1:]...), value,
		fmt.Sprintf("does not fit the field's type %s", typeErr.Type))}
}
