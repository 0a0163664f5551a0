//go:build integration

package load_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
)

// TestRunScaleMeasuresEveryFigure runs a tiny scale run — 2 namespaces × 2 pools × 5 — against
// a local cluster with the operator built from this repository, and checks that every figure
// the scale scenario reports was measured: every pool filled, the operator's memory and idle
// CPU read, the serial claims Ready on warm members, a restart timed to its first claim, and
// the floor's claims Ready with the operator gone.
func TestRunScaleMeasuresEveryFigure(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make tools` (make test-integration sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env := startHarness(ctx, t, harness.Options{Nodes: 2})

	const serial = 3
	cfg := load.ScaleConfig{
		NamespacePrefix: "scale-test", Namespaces: 2, PoolsPerNamespace: 2, Replicas: 5,
		PodSpec: load.DefaultPodSpec(), SerialClaims: serial, FloorClaims: serial, Restarts: 2,
		FillTimeout: 3 * time.Minute, Settle: time.Second, IdleWindow: 2 * time.Second, Timeout: time.Minute,
		Progress: progress(),
	}
	res, err := load.RunScale(ctx, env.Config, cfg, load.ScaleProbes{
		Probes: load.Probes{
			OperatorMetrics: env.OperatorMetrics,
			OperatorUsage:   env.OperatorUsage,
			ComponentUsage:  env.ComponentUsage,
			Healthy:         env.Err,
			DetachOperator:  env.DetachOperator,
			APIServerCPU:    env.APIServerCPU,
		},
		RestartOperator: func(ctx context.Context) (load.OperatorRestart, error) {
			op, stopped, err := env.RestartOperator(ctx)
			if err != nil {
				return load.OperatorRestart{}, err
			}
			return load.OperatorRestart{StartedAt: op.StartedAt, Stopped: stopped, WaitReady: op.WaitReady}, nil
		},
	})
	if err != nil {
		t.Fatalf("running the scale measurements: %v", err)
	}
	sc := res.Scale
	if sc == nil {
		t.Fatal("no scale figures in the result")
	}
	if sc.Sandboxes != 20 || sc.Pools != 4 || sc.FillSeconds <= 0 {
		t.Errorf("fill: %d Sandboxes in %d pools in %v s; want 20 in 4, filled", sc.Sandboxes, sc.Pools, sc.FillSeconds)
	}
	if sc.OperatorRSSMiB <= 0 || sc.HeapInuseMiB <= 0 || sc.BaselineRSSMiB <= 0 || sc.IdleCPUCoresPercent < 0 {
		t.Errorf("memory and idle CPU not read: %+v", sc)
	}
	if !res.OK() || res.Claims.Ready != serial || res.Claims.WarmHits != serial || sc.SerialP50Ms <= 0 {
		t.Errorf("serial claims: %+v (p50 %v ms), want %d Ready on warm members", res.Claims, sc.SerialP50Ms, serial)
	}
	if sc.RestartToFirstClaimSeconds <= 0 || sc.RestartToReadySeconds <= 0 || sc.RestartClaimAttempts < 1 {
		t.Errorf("restart not timed: to ready %v s, to the first claim %v s, %d create calls",
			sc.RestartToReadySeconds, sc.RestartToFirstClaimSeconds, sc.RestartClaimAttempts)
	}
	if len(sc.Restarts) != 2 {
		t.Errorf("%d restarts timed, want 2: %+v", len(sc.Restarts), sc.Restarts)
	}
	for i, r := range sc.Restarts {
		if r.ToFirstClaimSeconds <= 0 || r.ToReadySeconds <= 0 {
			t.Errorf("restart %d not timed: %+v", i+1, r)
		}
	}
	if f := res.Floor; f == nil || !f.OK() || f.Claims.WarmHits != serial || sc.FloorSerialP50Ms <= 0 || sc.P50RatioToFloor <= 0 {
		t.Errorf("floor: %+v, p50 %v ms, ratio %v; want %d claims bound to warm members", f, sc.FloorSerialP50Ms, sc.P50RatioToFloor, serial)
	}
	if env.Operator != nil {
		t.Errorf("the operator still runs after the floor detached it")
	}
}
