package performance

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/utils/ptr"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// sustainedSettings are the settings of the sustained scenarios, from their flags
// (AddSustainedFlags).
type sustainedSettings struct {
	Duration time.Duration
	// StopBehind ends the floor's arrivals early when they fall behind the rate
	// (load.SustainedConfig.StopBehind); sandgate's run then has as long.
	StopBehind time.Duration
	Lifetime   string
	Pool       int
	Rate       float64
	Seed       uint64
}

// sustainedArrivals is how long a sustained scenario's claims arrive unless it says otherwise
// (scenario.arrivals) or --sustained-duration does.
const sustainedArrivals = 5 * time.Minute

// sustainedFlags holds the sustained scenarios' flags: they apply to those scenarios only,
// and live beside them rather than among the options of every run.
var sustainedFlags = sustainedSettings{StopBehind: 30 * time.Second, Lifetime: "5s-30s", Seed: 1}

// AddSustainedFlags registers the flags of the sustained scenarios on fs.
func AddSustainedFlags(fs *flag.FlagSet) {
	fs.DurationVar(&sustainedFlags.Duration, "sustained-duration", sustainedFlags.Duration, "with --scenarios sustained-*: how long claims arrive in all, instead of the scenario's (5m; sustained-10: 4m): a scenario measured in rounds (sustained-10) splits it evenly over them")
	fs.DurationVar(&sustainedFlags.StopBehind, "sustained-stop-behind", sustainedFlags.StopBehind,
		"with --scenarios sustained-*: once the floor's arrivals have run this long, end them when they are more than a tenth behind the rate (claims waiting for Ready hold ten seconds' worth of slots: the machine does not carry the rate), and give sandgate's run as long; 0 runs the whole --sustained-duration whatever happens")
	fs.StringVar(&sustainedFlags.Lifetime, "sustained-lifetime", sustainedFlags.Lifetime, "with --scenarios sustained-*: range of a claim's lifetime from Ready to its deletion, drawn uniformly (min-max, as 5s-30s)")
	fs.IntVar(&sustainedFlags.Pool, "sustained-pool", sustainedFlags.Pool, "with --scenarios sustained-*: pool size instead of the scenario's (0 keeps it)")
	fs.Float64Var(&sustainedFlags.Rate, "sustained-rate", sustainedFlags.Rate, "with --scenarios sustained-*: claims per second instead of the scenario's (0 keeps it): to find the rate a machine sustains")
	fs.Uint64Var(&sustainedFlags.Seed, "sustained-seed", sustainedFlags.Seed, "with --scenarios sustained-*: seed of the claims' lifetimes")
}

// sustainedTargets are the goals of the sustained scenarios (issue 24); the warm share's
// (≥ 99% when the pool holds at least rate × a member's start-up time) is read from the
// result's sustained figures.
var sustainedTargets = report.Targets{
	Conflicts: ptr.To(0), FloorP50Ratio: 1.3, FloorP99Ratio: 1.5, FloorCPURatio: 1.3,
}

// runSustained measures a steady claim rate against its floor: the floor first, then
// sandgate, each on a fresh cluster.
func runSustained(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	cfg, err := sustainedConfig(o, sc)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	var failed []string
	var floor, contract *report.Result
	if o.SkipFloor {
		cfg.StopBehind = sustainedFlags.StopBehind // no floor to match: sandgate's own rule
	} else {
		fcfg := cfg
		fcfg.Floor, fcfg.StopBehind = true, sustainedFlags.StopBehind
		floor, failed, err = runSustainedFloor(ctx, o, fcfg, sc, "floor", "no operator, no admission webhooks; the load generator binds and refills", failed, stderr)
		if err != nil {
			return nil, nil, err
		}
		if floor != nil && floor.Sustained != nil && floor.Sustained.StoppedBehindSeconds > 0 {
			s := floor.Sustained
			// The same arrival window as the floor's: a ratio of two runs of one length.
			cfg.Duration = time.Duration(s.StoppedBehindSeconds * float64(time.Second))
			logf(stderr, "the floor fell behind %g claims/s after %s: sandgate's arrivals run as long\n", cfg.Rate, cfg.Duration)
		}
	}
	if !o.SkipFloor && sc.contractFloor > 0 {
		co := o
		co.Floor, co.FloorAdmission = true, true
		ccfg := cfg // the arrivals of sandgate's run
		ccfg.Floor, ccfg.FloorRoute = true, true
		contract, failed, err = runSustainedFloor(ctx, co, ccfg, sc, "contract floor",
			"no operator; admission webhooks kept and answered at once; the route write after each bind", failed, stderr)
		if err != nil {
			return nil, nil, err
		}
	}
	if !o.SkipFloor {
		logf(stderr, "\n=== scenario %s, sandgate\n", sc.name)
	}
	res, err := runSustainedOnce(ctx, o, cfg, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		logf(stderr, "scenario %s failed: %v\n", sc.name, err)
		return nil, append(failed, fmt.Sprintf("%s: %v", sc.name, err)), nil
	}
	res.Scenario, res.Description, res.Targets = sc.name, sc.description, ptr.To(sustainedTargets)
	res.Floor, res.ContractFloor = floor, contract
	if err := report.WriteText(stdout, res); err != nil {
		return nil, nil, err
	}
	if err := report.WriteSustainedText(stdout, res); err != nil {
		return nil, nil, err
	}
	if !res.OK() {
		failed = append(failed, fmt.Sprintf("%s: %d claims never Ready, %d create errors, %d stale",
			sc.name, res.Claims.NeverReady, res.Claims.CreateErrors, res.Claims.Stale))
	}
	return res, failed, nil
}

