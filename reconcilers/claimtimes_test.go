package reconcilers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// A claim's timestamp annotations are read within MaxClaimTimestampSkew of its
// creationTimestamp, the API server's; anything else is not a time of this claim.
func TestClaimTimestamp(t *testing.T) {
	created := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	key := agentsv1beta1.AnnotationClientFirstRequestedAt
	for name, tc := range map[string]struct {
		value     string
		noCreated bool
		wantOK    bool
	}{
		"just before creation":          {value: created.Add(-300 * time.Millisecond).Format(time.RFC3339Nano), wantOK: true},
		"within the second truncated":   {value: created.Add(900 * time.Millisecond).Format(time.RFC3339Nano), wantOK: true},
		"at the lower bound":            {value: created.Add(-MaxClaimTimestampSkew).Format(time.RFC3339Nano), wantOK: true},
		"at the upper bound":            {value: created.Add(MaxClaimTimestampSkew).Format(time.RFC3339Nano), wantOK: true},
		"before the lower bound":        {value: created.Add(-MaxClaimTimestampSkew - time.Nanosecond).Format(time.RFC3339Nano)},
		"after the upper bound":         {value: created.Add(MaxClaimTimestampSkew + time.Nanosecond).Format(time.RFC3339Nano)},
		"year 1":                        {value: "0001-01-01T00:00:00Z"},
		"year 9999":                     {value: "9999-12-31T23:59:59Z"},
		"another zone, same instant":    {value: created.In(time.FixedZone("x", 3600)).Format(time.RFC3339Nano), wantOK: true},
		"unparsable":                    {value: "yesterday"},
		"absent":                        {},
		"no creationTimestamp to bound": {value: created.Format(time.RFC3339Nano), noCreated: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := builders.MakeClaim("c", "ns", "pool")
			if !tc.noCreated {
				w.Created(created)
			}
			if tc.value != "" {
				w.Annotation(key, tc.value)
			}
			at, ok := claimTimestamp(w.Obj(), key)
			if ok != tc.wantOK {
				t.Fatalf("claimTimestamp(%q) ok = %t, want %t (at %s)", tc.value, ok, tc.wantOK, at)
			}
			if want, _ := time.Parse(time.RFC3339Nano, tc.value); ok && !at.Equal(want) {
				t.Errorf("claimTimestamp(%q) = %s, want %s", tc.value, at, want)
			}
		})
	}
}

// webhook-first-observed-at feeds the platform's agent_sandbox_claim_startup_latency_ms and
// the admission_to_reconcile phase: a claim whose value lies outside the window (one admitted
// before admission overwrote it, or changed since) adds no observation to either, while the
// controller's own latency, which no claim writes, is still observed.
func TestStartupMetricsIgnoreAnOutOfRangeAdmissionTime(t *testing.T) {
	created := planNow.Add(-time.Second)
	for name, tc := range map[string]struct {
		observed  time.Time
		wantCount uint64
		wantSumMs float64
	}{
		"stamped by admission":         {observed: created.Add(500 * time.Millisecond), wantCount: 1, wantSumMs: 500},
		"year 1":                       {observed: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		"an hour before the claim":     {observed: created.Add(-time.Hour)},
		"an hour after the claim":      {observed: created.Add(time.Hour)},
		"a minute before, within skew": {observed: created.Add(-MaxClaimTimestampSkew), wantCount: 1, wantSumMs: 61000},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl, pool := testTemplate(), testPool(1)
			claim := testClaim(tmpl, func(w *builders.ClaimWrapper) {
				w.Created(created).Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, tc.observed.Format(time.RFC3339Nano))
			})
			member := readyMember(pool, tmpl, "pool-a", "10.0.0.1")
			a := newFakeAPI(t, tmpl, pool, claim, member, podOf(member))
			r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
			observeSandboxes(t, a, r.Index)

			reconcileClaim(t, r)

			if !meta.IsStatusConditionTrue(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady) {
				t.Fatal("claim not Ready after one reconcile")
			}
			got := r.Metrics.ClaimStartupLatency(false)
			if got.Count != tc.wantCount || got.SumMs != tc.wantSumMs {
				t.Errorf("%s: %d observations summing %v ms, want %d summing %v ms", MetricClaimStartupLatency, got.Count, got.SumMs, tc.wantCount, tc.wantSumMs)
			}
			if n, sum := r.Metrics.ClaimPhase(PhaseAdmissionToReconcile); n != tc.wantCount || sum != time.Duration(tc.wantSumMs)*time.Millisecond {
				t.Errorf("%s{%s}: %d observations summing %s, want %d summing %v ms", MetricClaimPhase, PhaseAdmissionToReconcile, n, sum, tc.wantCount, tc.wantSumMs)
			}
			if n := r.Metrics.ClaimStartupLatency(true).Count; n != 1 {
				t.Errorf("%s: %d observations, want 1", MetricClaimControllerStartupLatency, n)
			}
		})
	}
}
