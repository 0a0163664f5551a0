package load

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The autoscaler arm writes only the scale-down rules the run sets: an unset one keeps the
// kind's default, and a step of members is a number, as the schema's int-or-string has it.
func TestAutoscalerSpecScaleDown(t *testing.T) {
	for name, tc := range map[string]struct {
		spec AutoscalerSpec
		want map[string]any
	}{
		"defaults": {spec: AutoscalerSpec{}, want: nil},
		"a window": {spec: AutoscalerSpec{ScaleDownWindow: 30 * time.Second},
			want: map[string]any{"stabilizationWindowSeconds": int64(30)}},
		"a percentage every period": {spec: AutoscalerSpec{ScaleDownMaxStep: "100%", ScaleDownPeriod: 15 * time.Second},
			want: map[string]any{"maxStep": "100%", "periodSeconds": int64(15)}},
		"members": {spec: AutoscalerSpec{ScaleDownMaxStep: "10"}, want: map[string]any{"maxStep": int64(10)}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.spec.scaleDown()); diff != "" {
				t.Errorf("scaleDown (-want +got):\n%s", diff)
			}
		})
	}
}
