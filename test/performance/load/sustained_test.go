//go:build integration

package load_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// TestRunSustainedMeasuresOperatorAndFloor runs a short sustained load, claims arriving at a
// steady rate and deleted after a short lifetime, against the operator and against its floor
// (the load generator binding the operator's members and refilling the pool itself): every
// claim becomes Ready and is deleted, and the run yields its warm share, windows and pool
// timeline. The contract floor also routes each bound member's pod, once per claim, and its
// claims' creates go through the kept webhook configurations.
func TestRunSustainedMeasuresOperatorAndFloor(t *testing.T) {
	for _, tc := range []struct {
		name     string
		floor    bool
		contract bool
	}{
		{name: "sandgate"},
		{name: "floor", floor: true},
		{name: "contract floor", floor: true, contract: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			env := startHarness(ctx, t, harness.Options{FloorAdmission: tc.contract})
			probes := load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage, APIServerCPU: env.APIServerCPU}
			if tc.floor {
				probes.DetachOperator = env.DetachOperator
			} else {
				probes.OperatorMetrics, probes.OperatorUsage = env.Operator.Metrics, env.Operator.Usage
			}
			res, err := load.RunSustained(ctx, env.Config, load.SustainedConfig{
				Namespace: "bench-sustained", PodSpec: load.DefaultPodSpec(), PoolSize: 10,
				Rate: 5, Duration: 15 * time.Second, LifetimeMin: time.Second, LifetimeMax: 3 * time.Second, Seed: 1,
				PoolCreateWait: 2 * time.Minute, Timeout: time.Minute, Floor: tc.floor, FloorRoute: tc.contract, Progress: progress(),
			}, probes)
			if err != nil {
				t.Fatalf("running the sustained load: %v", err)
			}
			s := res.Sustained
			if s == nil {
				t.Fatalf("no sustained figures in the result")
			}
			if !res.OK() || len(res.Errors) > 0 {
				t.Errorf("run not OK: claims %+v, errors %v", res.Claims, res.Errors)
			}
			if res.Claims.CreateErrors != 0 {
				t.Errorf("create errors: %d, want 0", res.Claims.CreateErrors)
			}
			if s.ClaimsDeleted != res.Claims.Created || s.DeleteErrors != 0 {
				t.Errorf("claims deleted %d (%d errors) of %d created: every claim is deleted after its lifetime", s.ClaimsDeleted, s.DeleteErrors, res.Claims.Created)
			}
			if res.Claims.Created < 50 {
				t.Errorf("claims created: %d, want about 75 (5/s for 15 s)", res.Claims.Created)
			}
			if got := res.Claims.WarmHits + res.Claims.ColdStarts; got != res.Claims.Ready {
				t.Errorf("warm + cold = %d, want every Ready claim's launch (%d)", got, res.Claims.Ready)
			}
			if want := report.WarmShare(res.Samples); s.WarmShare != want || want == 0 {
				t.Errorf("warm share %v, want %v from the samples and above 0", s.WarmShare, want)
			}
			if len(s.Windows) == 0 || len(s.Pool) == 0 {
				t.Errorf("windows %d, pool samples %d: want both", len(s.Windows), len(s.Pool))
			}
			if tc.floor && s.Refilled == 0 {
				t.Errorf("the floor refilled no member")
			}
			if tc.floor {
				writes := map[string]float64{}
				for _, row := range res.API.ByVerbResourceCode {
					writes[row.Key] = row.Count
				}
				routes := 0.0
				if tc.contract {
					routes = float64(res.Claims.Ready)
				}
				if writes["PATCH pods 200"] != routes {
					t.Errorf("PATCH pods 200: %v, want %v: one route write per claim in the contract floor only (all: %v)", writes["PATCH pods 200"], routes, res.API.ByVerbResourceCode)
				}
				stamped := 0.0
				for _, w := range res.Webhooks {
					if w.Type == "mutating" && w.Operation == "CREATE" && slices.Contains(w.Resources, "sandboxclaims") {
						stamped += w.Calls
					}
				}
				if tc.contract != (stamped > 0) {
					t.Errorf("claim creates through the mutating webhook: %v; want them only in the contract floor", stamped)
				}
			}
			if res.API.ClaimsCPUSeconds < 0 {
				t.Errorf("kube-apiserver CPU between the first claim and the last Ready not read")
			}
		})
	}
}
