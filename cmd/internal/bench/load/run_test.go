//go:build integration

package load_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/cmd/controlplane"
	"github.com/sandgate-dev/sandgate/cmd/internal/bench/harness"
	"github.com/sandgate-dev/sandgate/cmd/internal/bench/load"
)

// TestRunMeasuresTheOperator runs a small load against a local cluster with the operator
// built from this repository, as `make bench` does, and checks that every figure the report
// rests on was measured: claims Ready and stamped at admission (the harness wired the
// webhooks with the operator's own certificate), launch types found, API requests counted
// by the API server, the operator's metrics and /proc usage read.
func TestRunMeasuresTheOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := io.Writer(io.Discard)
	if testing.Verbose() {
		log = os.Stderr
	}
	env, err := harness.Start(ctx, harness.Options{Profile: controlplane.ProfileFast, Log: log})
	if err != nil {
		t.Fatalf("starting the harness: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the harness: %v", err)
		}
	})
	if !env.Webhooks || env.Operator == nil || env.Operator.MetricsURL == "" {
		t.Fatalf("harness without webhooks (%v) or a scrapeable operator (%+v)", env.Webhooks, env.Operator)
	}

	const claims = 6
	res, err := load.Run(ctx, env.Config, load.Config{
		Namespace:      "bench-test",
		PodSpec:        load.DefaultPodSpec(),
		WarmPoolSize:   claims + 2,
		BurstSize:      claims / 2,
		TotalBursts:    2,
		QPS:            20,
		PoolCreateWait: 2 * time.Minute,
		Timeout:        time.Minute,
		RefillWait:     time.Minute,
		Progress:       log,
	}, load.Probes{
		OperatorMetrics: env.Operator.Metrics,
		OperatorUsage:   env.Operator.Usage,
		ComponentUsage:  env.ComponentUsage,
		Healthy:         env.Err,
	})
	if err != nil {
		t.Fatalf("running the load: %v", err)
	}
	if !res.OK() {
		t.Errorf("run not OK: claims %+v, errors %v", res.Claims, res.Errors)
	}
	if len(res.Errors) > 0 {
		t.Errorf("run reported problems: %v", res.Errors)
	}
	if got := res.Claims.WarmHits + res.Claims.ColdStarts; got != claims {
		t.Errorf("warm hits + cold starts = %d, want %d (launch types of every claim's Sandbox)", got, claims)
	}
	if res.Latency.Client.Count != claims || res.Latency.Server.Count != claims {
		t.Errorf("latency samples: client %d, server %d; want %d each (server view needs the admission stamp)",
			res.Latency.Client.Count, res.Latency.Server.Count, claims)
	}
	if res.API.Mutating < claims {
		t.Errorf("API server counted %v mutating requests, want at least one per claim", res.API.Mutating)
	}
	if !res.Operator.Measured || len(res.Operator.ReconcilesByController) == 0 {
		t.Errorf("operator metrics not measured: %+v", res.Operator)
	}
	if res.Operator.PeakRSSMiB <= 0 || res.Operator.CPUSecondsTotal <= 0 {
		t.Errorf("operator usage not read: CPU %v s, peak %v MiB", res.Operator.CPUSecondsTotal, res.Operator.PeakRSSMiB)
	}
	found := false
	for _, c := range res.Components {
		found = found || c.Name == "kube-apiserver"
	}
	if !found {
		t.Errorf("no kube-apiserver among the components measured: %+v", res.Components)
	}
}
