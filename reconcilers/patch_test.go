package reconcilers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sandgate-dev/sandgate/api"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func TestPatchStatusSendsTheDifference(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "DependenciesReady", LastTransitionTime: metav1.Unix(1, 0)}
	expired := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SandboxExpired", LastTransitionTime: metav1.Unix(2, 0)}
	cases := map[string]struct {
		old, cur  agentsv1beta1.SandboxStatus
		wantPatch string // "" when nothing is to be written
	}{
		"unchanged": {
			old: agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.1"}, Conditions: []metav1.Condition{ready}},
			cur: agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.1"}, Conditions: []metav1.Condition{ready}},
		},
		"fields that go are nulled": {
			old:       agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.1"}, NodeName: "n", Service: "s", Conditions: []metav1.Condition{ready}},
			cur:       agentsv1beta1.SandboxStatus{Conditions: []metav1.Condition{expired}},
			wantPatch: `{"status":{"conditions":[{"lastTransitionTime":"1970-01-01T00:00:02Z","message":"","reason":"SandboxExpired","status":"False","type":"Ready"}],"nodeName":null,"podIPs":null,"service":null}}`,
		},
		"only what changed is sent": {
			old:       agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.1"}, NodeName: "n"},
			cur:       agentsv1beta1.SandboxStatus{PodIPs: []string{"10.0.0.1"}, NodeName: "m"},
			wantPatch: `{"status":{"nodeName":"m"}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got string
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
					data, err := patch.Data(obj)
					got = string(data)
					return err
				},
			}).Build()
			old := builders.MakeSandbox("sb", "ns").Obj()
			old.Status = tc.old
			cur := old.DeepCopy()
			cur.Status = tc.cur
			wrote, err := patchStatus(context.Background(), c, old, cur, func(s *agentsv1beta1.Sandbox) any { return s.Status })
			if err != nil {
				t.Fatal(err)
			}
			if wrote != (tc.wantPatch != "") {
				t.Errorf("wrote = %v, want %v", wrote, tc.wantPatch != "")
			}
			if diff := cmp.Diff(tc.wantPatch, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}
