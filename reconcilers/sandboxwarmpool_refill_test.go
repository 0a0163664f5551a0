package reconcilers

import (
	"fmt"
	"testing"
	"time"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func TestRefillDelay(t *testing.T) {
	policy := RefillPolicy{QuietPeriod: time.Second, LowWaterPercent: 25}
	members := func(ready, notReady int) []*agentsv1beta1.Sandbox {
		var out []*agentsv1beta1.Sandbox
		for i := range ready + notReady {
			out = append(out, poolMember(fmt.Sprintf("m%d", i), "h1", i < ready, "1"))
		}
		return out
	}
	for name, tc := range map[string]struct {
		policy    RefillPolicy
		claimedAt time.Duration // before planNow; negative: never
		members   []*agentsv1beta1.Sandbox
		want      time.Duration
	}{
		"no claim yet: refill now":                   {policy: policy, claimedAt: -1, members: members(2, 0)},
		"claims arriving: wait out the quiet period": {policy: policy, claimedAt: 300 * time.Millisecond, members: members(5, 0), want: 700 * time.Millisecond},
		"claims paused: refill now":                  {policy: policy, claimedAt: 2 * time.Second, members: members(5, 0)},
		"below the low-water mark: refill now":       {policy: policy, claimedAt: 0, members: members(2, 3)},
		"at the low-water mark: wait":                {policy: policy, claimedAt: 0, members: members(3, 0), want: time.Second},
		"deferral off: refill now":                   {claimedAt: 0, members: members(10, 0)},
		"no replicas: a mark of 0 is never undercut": {policy: policy, claimedAt: 0, members: nil, want: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			replicas := 10
			if tc.members == nil {
				replicas = 0
			}
			got := refillDelay(tc.policy, planNow.Add(-tc.claimedAt), tc.claimedAt >= 0, planNow, tc.members, replicas)
			if got != tc.want {
				t.Errorf("refillDelay = %s, want %s", got, tc.want)
			}
		})
	}
}
