package reconcilers

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// TestOwnStatusNewer: the last written status is used while the cached copy's
// resourceVersion is older than the write's, and forgotten once the cache shows the write or
// anything after it (another writer, or an object recreated under the same name).
func TestOwnStatusNewer(t *testing.T) {
	pool := func(rv string) *extv1beta1.SandboxWarmPool {
		p := builders.MakePool("pool", "ns", "tmpl").Obj()
		p.ResourceVersion = rv
		return p
	}
	tests := map[string]struct {
		cached   string
		wantUsed bool
	}{
		"cache behind":                    {cached: "99", wantUsed: true},
		"cache behind, fewer digits":      {cached: "9", wantUsed: true},
		"cache shows the write":           {cached: "100", wantUsed: false},
		"cache shows a later write":       {cached: "1000", wantUsed: false},
		"not a server's resourceVersion":  {cached: "x1", wantUsed: false},
		"no resourceVersion in the cache": {cached: "", wantUsed: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o ownStatuses[extv1beta1.SandboxWarmPoolStatus]
			o.record(pool("100"), &extv1beta1.SandboxWarmPoolStatus{Replicas: 3})
			got := o.newer(pool(tc.cached))
			if (got != nil) != tc.wantUsed {
				t.Fatalf("newer = %v, want the written status used: %v", got, tc.wantUsed)
			}
			if got != nil && got.Replicas != 3 {
				t.Errorf("newer = %+v, want the written status", got)
			}
			if kept := len(o.m) == 1; kept != tc.wantUsed {
				t.Errorf("write kept: %v, want %v", kept, tc.wantUsed)
			}
			o.forget(client.ObjectKeyFromObject(pool("")))
			if len(o.m) != 0 {
				t.Errorf("forget kept the write")
			}
		})
	}
}