// runSustainedFloor runs a floor of scenario sc (name says which, how what it does) and
// returns it, nil when it failed, with failed extended by what failed; an error only when
// ctx ends.
func runSustainedFloor(ctx context.Context, o Options, cfg load.SustainedConfig, sc scenario, name, how string, failed []string, stderr io.Writer) (*report.Result, []string, error) {
	logf(stderr, "\n=== scenario %s, its %s (%s)\n", sc.name, name, how)
	f, err := runSustainedOnce(ctx, o, cfg, stderr)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, nil, err
	case err != nil:
		logf(stderr, "%s of scenario %s failed: %v\n", name, sc.name, err)
		return nil, append(failed, fmt.Sprintf("%s (%s): %v", sc.name, name, err)), nil
	}
	f.Scenario, f.Description = sc.name, sc.description
	if !f.OK() {
		failed = append(failed, fmt.Sprintf("%s (%s): %d claims never Ready, %d create errors",
			sc.name, name, f.Claims.NeverReady, f.Claims.CreateErrors))
	}
	return f, failed, nil
}

// sustainedConfig is the run of scenario sc with the sustained flags applied.
func sustainedConfig(o Options, sc scenario) (load.SustainedConfig, error) {
	lo, hi, err := load.ParseLifetime(sustainedFlags.Lifetime)
	if err != nil {
		return load.SustainedConfig{}, fmt.Errorf("--sustained-lifetime: %w", err)
	}
	pool := sc.pool
	if sustainedFlags.Pool > 0 {
		pool = sustainedFlags.Pool
	}
	rate := sc.qps
	if sustainedFlags.Rate > 0 {
		rate = sustainedFlags.Rate
	}
	arrivals := cmp.Or(sustainedFlags.Duration, sc.arrivals, sustainedArrivals)
	cfg := load.SustainedConfig{
		Namespace: "bench", PodSpec: load.DefaultPodSpec(), PoolSize: int32(pool),
		Rate: rate, Duration: arrivals / time.Duration(max(o.Rounds, 1)), LifetimeMin: lo, LifetimeMax: hi, Seed: sustainedFlags.Seed,
		// The claims still waiting when the arrivals end: a rate beyond the machine leaves ten
		// seconds' worth of them, which a saturated cluster takes minutes to serve.
		PoolCreateWait: max(o.PoolCreateWait, time.Duration(pool)*200*time.Millisecond), Timeout: max(o.Timeout, 5*time.Minute),
	}
	return cfg, cfg.Validate()
}

// runSustainedOnce starts a fresh local cluster with the operator, runs cfg and stops the
// cluster.
func runSustainedOnce(ctx context.Context, o Options, cfg load.SustainedConfig, progress io.Writer) (_ *report.Result, retErr error) {
	// Pods alive at once: the pool, and each claim's for its lifetime.
	alive := int(cfg.PoolSize) + int(cfg.Rate*(cfg.LifetimeMax.Seconds()+5))
	env, err := startEnv(ctx, o, max(controlplane.DefaultNodes, alive/800+1), progress)
	if err != nil {
		return nil, err
	}
	defer stopEnv(env, progress, &retErr)
	if env.Cluster == nil || env.Operator == nil || !env.Webhooks {
		return nil, errors.New("a sustained run needs the operator and its webhooks in the local cluster")
	}
	probes := load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage, APIServerCPU: env.APIServerCPU,
		ProfileWebhookServer: env.ProfileWebhookServer}
	params := report.Parameters{
		QPS: cfg.Rate, WarmPoolSize: cfg.PoolSize, Namespace: cfg.Namespace, Template: "built-in",
		TimeoutSeconds: cfg.Timeout.Seconds(), Floor: cfg.Floor, OperatorCommand: env.Operator.Template,
	}
	describeCluster(&params, env, o)
	if cfg.Floor {
		probes.DetachOperator = env.DetachOperator
		standInProbes(env, &probes)
	} else {
		probes.OperatorUsage = env.Operator.Usage
		if env.Operator.MetricsURL != "" {
			probes.OperatorMetrics = env.Operator.Metrics
		}
	}
	cfg.Progress = progress
	res, err := load.RunSustained(ctx, env.Config, cfg, probes)
	if err != nil {
		if env.Operator != nil {
			err = fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
		}
		return nil, err
	}
	res.Parameters = params
	return res, nil
}
