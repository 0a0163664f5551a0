package reconcilers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// TestBindWarm drives the binding protocol against an API server that answers each bind
// patch as the test says: losses (409, 403, 404) move on to the next member, other errors
// end the attempt and leave the member available.
func TestBindWarm(t *testing.T) {
	gr := schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}
	conflict := apierrors.NewConflict(gr, "m", errors.New("changed"))
	denied := apierrors.NewForbidden(gr, "m", errors.New("binding guard"))
	gone := apierrors.NewNotFound(gr, "m")
	unavailable := apierrors.NewServiceUnavailable("try later")
	tests := map[string]struct {
		// answers are the API server's answers to the bind patches, in order; nil binds.
		answers       []error
		wantBound     bool
		wantErr       bool
		wantPatches   int
		wantLost      float64
		wantAvailable int
	}{
		"the first member binds": {
			answers: []error{nil}, wantBound: true, wantPatches: 1, wantAvailable: 2,
		},
		"409 and 403 move on to the next member": {
			answers: []error{conflict, denied, nil}, wantBound: true, wantPatches: 3, wantLost: 2, wantAvailable: 0,
		},
		"every member lost: nothing bound, no error": {
			answers: []error{conflict, gone, denied}, wantPatches: 3, wantLost: 3, wantAvailable: 0,
		},
		"a server error ends the attempt and leaves the member available": {
			answers: []error{unavailable}, wantErr: true, wantPatches: 1, wantAvailable: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var patches []map[string]any
			var patched []string
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
					data, err := patch.Data(obj)
					if err != nil {
						return err
					}
					var body map[string]any
					if err := json.Unmarshal(data, &body); err != nil {
						return err
					}
					patches = append(patches, body)
					patched = append(patched, obj.GetName())
					answer := tc.answers[len(patches)-1]
					if answer == nil {
						obj.SetResourceVersion("bound")
					}
					return answer
				},
			}).Build()
			metrics, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			index := NewWarmIndex()
			for _, name := range []string{"m1", "m2", "m3"} {
				index.Observe(poolMember(name, "h1", true, "1"))
			}
			r := &ClaimReconciler{Client: metrics.WrapClient(c), Metrics: metrics, Index: index}
			step := &claimStep{claim: claim(), mem: &claimMemory{}}

			sb, err := r.bindWarm(context.Background(), step, keyH1, "tmpl")

			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want error = %v", err, tc.wantErr)
			}
			if (sb != nil) != tc.wantBound {
				t.Errorf("bound = %v, want %v", sb, tc.wantBound)
			}
			if len(patches) != tc.wantPatches {
				t.Errorf("bind patches = %d, want %d", len(patches), tc.wantPatches)
			}
			seen := map[string]bool{}
			for i, p := range patches {
				md := p["metadata"].(map[string]any)
				if md["resourceVersion"] != "1" {
					t.Errorf("bind patch without the member's resourceVersion as precondition: %v", md)
				}
				if seen[patched[i]] {
					t.Errorf("member %s tried twice: %v", patched[i], patched)
				}
				seen[patched[i]] = true
			}
			if got := metrics.BindConflicts(); got != tc.wantLost {
				t.Errorf("lost binds = %v, want %v", got, tc.wantLost)
			}
			if available, _ := index.Counts(keyH1); available != tc.wantAvailable {
				t.Errorf("available after = %d, want %d", available, tc.wantAvailable)
			}
			wantHits := 0.0
			if tc.wantBound {
				wantHits = 1
				if diff := cmp.Diff([]string{sb.Name, agentsv1beta1.LaunchTypeWarm}, []string{step.mem.bound, step.mem.launchType}); diff != "" {
					t.Errorf("claim memory (-want +got):\n%s", diff)
				}
				if len(step.events) != 1 {
					t.Errorf("events queued = %d, want 1 (SandboxAdopted, sent after the status write)", len(step.events))
				}
			}
			if got := metrics.WarmHits(); got != wantHits {
				t.Errorf("warm hits = %v, want %v", got, wantHits)
			}
		})
	}
}
