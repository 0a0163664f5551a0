package performance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/sandgate-dev/sandgate/api/policy"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/trace"
)

// traceSettings are the trace scenario's settings, from its flags (AddTraceFlags).
type traceSettings struct {
	Seed                uint64
	Duration            time.Duration
	NightRate, PeakRate float64
	Noise               float64
	Bursts              int
	BurstSize           string
	BurstSpread         time.Duration
	Lifetime            string
	// Policies are the arms to run, in order.
	Policies string
	// Profile is the pod profile of the arms' clusters.
	Profile string
	// Startup is the member start-up time the pools are sized with; Headroom the static pool's
	// margin above the most claims arriving within it.
	Startup  time.Duration
	Headroom float64
	// MinReplicas is the dynamic policies' minimum; 0 sizes it for the night (see traceSizing).
	MinReplicas int
	// HPATarget is the recipe's AverageValue target, claims a second per member; HPADelay and
	// HPAWindow how late and over how long the HPA sees the claim rate.
	HPATarget           float64
	HPADelay, HPAWindow time.Duration
	// Spare is the WarmPoolAutoscaler's targetSpare.
	Spare int
	// ScaleDownWindow is the WarmPoolAutoscaler's scale-down stabilization window;
	// ScaleDownMaxStep and ScaleDownPeriod its scale-down step and period; 0 (empty) keeps
	// each default.
	ScaleDownWindow  time.Duration
	ScaleDownMaxStep string
	ScaleDownPeriod  time.Duration
}

// traceFlags holds the trace scenario's flags. The defaults are sized for a two-core machine:
// a peak of 6 claims a second is well within what sustained-10 shows it carries, and bursts of
// 50–150 claims within 1.5 s are burst-100's order.
var traceFlags = traceSettings{
	Seed: 1, Duration: 8 * time.Minute, NightRate: 0.5, PeakRate: 6, Noise: 0.2,
	Bursts: 3, BurstSize: "50-150", BurstSpread: 1500 * time.Millisecond, Lifetime: "10s-60s",
	Policies: strings.Join([]string{report.PolicyStatic, report.PolicyHPA, report.PolicyAutoscaler}, ","),
	Profile:  string(controlplane.ProfileRealistic), Startup: 8 * time.Second, Headroom: 0.25,
	HPATarget: 0.1, HPADelay: 30 * time.Second, HPAWindow: 15 * time.Second, Spare: 5,
}

