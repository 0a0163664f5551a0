// Package roundtrip fuzzes conversions between API versions: objects filled at random by
// apimachinery's fuzzer must come back from a round trip through the other version equal to
// what went in (apimachinery's semantic equality: quantities by value, times by instant, nil
// and empty collections alike, as the JSON encoding has them).
//
// It imports testing: only _test.go files use it.
package roundtrip

import (
	"math/rand"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// Iterations is how many random objects each direction of each kind is tried with;
// SANDGATE_ROUNDTRIP_ITERATIONS overrides it (a long soak: 100000).
func Iterations() int {
	if n, err := strconv.Atoi(os.Getenv("SANDGATE_ROUNDTRIP_ITERATIONS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// Fuzzer returns apimachinery's fuzzer with the ObjectMeta, Quantity and IntOrString
// functions real objects need, and the kind's own funcs (func(*T, randfill.Continue)),
// seeded by seed.
func Fuzzer(seed int64, funcs ...any) *randfill.Filler {
	all := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []any {
		return append([]any{
			func(v *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*v = intstr.FromInt32(c.Int31())
				} else {
					*v = intstr.FromString(c.String(0))
				}
			},
		}, funcs...)
	})
	return fuzzer.FuzzerFor(all, rand.NewSource(seed), serializer.NewCodecFactory(runtime.NewScheme()))
}

// OneOf returns one of the interesting values or, as often as any one of them, a random string:
// random strings alone would never hit the values a conversion treats specially.
func OneOf[T ~string](c randfill.Continue, interesting ...T) T {
	if i := c.Intn(len(interesting) + 1); i < len(interesting) {
		return interesting[i]
	}
	return T(c.String(0))
}

// Test checks Iterations() random objects of one kind: for each, fill a fresh object made
// by newObj (with funcs as in Fuzzer), convert it with there and back into fresh objects, and
// compare. Each kind and direction gets its own seed, printed on failure, so a failure
// reproduces.
func Test[A, B any](t *testing.T, seed int64, newObj func() A, there func(A) (B, error), back func(B) (A, error), funcs ...any) {
	t.Helper()
	f := Fuzzer(seed, funcs...)
	for i := range Iterations() {
		in := newObj()
		f.Fill(in)
		mid, err := there(in)
		if err != nil {
			t.Fatalf("seed %d, object %d: converting: %v", seed, i, err)
		}
		out, err := back(mid)
		if err != nil {
			t.Fatalf("seed %d, object %d: converting back: %v", seed, i, err)
		}
		if !equality.Semantic.DeepEqual(in, out) {
			t.Fatalf("seed %d, object %d: the round trip changed the object (-in +out):\n%s", seed, i,
				cmp.Diff(in, out, cmp.Exporter(func(reflect.Type) bool { return true })))
		}
	}
}
