package reconcilers

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRequeueWithin(t *testing.T) {
	const s = time.Second
	tests := map[string]struct {
		have, d, want time.Duration
	}{
		"none yet":          {have: 0, d: s, want: s},
		"sooner wins":       {have: 3 * s, d: s, want: s},
		"later is ignored":  {have: s, d: 3 * s, want: s},
		"zero asks nothing": {have: 2 * s, d: 0, want: 2 * s},
		"nothing and none":  {have: 0, d: 0, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := requeueWithin(ctrl.Result{RequeueAfter: tc.have}, tc.d).RequeueAfter; got != tc.want {
				t.Errorf("RequeueAfter = %v, want %v", got, tc.want)
			}
		})
	}
}