// AddTraceFlags registers the flags of the trace scenario on fs.
func AddTraceFlags(fs *flag.FlagSet) {
	fs.Uint64Var(&traceFlags.Seed, "trace-seed", traceFlags.Seed, "trace: seed of the demand trace (arrivals, noise, bursts, lifetimes); the same seed and settings replay the same claims")
	fs.DurationVar(&traceFlags.Duration, "trace-duration", traceFlags.Duration, "trace: the day compressed to this long (night, morning ramp, plateau, evening decline, night), per policy")
	fs.Float64Var(&traceFlags.NightRate, "trace-night-rate", traceFlags.NightRate, "trace: claims a second at night")
	fs.Float64Var(&traceFlags.PeakRate, "trace-peak-rate", traceFlags.PeakRate, "trace: the highest claims a second of the day, noise included (bursts come on top)")
	fs.Float64Var(&traceFlags.Noise, "trace-noise", traceFlags.Noise, "trace: relative amplitude of the day plateau's noise, 0 to 1")
	fs.IntVar(&traceFlags.Bursts, "trace-bursts", traceFlags.Bursts, "trace: sudden bursts on top of the Poisson arrivals")
	fs.StringVar(&traceFlags.BurstSize, "trace-burst-size", traceFlags.BurstSize, "trace: claims in a burst, drawn uniformly (min-max, as 50-150)")
	fs.DurationVar(&traceFlags.BurstSpread, "trace-burst-spread", traceFlags.BurstSpread, "trace: a burst's claims arrive evenly over this long")
	fs.StringVar(&traceFlags.Lifetime, "trace-lifetime", traceFlags.Lifetime, "trace: a claim's lifetime from Ready to its deletion, drawn uniformly (min-max)")
	fs.StringVar(&traceFlags.Policies, "trace-policies", traceFlags.Policies, "trace: the pool policies to replay the trace against, each on a fresh cluster, in order: static, hpa, autoscaler")
	fs.StringVar(&traceFlags.Profile, "trace-profile", traceFlags.Profile, "trace: pod profile of the clusters ("+profileNames()+")")
	fs.DurationVar(&traceFlags.Startup, "trace-startup", traceFlags.Startup, "trace: the member start-up time pools are sized with: the static pool holds the most claims arriving within it, plus --trace-headroom")
	fs.Float64Var(&traceFlags.Headroom, "trace-headroom", traceFlags.Headroom, "trace: the static pool's margin above the most claims arriving within one --trace-startup (0.25: a quarter more)")
	fs.IntVar(&traceFlags.MinReplicas, "trace-min", traceFlags.MinReplicas, "trace: minReplicas of the hpa and autoscaler policies (0: the night's claims within one --trace-startup, plus headroom, at least 2)")
	fs.Float64Var(&traceFlags.HPATarget, "trace-hpa-target", traceFlags.HPATarget, "trace: the emulated HPA's AverageValue target, claims a second per member (0.1: a pool of ten seconds of demand)")
	fs.DurationVar(&traceFlags.HPADelay, "trace-hpa-delay", traceFlags.HPADelay, "trace: how late the emulated HPA sees the claim rate (a scrape interval plus the adapter's window)")
	fs.DurationVar(&traceFlags.HPAWindow, "trace-hpa-window", traceFlags.HPAWindow, "trace: the window of the claim rate the emulated HPA reads")
	fs.IntVar(&traceFlags.Spare, "trace-spare", traceFlags.Spare, "trace: the WarmPoolAutoscaler's targetSpare")
	fs.DurationVar(&traceFlags.ScaleDownWindow, "trace-scale-down-window", traceFlags.ScaleDownWindow, "trace: the WarmPoolAutoscaler's behavior.scaleDown.stabilizationWindowSeconds, whole seconds (0 keeps its default, 300 s; a day compressed 180-fold makes 300 s 15 hours' worth)")
	fs.StringVar(&traceFlags.ScaleDownMaxStep, "trace-scale-down-max-step", traceFlags.ScaleDownMaxStep, "trace: the WarmPoolAutoscaler's behavior.scaleDown.maxStep, members (\"10\") or a percentage of its replicas (\"100%\") (empty keeps its default, 25%)")
	fs.DurationVar(&traceFlags.ScaleDownPeriod, "trace-scale-down-period", traceFlags.ScaleDownPeriod, "trace: the WarmPoolAutoscaler's behavior.scaleDown.periodSeconds, whole seconds (0 keeps its default, 30 s)")
}

func profileNames() string {
	var names []string
	for _, p := range controlplane.Profiles {
		names = append(names, string(p))
	}
	return strings.Join(names, ", ")
}

// shape is the trace the settings describe.
func (s traceSettings) shape() (trace.Shape, error) {
	var errs []error
	bmin, bmax, err := parseRange(s.BurstSize)
	if err != nil {
		errs = append(errs, fmt.Errorf("--trace-burst-size: %w", err))
	}
	lo, hi, err := load.ParseLifetime(s.Lifetime)
	if err != nil {
		errs = append(errs, fmt.Errorf("--trace-lifetime: %w", err))
	}
	if !slices.Contains(controlplane.Profiles, controlplane.Profile(s.Profile)) {
		errs = append(errs, fmt.Errorf("--trace-profile %q: want one of %s", s.Profile, profileNames()))
	}
	if _, err := s.policies(); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"window", s.ScaleDownWindow}, {"period", s.ScaleDownPeriod}} {
		if f.d < 0 || f.d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("--trace-scale-down-%s must be whole seconds, not negative", f.flag))
		}
	}
	if v := s.ScaleDownMaxStep; v != "" {
		if _, _, err := policy.ParseMaxStep(intstr.Parse(v)); err != nil {
			errs = append(errs, fmt.Errorf("--trace-scale-down-max-step: %w", err))
		}
	}
	if s.Startup <= 0 || s.Headroom < 0 || s.Spare < 0 || s.MinReplicas < 0 {
		errs = append(errs, errors.New("--trace-startup must be positive; --trace-headroom, --trace-spare and --trace-min not negative"))
	}
	sh := trace.Shape{
		Duration: s.Duration, NightRate: s.NightRate, PeakRate: s.PeakRate, Noise: s.Noise,
		Bursts: s.Bursts, BurstMin: bmin, BurstMax: bmax, BurstSpread: s.BurstSpread,
		LifetimeMin: lo, LifetimeMax: hi, Seed: s.Seed,
	}
	if len(errs) == 0 {
		errs = append(errs, sh.Validate())
	}
	return sh, errors.Join(errs...)
}

