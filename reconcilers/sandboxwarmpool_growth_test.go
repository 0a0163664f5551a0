package reconcilers

import (
	"fmt"
	"testing"
	"time"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// A raise of replicas while claims keep coming (an autoscaler scaling up at a burst's first
// claims) creates the members it adds at once; the members claims take are still deferred.
func TestRaisedReplicasAreNotDeferred(t *testing.T) {
	r, pool := steadyRefill(10 * time.Second)
	var members []*agentsv1beta1.Sandbox
	for i := range 8 {
		members = append(members, poolMember(fmt.Sprintf("m%d", i), "h1", true, "1"))
	}
	var created []string
	replicas, active := 10, 8 // two members taken by claims: a refill, deferred
	for step := time.Duration(0); step <= 3*time.Second; step += 500 * time.Millisecond {
		now := planNow.Add(step)
		r.activity.touch(pool, now.Add(-10*time.Millisecond)) // claims all along
		if step == time.Second {
			replicas = 15 // raised by 5 amid the claims
		}
		n, deferred, _ := r.paceCreates(pool, poolPlan{create: replicas - active, active: active}, members, replicas, now, statusPlaced)
		if n > 0 {
			created = append(created, fmt.Sprintf("%s:%d", step, n))
			active += n
		}
		if step == 2*time.Second && deferred == 0 {
			t.Errorf("at %s the refill of the members claims took is not deferred", step)
		}
	}
	// Nothing at first (the two taken members wait for the pause), the raise's five at once,
	// then nothing again: the two remain deferred.
	if want := []string{"1s:5"}; fmt.Sprint(created) != fmt.Sprint(want) {
		t.Errorf("creates %v, want %v", created, want)
	}
}

// A cut takes a raise back, and members that came back owe nothing.
func TestGrowthFollowsRaisesCutsAndWhatIsMissing(t *testing.T) {
	p := newRefillPacing()
	_, pool := steadyRefill(time.Second)
	for _, step := range []struct {
		replicas, missing, want int
	}{
		{replicas: 10, missing: 2, want: 0}, // first look: nothing owed
		{replicas: 16, missing: 8, want: 6}, // raised by 6
		{replicas: 13, missing: 5, want: 3}, // cut by 3
		{replicas: 13, missing: 1, want: 1}, // only one member missing now
		{replicas: 13, missing: 0, want: 0},
		{replicas: 20, missing: 7, want: 7},
	} {
		if got := p.grown(pool, step.replicas, step.missing); got != step.want {
			t.Errorf("grown(replicas %d, missing %d) = %d, want %d", step.replicas, step.missing, got, step.want)
		}
	}
	p.grew(pool, 4)
	if got := p.grown(pool, 20, 7); got != 3 {
		t.Errorf("after 4 creates of a growth of 7: %d owed, want 3", got)
	}
}
