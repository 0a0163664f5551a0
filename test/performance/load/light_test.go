package load

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// A light member carries only what the CRD requires and what the floor's bind patch and
// status patch work on; once its status is written it is a member the floor may bind.
func TestLightMemberIsTheLeastABindableMemberNeeds(t *testing.T) {
	pool := builders.MakePool("bench-pool", "bench", "bench-template").Obj()
	pool.UID = "pool-uid"
	sb := lightMember(pool, 7)

	if diff := cmp.Diff(map[string]string{agentsv1beta1.LabelWarmPoolSandbox: agentsv1beta1.NameHash("bench-pool")}, sb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if len(sb.Annotations) != 0 {
		t.Errorf("annotations %v, want none", sb.Annotations)
	}
	spec, err := json.Marshal(sb.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"podTemplate":{"spec":{"containers":[{"name":"agent","resources":{}}]},"metadata":{}}}`, string(spec)); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}

	var status struct {
		Status agentsv1beta1.SandboxStatus `json:"status"`
	}
	data, err := json.Marshal(lightStatusPatch(7, time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)))
	if err == nil {
		err = json.Unmarshal(data, &status)
	}
	if err != nil {
		t.Fatal(err)
	}
	sb.Status = status.Status
	if !isReadyMember(sb) {
		t.Errorf("light member with its status is not a ready member the floor binds: %+v", sb)
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.UID != "pool-uid" || ref.Kind != kindSandboxWarmPool {
		t.Errorf("controller %+v, want the pool", ref)
	}
	if diff := cmp.Diff([]string{"10.245.0.8"}, sb.Status.PodIPs); diff != "" {
		t.Errorf("podIPs (-want +got):\n%s", diff)
	}
}

func TestLightMembersHaveAddressesOfTheirOwn(t *testing.T) {
	seen := map[string]int{}
	now := time.Now()
	for i := range 2000 {
		ip := lightStatusPatch(i, now)["status"].(agentsv1beta1.SandboxStatus).PodIPs[0]
		if j, ok := seen[ip]; ok {
			t.Fatalf("members %d and %d share address %s", j, i, ip)
		}
		seen[ip] = i
	}
}
