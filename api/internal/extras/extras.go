// Package extras keeps, in one annotation of a converted object, the values of the fields its
// source version has and its target version lacks, so that converting back gives the source
// object again. The deprecated v1alpha1 packages use it for their conversions to and from
// v1beta1; see api/v1alpha1 for which fields and why.
//
// An annotation is only ever read back by the conversion that wrote its kind of annotation:
// every value in it comes with a check (the restored object must mean what the converted one
// means, or a fingerprint of the status it was saved against must still match), so an
// annotation that went stale, or that someone wrote by hand, is ignored rather than trusted.
package extras

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation keys. The domain is sandgate's own: nothing else writes these keys, and they are
// not under agents.x-k8s.io, whose keys are the contract of the public API.
const (
	// V1alpha1Key, on a v1beta1 object (so in storage), holds the v1alpha1 values v1beta1 has
	// no field for, as JSON. ConvertFrom restores them and removes the key.
	V1alpha1Key = "conversion.sandgate.dev/v1alpha1-fields"
	// V1beta1Key, on a v1alpha1 object (what v1alpha1 clients read), holds the v1beta1 values
	// v1alpha1 has no field for, as JSON. ConvertTo restores them and removes the key.
	V1beta1Key = "conversion.sandgate.dev/v1beta1-fields"
)

// Put stores v, JSON-encoded, under key in *annotations, creating the map if needed. Values
// are plain API data whose encoding cannot fail; a failure is a programming error and panics.
func Put(annotations *map[string]string, key string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding conversion fields for %s cannot fail, but did: %v", key, err))
	}
	if *annotations == nil {
		*annotations = map[string]string{}
	}
	(*annotations)[key] = string(raw)
}

// Take removes key from *annotations (leaving nil when it was the only key) and decodes its
// value into v. It reports whether the key was there and decoded; a value that does not
// decode is dropped as if it had never been written.
func Take(annotations *map[string]string, key string, v any) bool {
	raw, ok := (*annotations)[key]
	if !ok {
		return false
	}
	delete(*annotations, key)
	if len(*annotations) == 0 {
		*annotations = nil
	}
	return json.Unmarshal([]byte(raw), v) == nil
}

// Drop removes key from *annotations, leaving nil when it was the only key.
func Drop(annotations *map[string]string, key string) {
	if _, ok := (*annotations)[key]; !ok {
		return
	}
	delete(*annotations, key)
	if len(*annotations) == 0 {
		*annotations = nil
	}
}

// Fingerprint identifies a status: saved status values are restored only onto the status
// they were saved with, never onto one a controller has rewritten since.
func Fingerprint(status any) string {
	raw, err := json.Marshal(status)
	if err != nil {
		panic(fmt.Sprintf("encoding a status cannot fail, but did: %v", err))
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// Conditions is a deep copy of a condition list, nil for nil.
func Conditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// Ptr is a copy of what in points to, nil for nil.
func Ptr[T any](in *T) *T {
	if in == nil {
		return nil
	}
	v := *in
	return &v
}
