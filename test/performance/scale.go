package performance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// scalePool50 is the pool of the reference the serial claims at scale are compared with.
const scalePool50 = 50

// runScale measures the operator at scale (AddScaleFlags: 20,000 Sandboxes in 200 pools
// across 20 namespaces by default): first the serial claims at pool 50 on a fresh cluster,
// the reference, then on another fresh cluster the fill, the idle operator's memory and CPU,
// the serial claims, a restart to its first claim, and the floor of the serial claims
// (load.RunScale). The result is the scale cluster's, with the reference's p50 in its Scale
// figures; the reference's own result goes beside it in the results directory.
func runScale(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	replicas, err := scaleReplicas()
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	var failed []string

	logf(stderr, "\n=== scenario %s: the reference, %d serial claims into a pool of %d on a fresh cluster\n", sc.name, scaleClaims, scalePool50)
	ro := o
	ro.BurstSize, ro.TotalBursts, ro.QPS, ro.WarmPoolSize = 1, scaleClaims, 1000, scalePool50
	ref, err := runOnce(ctx, ro, load.DefaultPodSpec(), "built-in", stderr)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, nil, err
	case err != nil:
		logf(stderr, "the pool-%d reference of %s failed: %v\n", scalePool50, sc.name, err)
		failed = append(failed, fmt.Sprintf("%s (pool-%d reference): %v", sc.name, scalePool50, err))
		ref = nil
	default:
		ref.Scenario, ref.Description = sc.name+"-pool50", fmt.Sprintf("the reference of %s: %d serial claims into a pool of %d", sc.name, scaleClaims, scalePool50)
		if err := ref.WriteJSON(filepath.Join(o.ResultsDir, ref.Scenario+".json")); err != nil {
			return nil, nil, err
		}
		if !ref.OK() {
			failed = append(failed, fmt.Sprintf("%s (pool-%d reference): %d claims never Ready", sc.name, scalePool50, ref.Claims.NeverReady))
		}
	}

	cfg := load.ScaleConfig{
		NamespacePrefix: "scale", Namespaces: scaleNamespaces, PoolsPerNamespace: scalePoolsPerNamespace, Replicas: replicas,
		PodSpec: load.DefaultPodSpec(), SerialClaims: scaleClaims, FloorClaims: scaleClaims, Restarts: scaleRestarts,
		FillTimeout: scaleFillTimeout, Settle: 5 * time.Second, IdleWindow: scaleIdle, Timeout: o.Timeout, Progress: stderr,
	}
	if o.SkipFloor {
		cfg.FloorClaims = 0
	}
	logf(stderr, "\n=== scenario %s: %d Sandboxes (%d namespaces × %d pools × %d) on a fresh cluster\n",
		sc.name, cfg.Sandboxes(), cfg.Namespaces, cfg.PoolsPerNamespace, cfg.Replicas)
	res, err := runScaleCluster(ctx, o, cfg, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		logf(stderr, "scenario %s failed: %v\n", sc.name, err)
		return nil, append(failed, fmt.Sprintf("%s: %v", sc.name, err)), nil
	}
	res.Scenario, res.Description, res.Targets = sc.name, sc.description, ptr.To(sc.targets)
	if ref != nil {
		res.Scale.Pool50SerialP50Ms = ref.Latency.Client.P50
	}
	res.Scale.SetRatios()
	if err := report.WriteText(stdout, res); err != nil {
		return nil, nil, err
	}
	if err := report.WriteScaleText(stdout, res.Scale); err != nil {
		return nil, nil, err
	}
	if !res.OK() {
		failed = append(failed, fmt.Sprintf("%s: %d claims never Ready, %d create errors, %d stale",
			sc.name, res.Claims.NeverReady, res.Claims.CreateErrors, res.Claims.Stale))
	}
	if f := res.Floor; f != nil && !f.OK() {
		failed = append(failed, fmt.Sprintf("%s (floor): %d claims never Ready, %d create errors", sc.name, f.Claims.NeverReady, f.Claims.CreateErrors))
	}
	return res, failed, nil
}

// runScaleCluster starts a local cluster with nodes for cfg's Sandboxes and runs the scale
// measurements on it.
func runScaleCluster(ctx context.Context, o Options, cfg load.ScaleConfig, progress io.Writer) (_ *report.Result, retErr error) {
	nodes := o.Nodes
	if nodes == 0 {
		// The simulated nodes take 1000 pods each; keep headroom as runOnce does.
		nodes = max(controlplane.DefaultNodes, cfg.Sandboxes()/800+1)
	}
	env, err := startEnv(ctx, o, nodes, progress)
	if err != nil {
		return nil, err
	}
	defer stopEnv(env, progress, &retErr)
	if env.Operator == nil || env.Cluster == nil || !env.Webhooks {
		return nil, errors.New("the scale scenario needs the local cluster, an operator to restart and its webhooks installed")
	}
	template := env.Operator.Template
	res, err := load.RunScale(ctx, env.Config, cfg, scaleProbes(env))
	if err != nil {
		if env.Operator != nil {
			err = fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
		}
		return nil, err
	}
	res.Parameters = report.Parameters{
		BurstSize: 1, QPS: 1000, TotalBursts: cfg.SerialClaims, WarmPoolSize: cfg.Replicas,
		Namespace: fmt.Sprintf("%s-00 (of %d)", cfg.NamespacePrefix, cfg.Namespaces), Template: "built-in",
		OperatorCommand: template, TimeoutSeconds: cfg.Timeout.Seconds(),
	}
	describeCluster(&res.Parameters, env, o)
	res.Scale.CacheLabelSelectors = strings.Contains(template, "--cache-label-selectors")
	return res, nil
}

// scaleProbes are the probes of env for a scale run: the operator's follow it across its
// restart.
func scaleProbes(env *harness.Env) load.ScaleProbes {
	return load.ScaleProbes{
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
	}
}