// policies lists --trace-policies.
func (s traceSettings) policies() ([]string, error) {
	var out []string
	for _, p := range strings.Split(s.Policies, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains([]string{report.PolicyStatic, report.PolicyHPA, report.PolicyAutoscaler}, p) {
			return nil, fmt.Errorf("--trace-policies: unknown policy %q (want static, hpa, autoscaler)", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseRange parses "50-150" (or one number, "100").
func parseRange(v string) (lo, hi int, err error) {
	a, b, found := strings.Cut(v, "-")
	if lo, err = strconv.Atoi(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("parsing %q: %w", v, err)
	}
	hi = lo
	if found {
		if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Errorf("parsing %q: %w", v, err)
		}
	}
	return lo, hi, nil
}

// traceSizing is how the policies are set up for trace t.
type traceSizing struct {
	// static is the peak-sized pool, which is also the dynamic policies' maximum.
	static int32
	// min is the dynamic policies' minimum and their pool's size when the trace starts.
	min int32
	hpa trace.HPAConfig
	wpa load.AutoscalerSpec
}

// sizeFor sizes the policies for t: the static pool holds the most claims arriving within one
// member start-up time plus headroom; the dynamic ones go from the night's share of that
// (unless --trace-min says) to the static pool.
func (s traceSettings) sizeFor(t *trace.Trace) traceSizing {
	static := max(t.StaticPool(s.Startup, s.Headroom), 1)
	minimum := int32(s.MinReplicas)
	if minimum == 0 {
		minimum = int32(math.Ceil(s.NightRate * s.Startup.Seconds() * (1 + s.Headroom)))
	}
	minimum = min(max(minimum, 2), static)
	hpa := trace.DefaultHPA(minimum, static, s.HPATarget)
	hpa.Delay, hpa.Window = s.HPADelay, s.HPAWindow
	return traceSizing{static: static, min: minimum, hpa: hpa,
		wpa: load.AutoscalerSpec{MinReplicas: minimum, MaxReplicas: static, TargetSpare: int32(s.Spare), ScaleDownWindow: s.ScaleDownWindow,
			ScaleDownMaxStep: s.ScaleDownMaxStep, ScaleDownPeriod: s.ScaleDownPeriod}}
}

// settings says how an arm of policy is set up, for the report.
func (z traceSizing) settings(policy string) string {
	switch policy {
	case report.PolicyHPA:
		h := z.hpa
		return fmt.Sprintf("HPA on the claim rate: min %d, max %d, target %g claims/s per member, sync %s, rate over %s seen %s late",
			h.MinReplicas, h.MaxReplicas, h.Target, h.Sync, h.Window, h.Delay)
	case report.PolicyAutoscaler:
		settings := fmt.Sprintf("WarmPoolAutoscaler: min %d, max %d, targetSpare %d", z.wpa.MinReplicas, z.wpa.MaxReplicas, z.wpa.TargetSpare)
		if w := z.wpa.ScaleDownWindow; w > 0 {
			settings += fmt.Sprintf(", scale-down window %s", w)
		}
		if v := z.wpa.ScaleDownMaxStep; v != "" {
			settings += fmt.Sprintf(", scale-down step %s", v)
		}
		if p := z.wpa.ScaleDownPeriod; p > 0 {
			settings += fmt.Sprintf(" every %s", p)
		}
		return settings
	}
	return fmt.Sprintf("a pool of %d", z.static)
}

// traceDemandBin is the width of the demand's bins in the report and its picture.
const traceDemandBin = 5 * time.Second

// runTrace generates the trace, writes it as CSV into the results directory, and replays it
// against each policy of --trace-policies, each on a fresh cluster.
func runTrace(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	s := traceFlags
	shape, err := s.shape()
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	tr, err := trace.Generate(shape)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	csvName := fmt.Sprintf("%s-seed%d.csv", sc.name, shape.Seed)
	if err := writeTraceCSV(filepath.Join(o.ResultsDir, csvName), tr); err != nil {
		return nil, nil, err
	}
	z := s.sizeFor(tr)
	peak, peakAt := tr.PeakWindow(s.Startup)
	logf(stderr, "trace %s\nwritten to %s; at most %d claims within %s (from %s): static pool %d, dynamic policies from %d to %d\n",
		tr, filepath.Join(o.ResultsDir, csvName), peak, s.Startup, peakAt.Round(time.Second), z.static, z.min, z.static)
	res := &report.Result{Scenario: sc.name, Description: sc.description, StartedAt: time.Now(), RefillSeconds: -1,
		Trace: &report.Trace{
			Summary: tr.String(), CSV: csvName, Seed: shape.Seed, DurationSeconds: shape.Duration.Seconds(),
			Claims: len(tr.Arrivals), Demand: tr.PerSecond(traceDemandBin), DemandBinSeconds: traceDemandBin.Seconds(),
			StartupSeconds: s.Startup.Seconds(), PeakWindowClaims: peak, Headroom: s.Headroom,
		}}
	policies, _ := s.policies() // validated with the shape
	var failed []string
	for i, policy := range policies {
		logf(stderr, "\n=== scenario %s, policy %d/%d: %s (%s)\n", sc.name, i+1, len(policies), policy, z.settings(policy))
		cfg := load.TraceConfig{
			Namespace: "bench", PodSpec: load.DefaultPodSpec(), Trace: tr, Policy: policy, Replicas: z.min,
			HPA: z.hpa, Autoscaler: z.wpa,
			PoolCreateWait: max(o.PoolCreateWait, time.Duration(z.static)*200*time.Millisecond), Timeout: max(o.Timeout, 5*time.Minute),
		}
		if policy == report.PolicyStatic {
			cfg.Replicas = z.static
		}
		arm, err := runTraceArm(ctx, o, cfg, tr, &res.Parameters, stderr)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, err
		case err != nil:
			logf(stderr, "policy %s of scenario %s failed: %v\n", policy, sc.name, err)
			failed = append(failed, fmt.Sprintf("%s (%s): %v", sc.name, policy, err))
			arm = &report.TraceArm{Policy: policy, Error: firstLine(err.Error())}
		case !arm.Result.OK():
			c := arm.Result.Claims
			failed = append(failed, fmt.Sprintf("%s (%s): %d claims never Ready, %d create errors", sc.name, policy, c.NeverReady, c.CreateErrors))
		}
		arm.Settings = z.settings(policy)
		res.Trace.Arms = append(res.Trace.Arms, *arm)
	}
	if err := report.WriteTraceText(stdout, res); err != nil {
		return nil, nil, err
	}
	names, err := report.WritePlots(o.ResultsDir, res)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		logf(stderr, "wrote %s\n", filepath.Join(o.ResultsDir, name))
	}
	return res, failed, nil
}

// runTraceArm starts a fresh local cluster with the operator on the trace profile, runs cfg
// and stops the cluster; params gets where it ran.
func runTraceArm(ctx context.Context, o Options, cfg load.TraceConfig, tr *trace.Trace, params *report.Parameters, progress io.Writer) (_ *report.TraceArm, retErr error) {
	o.Profile = controlplane.Profile(traceFlags.Profile)
	alive := int(cfg.HPA.MaxReplicas) + tr.MaxConcurrent(10*time.Second)
	env, err := startEnv(ctx, o, max(controlplane.DefaultNodes, alive/800+1), progress)
	if err != nil {
		return nil, err
	}
	defer stopEnv(env, progress, &retErr)
	if env.Cluster == nil || env.Operator == nil || !env.Webhooks {
		return nil, errors.New("a trace run needs the operator and its webhooks in the local cluster")
	}
	p := report.Parameters{Namespace: cfg.Namespace, Template: "built-in", TimeoutSeconds: cfg.Timeout.Seconds(),
		WarmPoolSize: cfg.Replicas, OperatorCommand: env.Operator.Template}
	describeCluster(&p, env, o)
	*params = p
	params.WarmPoolSize = 0 // the arms' pools differ: each arm's result has its own
	probes := load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage, APIServerCPU: env.APIServerCPU,
		OperatorUsage: env.Operator.Usage}
	if env.Operator.MetricsURL != "" {
		probes.OperatorMetrics = env.Operator.Metrics
	}
	cfg.Progress = progress
	arm, err := load.RunTrace(ctx, env.Config, cfg, probes)
	switch {
	case meta.IsNoMatchError(err):
		return nil, err // the kind is not served: nothing in the operator's log to add
	case err != nil:
		return nil, fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
	}
	arm.Result.Parameters = p
	return arm, nil
}

// writeTraceCSV writes tr's arrivals to path.
func writeTraceCSV(path string, tr *trace.Trace) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	if err := tr.WriteCSV(f); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	return nil
}

// firstLine is the first line of s: an arm's error in a table.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
