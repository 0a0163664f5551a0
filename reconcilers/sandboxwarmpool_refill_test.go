package reconcilers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

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

// The replenish hold (--sandbox-warm-pool-replenish-delay): never on the first look nor for a
// full pool, re-armed by every drop of the member count, the pool's own creates counted in it.
func TestReplenishHold(t *testing.T) {
	p := newRefillPacing()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	const delay = 10 * time.Second
	steps := []struct {
		at             time.Duration
		active, create int
		want           time.Duration
	}{
		{at: 0, active: 5, want: 0},               // first look: no baseline
		{at: time.Second, active: 3, want: delay}, // two left: hold
		{at: 4 * time.Second, active: 3, want: 7 * time.Second},
		{at: 5 * time.Second, active: 2, want: delay}, // another left: re-armed
		{at: 15 * time.Second, active: 2, create: 3, want: 0},
		{at: 16 * time.Second, active: 4, want: delay}, // its 3 creates counted: 4 is one left
		{at: 17 * time.Second, active: 5, want: 0},     // full
	}
	for i, s := range steps {
		if got := p.replenishHold(pool, delay, s.active, 5, planNow.Add(s.at)); got != s.want {
			t.Errorf("step %d: hold = %s, want %s", i, got, s.want)
		}
		p.created(pool, s.create)
	}
	if got := p.replenishHold(pool, 0, 0, 5, planNow); got != 0 {
		t.Errorf("without a delay the hold is %s, want 0", got)
	}
}

// The refill rate (--sandbox-warm-pool-max-refill-rate): a token bucket of one second of
// creates, full at first.
func TestRefillRate(t *testing.T) {
	p := newRefillPacing()
	pool := types.NamespacedName{Namespace: "ns", Name: "p"}
	steps := []struct {
		at          time.Duration
		want        int
		wantGranted int
		wantWait    time.Duration
	}{
		{at: 0, want: 10, wantGranted: 2},                                   // a full bucket: 2
		{at: 0, want: 10, wantGranted: 0, wantWait: 500 * time.Millisecond}, // empty: the next token
		{at: 250 * time.Millisecond, want: 10, wantGranted: 0, wantWait: 250 * time.Millisecond},
		{at: 1500 * time.Millisecond, want: 1, wantGranted: 1},
		{at: 10 * time.Second, want: 10, wantGranted: 2}, // capped at one second's worth
	}
	for i, s := range steps {
		granted, wait := p.take(pool, 2, s.want, planNow.Add(s.at))
		if granted != s.wantGranted || wait != s.wantWait {
			t.Errorf("step %d: take = %d, %s; want %d, %s", i, granted, wait, s.wantGranted, s.wantWait)
		}
	}
	if granted, _ := p.take(pool, 0, 300, planNow); granted != 300 {
		t.Errorf("unpaced take granted %d, want 300", granted)
	}
}
