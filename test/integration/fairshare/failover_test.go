//go:build integration

package fairshare_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// The leader goes mid-burst (a rolling update, a drained node): two tenants keep creating and
// deleting claims against two replicas while replica 0, the leader, stops and replica 1 takes
// the Lease and the counting over. The limits are never passed, and once the burst is over the
// status shows the claims that exist and no reservation: a reservation made for a create that
// failed as its replica stopped ends at its TTL (here 5s).
func TestUsageIsExactWhenTheLeaderStopsMidBurst(t *testing.T) {
	e := setup(t)
	r := e.startReplicas(func(o *operator.Options) { o.ClaimReservationTTL = 5 * time.Second })
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).MaxClaims(15).
		Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(10)).
		Tenant(builders.MakeTenant("team-b").User("bob").MaxClaims(10)).Obj())
	tenants := map[string]client.Client{"alice": e.tenant("alice"), "bob": e.tenant("bob")}

	// Every moment's claims, as often as a List can tell.
	var worst atomic.Value
	worst.Store(map[string]int{})
	stopWatching := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatching:
				return
			default:
			}
			var list extv1beta1.SandboxClaimList
			if e.Client.List(e.ctx(), &list, client.InNamespace(e.ns)) != nil {
				continue
			}
			now := map[string]int{"": len(list.Items)}
			for _, c := range list.Items {
				now[c.Annotations[agentsv1beta1.AnnotationCreator]]++
			}
			most := map[string]int{}
			for k, v := range worst.Load().(map[string]int) {
				most[k] = v
			}
			for k, v := range now {
				most[k] = max(most[k], v)
			}
			worst.Store(most)
		}
	}()

	// Each worker holds one claim at most: it deletes the one it holds once a create of its
	// is admitted or refused, so slots keep changing hands. It goes on until the leader has
	// stopped and it made a few creates after, and then until a claim was admitted after the
	// stop: slots deleted come back once the new leader counts them, which takes it a moment
	// (the test's timeout at most). 12 workers a tenant want more than either limit.
	const workers, rounds, roundsAfter, stopAfter = 12, 8, 5, 60
	var attempts, afterStop atomic.Int64
	stopped := make(chan struct{})
	var stoppedAt atomic.Value
	isStopped := func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	}
	goOn := func(round, after int) bool {
		if round < rounds || after < roundsAfter {
			return true
		}
		return afterStop.Load() == 0 && time.Since(stoppedAt.Load().(time.Time)) < framework.Timeout
	}
	var wg sync.WaitGroup
	for user, c := range tenants {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				after := 0
				var held *extv1beta1.SandboxClaim
				release := func() {
					if held != nil {
						_ = c.Delete(e.ctx(), held)
						held = nil
					}
				}
				for round := 0; goOn(round, after); round++ {
					if isStopped() {
						after++
					}
					if attempts.Add(1) == stopAfter {
						go func() { r.stop(0); stoppedAt.Store(time.Now()); close(stopped) }()
					}
					claim := builders.MakeClaim(fmt.Sprintf("%s-%d-%d", user, w, round), e.ns, "pool").Obj()
					err := c.Create(e.ctx(), claim)
					switch {
					case err == nil:
						if after > 0 {
							afterStop.Add(1)
						}
						release()
						held = claim
					case apierrors.IsTooManyRequests(err):
						release()
						time.Sleep(framework.Interval) // the slot comes back with the leader's next count
					default:
						// A create whose admission was cut short as its replica stopped.
						t.Logf("%s's claim %s: %v", user, claim.Name, err)
					}
				}
			}()
		}
	}
	wg.Wait()
	<-stopped
	close(stopWatching)
	<-watched
	most := worst.Load().(map[string]int)
	e.g.Expect(most[""]).To(BeNumerically("<=", 15), "the namespace had %d claims at once, its limit is 15", most[""])
	e.g.Expect(most["alice"]).To(BeNumerically("<=", 10), "alice had %d claims at once, team-a's limit is 10", most["alice"])
	e.g.Expect(most["bob"]).To(BeNumerically("<=", 10), "bob had %d claims at once, team-b's limit is 10", most["bob"])
	e.g.Expect(afterStop.Load()).To(BeNumerically(">", 0), "no claim was admitted after the leader stopped")

	// Only replica 1 is left to write the status: it counts as leader now.
	e.eventually(func(g Gomega) {
		exist := e.claimsBy(g)
		st := e.status(g, "quotas")
		g.Expect(st.Reserved).To(BeZero(), "every reservation became a claim or ended")
		g.Expect(st.Claims).To(Equal(int32(exist["alice"] + exist["bob"])))
		g.Expect(tenantStatus(st, "team-a").Claims).To(Equal(int32(exist["alice"])))
		g.Expect(tenantStatus(st, "team-b").Claims).To(Equal(int32(exist["bob"])))
	})
}
