//go:build integration

package autoscaler_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// A failover mid-ramp: the leader stops after it scaled the pool for a first wave of claims;
// the follower, which admitted none of them, takes over with the estimate rebuilt from the
// claims in its cache (every one of the wave counted at once), keeps the pool where the old
// leader left it, and scales it further for the second wave.
//
// Three replicas with leader election: the first leader serves the webhooks (only one
// manager per cluster can), the second never does, and the third serves them once the first
// is gone, as a follower. The second's estimate can only come from its informer.
func TestFailoverMidRampRecoversTheEstimateFromTheCache(t *testing.T) {
	e := setupWithoutManager(t)
	electing := func(webhooks bool) framework.ManagerOptions {
		o := e.opts
		o.Webhooks = webhooks
		// The claims here are never served (members never start): shedding off, or admission
		// would refuse the claims past MinBacklog waiting, which this test counts.
		o.Configure = func(o *operator.Options) {
			o.LeaderElection, o.LeaderElectionNamespace = true, e.ns
			o.ClaimAdmissionMaxWait = 0
		}
		return o
	}
	key := types.NamespacedName{Namespace: e.ns, Name: "wpa"}
	const firstWave, secondWave = 20, 40
	var second *framework.Manager
	var leftAt int32

	parent := t
	t.Run("first-leader", func(t *testing.T) {
		e := &env{Manager: e.Manager, t: t, g: NewWithT(t), ns: e.ns, opts: e.opts}
		first := cluster.StartManager(t, electing(true))
		// Members never start: the start-up time stays the default, 5 s, on every replica.
		e.gatedTemplate("tmpl")
		e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
		e.create(builders.MakeAutoscaler("wpa", e.ns, "pool").Min(1).Max(200).TargetSpare(2).Obj())
		e.eventually(func(g Gomega) {
			g.Expect(first.Metrics.Reconciles("warmpoolautoscaler")).To(BeNumerically(">", 0), "the first manager leads")
			g.Expect(e.replicas(g, "pool")).To(Equal(int32(2)))
		})
		// Started here, after the first leads, and kept past this subtest.
		second = cluster.StartManager(outliving{TB: t, parent: parent}, electing(false))
		e.createClaims("first", "pool", firstWave)
		e.eventually(func(g Gomega) {
			// 20 claims in the 10 s window: 2/s, 10 during a start-up, plus 2 spare.
			leftAt = e.replicas(g, "pool")
			g.Expect(leftAt).To(BeNumerically(">", 2))
		})
		e.g.Expect(second.Metrics.Reconciles("warmpoolautoscaler")).To(BeZero(), "the second manager follows")
		t.Logf("the first leader scaled the pool to %d; stopping it", leftAt)
	})

	// The first manager released the lease as it stopped: the second takes over, and its
	// first estimate counts the whole first wave, which it never admitted.
	e.eventually(func(g Gomega) {
		n, ok := second.Metrics.AutoscalerRecentClaims(key, "long")
		g.Expect(ok).To(BeTrue(), "the second manager leads")
		g.Expect(n).To(Equal(float64(firstWave)))
		s := e.autoscaler(g, "wpa").Status
		g.Expect(s.Demand).NotTo(BeNil())
		g.Expect(s.Demand.LongWindowClaims).To(Equal(int32(firstWave)), "the new leader's status")
	})
	e.g.Expect(e.replicas(e.g, "pool")).To(BeNumerically(">=", leftAt), "the new leader did not scale down")

	third := cluster.StartManager(t, electing(true))
	e.createClaims("second", "pool", secondWave)
	e.eventually(func(g Gomega) {
		g.Expect(e.replicas(g, "pool")).To(BeNumerically(">", leftAt), "the new leader scales on")
		n, _ := second.Metrics.AutoscalerRecentClaims(key, "long")
		g.Expect(n).To(Equal(float64(firstWave + secondWave)))
	})
	e.g.Expect(third.Metrics.Reconciles("warmpoolautoscaler")).To(BeZero(), "the third manager follows")
	t.Logf("the new leader scaled the pool to %d", e.replicas(e.g, "pool"))
	checkInvariants(e.g, e)
}

// outliving is a subtest's testing.TB whose cleanups (and the temporary directories, and the
// errors reported from them) belong to the parent test: a manager started with it in the
// subtest outlives the subtest, while a failure to start it still fails the subtest.
type outliving struct {
	testing.TB
	parent testing.TB
}

func (o outliving) Cleanup(f func())                  { o.parent.Cleanup(f) }
func (o outliving) TempDir() string                   { return o.parent.TempDir() }
func (o outliving) Errorf(format string, args ...any) { o.parent.Errorf(format, args...) }
