package performance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// logf prints a progress line. Progress is best effort: a closed terminal must not fail a
// run whose results go to --json.
func logf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }

// ErrFailedClaims marks a run that completed with claims that never became Ready.
var ErrFailedClaims = errors.New("claims failed")

// Options are what sandgate-bench runs: one load run, or the canonical scenarios when
// Scenarios is set. Each field is the command-line flag named in its comment (AddFlags); the
// flags' help tells more.
type Options struct {
	BurstSize      int                     // --burst-size: claims per burst
	QPS            float64                 // --qps: rate at which a burst's claims are created
	TotalBursts    int                     // --total-bursts
	Serial         int                     // --serial N: BurstSize 1 and TotalBursts N, whatever they say
	WarmPoolSize   int                     // --warmpool-size
	Namespace      string                  // --namespace; "" means bench-<time>
	Template       string                  // --template: file with the template's pod spec; "" means built-in
	PoolCreateWait time.Duration           // --pool-create-wait
	Timeout        time.Duration           // --timeout: how long a burst's claims may take to be Ready
	BurstPause     time.Duration           // --burst-pause: wait after a burst's last Ready before the next
	Autoscaler     *load.AutoscalerSpec    // a WarmPoolAutoscaler on the pool (rapid-burst's --rapid-burst-autoscaler)
	RefillWait     time.Duration           // --refill-wait
	Kubeconfig     string                  // --kubeconfig of an existing cluster; "" starts a local one
	OperatorCmd    string                  // --operator-cmd (see harness.Options.OperatorCommand)
	Nodes          int                     // --nodes of the local cluster; 0 means enough for the run
	FeatureGates   string                  // --apiserver-feature-gates of the local cluster's kube-apiserver
	Profile        controlplane.Profile    // --profile of the local cluster's pods
	PodStartup     controlplane.PodStartup // --pod-startup-median, -p99, -seed of --profile realistic
	JSONPath       string                  // --json: also write the result there
	Webhooks       bool                    // --webhooks: install config/webhook in the local cluster
	ServeV1alpha1  bool                    // --serve-v1alpha1
	CPUProfile     string                  // --apiserver-profile
	ProfileSeconds int                     // --apiserver-profile-seconds
	WebhookProfile string                  // --webhook-server-profile: with --apiserver-profile, the webhook server's CPU profile
	Floor          bool                    // --floor
	FloorAdmission bool                    // --floor-admission
	// FloorClaimRate, with FloorAdmission, makes the stand-in admit claim creates at this
	// rate a second and refuse the rest with 429 (the overload scenario's contract floor past
	// the sustainable rate; harness.Options.FloorClaimAdmissionRate).
	FloorClaimRate float64
	FloorRoute     bool // --floor-route: the floor makes sandgate's route write too
	LightFloor     bool // --light-floor: the floor on minimal members; implies Floor
	StandInInProc  bool // --stand-in-in-process: the floor's webhooks answered from the load generator's process

	Scenarios  string // --scenarios: all or a comma-separated list (ScenarioNames)
	ScalePool  int    // --scale-pool: pool size of the large scale scenario
	Out        string // --out: the markdown report
	ResultsDir string // --results-dir of the scenarios' JSON results
	Render     bool   // --render: only rewrite Out from the results in ResultsDir
	Splice     bool   // --splice: replace only the sections of Out that stand apart (report.SplicedSections)
	SkipFloor  bool   // --skip-floor
	Rounds     int    // --rounds: rounds of each scenario measured in rounds; 0 means its default
}

// DefaultOptions returns the options of sandgate-bench without flags.
func DefaultOptions() Options {
	return Options{
		BurstSize: 10, QPS: 10, TotalBursts: 1, WarmPoolSize: 20,
		PoolCreateWait: 10 * time.Minute, Timeout: 2 * time.Minute, RefillWait: 2 * time.Minute,
		Profile: controlplane.ProfileFast, Webhooks: true, ServeV1alpha1: true, ProfileSeconds: 10,
		ScalePool: 5000, ResultsDir: "bin/bench",
	}
}

// armProfiles are the CPU profiles of one arm of a scenario that runs several clusters:
// --apiserver-profile and --webhook-server-profile with ".<arm>" appended, each over the whole
// of the arm's arrivals at least; "" and 0 without --apiserver-profile.
func (o Options) armProfiles(arm string, arrivals time.Duration) (apiServer, webhookServer string, seconds int) {
	if o.CPUProfile == "" {
		return "", "", 0
	}
	if o.WebhookProfile != "" {
		webhookServer = o.WebhookProfile + "." + arm
	}
	return o.CPUProfile + "." + arm, webhookServer, max(o.ProfileSeconds, int(arrivals.Seconds()))
}

// resolved applies Serial and LightFloor.
func (o Options) resolved() Options {
	if o.Serial > 0 {
		o.BurstSize, o.TotalBursts = 1, o.Serial
	}
	if o.LightFloor {
		o.Floor = true
	}
	return o
}

// Validate reports every option that is out of range or contradicts another, by flag.
func (o Options) Validate() error {
	o = o.resolved()
	var errs []error
	if o.BurstSize < 1 || o.TotalBursts < 1 {
		errs = append(errs, errors.New("--burst-size and --total-bursts must be at least 1"))
	}
	if o.QPS <= 0 {
		errs = append(errs, errors.New("--qps must be positive"))
	}
	if o.WarmPoolSize < 0 {
		errs = append(errs, errors.New("--warmpool-size must not be negative"))
	}
	// The scenarios choose their own profiles: the start-up times are those of the realistic ones.
	startupProfile := o.Profile
	if o.Scenarios != "" {
		startupProfile = controlplane.ProfileRealistic
	}
	if err := controlplane.CheckProfile(o.Profile, controlplane.PodStartup{}); err != nil {
		errs = append(errs, fmt.Errorf("--profile: %w", err))
	} else if err := controlplane.CheckProfile(startupProfile, o.PodStartup); err != nil {
		errs = append(errs, fmt.Errorf("--pod-startup-*: %w", err))
	}
	if o.BurstPause < 0 {
		errs = append(errs, errors.New("--burst-pause must not be negative"))
	}
	if o.Rounds < 0 {
		errs = append(errs, errors.New("--rounds must not be negative"))
	}
	if o.Render && (o.Scenarios == "" || o.Out == "") {
		errs = append(errs, errors.New("--render needs --scenarios and --out"))
	}
	if o.Splice && (o.Scenarios == "" || o.Out == "") {
		errs = append(errs, errors.New("--splice needs --scenarios and --out (the report to splice into)"))
	}
	if o.Scenarios != "" && o.Kubeconfig != "" {
		errs = append(errs, errors.New("--scenarios runs on fresh local clusters; it does not take --kubeconfig"))
	}
	if o.FloorAdmission && !o.Floor {
		errs = append(errs, errors.New("--floor-admission needs --floor or --light-floor"))
	}
	if o.FloorRoute && (!o.Floor || o.LightFloor || o.WarmPoolSize == 0) {
		errs = append(errs, errors.New("--floor-route routes the pods of the operator's warm members: it needs --floor and a --warmpool-size, not --light-floor"))
	}
	if o.LightFloor && o.WarmPoolSize < o.BurstSize*o.TotalBursts {
		errs = append(errs, errors.New("--light-floor makes --warmpool-size members and binds one per claim: it needs at least as many as claims"))
	}
	if o.Floor && (o.Kubeconfig != "" || o.OperatorCmd == "none" || !o.Webhooks || o.Scenarios != "") {
		errs = append(errs, errors.New("--floor needs the local cluster with an operator filling the pool and its webhooks installed (no --kubeconfig, --operator-cmd none, --webhooks=false or --scenarios: scenarios measure their floors themselves)"))
	}
	return errors.Join(errs...)
}

// Run runs what o asks for: the canonical scenarios, or one load run whose result goes to
// stdout as a table (and to o.JSONPath as JSON), progress to stderr. It returns an error
// wrapping ErrFailedClaims when the run completed but claims failed.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.resolved()
	if o.Scenarios != "" {
		return runScenarios(ctx, o, stdout, stderr)
	}
	podSpec, templateName := load.DefaultPodSpec(), "built-in"
	var err error
	if o.Template != "" {
		if podSpec, err = load.ReadPodSpec(o.Template); err != nil {
			return err
		}
		templateName = o.Template
	}
	res, err := runOnce(ctx, o, podSpec, templateName, stderr)
	if err != nil {
		return err
	}
	if err := report.WriteText(stdout, res); err != nil {
		return err
	}
	if o.JSONPath != "" {
		if err := res.WriteJSON(o.JSONPath); err != nil {
			return err
		}
	}
	if !res.OK() {
		return fmt.Errorf("%w: %d never Ready within %s, %d create errors, %d on a stale template",
			ErrFailedClaims, res.Claims.NeverReady, o.Timeout, res.Claims.CreateErrors, res.Claims.Stale)
	}
	return nil
}

// startEnv starts the environment of a run of o, a local cluster of nodes simulated nodes
// unless o names a kubeconfig; stopEnv stops it.
func startEnv(ctx context.Context, o Options, nodes int, progress io.Writer) (*harness.Env, error) {
	standIn := ""
	if o.Floor && !o.StandInInProc && o.Kubeconfig == "" {
		exe, err := harness.StandInExecutable()
		if err != nil {
			return nil, err
		}
		standIn = exe
	}
	return harness.Start(ctx, harness.Options{
		StandInExecutable:       standIn,
		OperatorPprof:           o.WebhookProfile != "",
		Kubeconfig:              o.Kubeconfig,
		Nodes:                   nodes,
		Profile:                 o.Profile,
		PodStartup:              o.PodStartup,
		OperatorCommand:         o.OperatorCmd,
		FeatureGates:            o.FeatureGates,
		NoWebhooks:              !o.Webhooks,
		V1beta1Only:             !o.ServeV1alpha1,
		FloorAdmission:          o.FloorAdmission,
		FloorClaimAdmissionRate: o.FloorClaimRate,
		Log:                     progress,
	})
}

// standInProbes sets the probes of a floor run's stand-in webhooks on env.
func standInProbes(env *harness.Env, probes *load.Probes) {
	probes.StandInMetrics = env.StandInMetrics
	if env.StandInProcess() {
		probes.StandInUsage = env.StandInUsage
	}
}

// stopEnv stops env, joining its error into *retErr: deferred by every run that startEnv
// started.
func stopEnv(env *harness.Env, progress io.Writer, retErr *error) {
	logf(progress, "stopping...\n")
	if err := env.Stop(); err != nil {
		*retErr = errors.Join(*retErr, err)
	}
}

// describeCluster fills in where a run of o on env ran: the local control plane's version,
// pod profile and nodes and what its CRDs serve, or the address of a cluster it did not start.
func describeCluster(params *report.Parameters, env *harness.Env, o Options) {
	if env.Cluster == nil {
		params.Cluster = env.Config.Host
		return
	}
	params.Cluster = "local control plane " + controlplane.KubernetesVersion
	params.Profile, params.Nodes = string(env.Cluster.Profile), len(env.Cluster.NodeNames)
	if s := env.Cluster.PodStartup; env.Cluster.Profile == controlplane.ProfileRealistic {
		params.PodStartup = &report.PodStartup{MedianSeconds: s.Median.Seconds(), P99Seconds: s.P99.Seconds(), Seed: s.Seed}
	}
	if !env.Webhooks {
		params.Cluster += " without webhooks"
	}
	if !o.ServeV1alpha1 {
		params.Cluster += ", v1beta1 served only"
	}
}

// runOnce starts the environment, runs the load and stops the environment.
func runOnce(ctx context.Context, o Options, podSpec corev1.PodSpec, templateName string, progress io.Writer) (_ *report.Result, retErr error) {
	if o.LightFloor {
		o.Floor = true // whoever set it: the light floor detaches the operator as the floor does
	}
	claims := o.BurstSize * o.TotalBursts
	nodes := o.Nodes
	if nodes == 0 {
		// The simulated nodes take 1000 pods each; keep headroom for cold starts.
		nodes = max(controlplane.DefaultNodes, (o.WarmPoolSize+claims)/800+1)
	}
	env, err := startEnv(ctx, o, nodes, progress)
	if err != nil {
		return nil, err
	}
	defer stopEnv(env, progress, &retErr)
	ns := o.Namespace
	if ns == "" {
		ns = "bench-" + time.Now().Format("150405")
	}
	probes := load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage}
	params := report.Parameters{
		BurstSize: o.BurstSize, QPS: o.QPS, TotalBursts: o.TotalBursts, WarmPoolSize: int32(o.WarmPoolSize),
		Namespace: ns, Template: templateName, TimeoutSeconds: o.Timeout.Seconds(), Floor: o.Floor,
		FloorAdmission: o.FloorAdmission, FloorRoute: o.FloorRoute, StandInInProcess: o.Floor && o.StandInInProc,
	}
	params.LightFloor = o.LightFloor
	describeCluster(&params, env, o)
	if env.Cluster != nil {
		probes.APIServerCPU = env.APIServerCPU
	}
	if env.Operator != nil {
		op := env.Operator
		params.OperatorCommand = op.Template
		// The floor stops the operator before the claims: nothing of it to measure.
		if !o.Floor {
			probes.OperatorUsage = op.Usage
			if op.MetricsURL != "" {
				probes.OperatorMetrics = op.Metrics
			}
		}
	}
	if o.Floor {
		if env.Operator == nil || !env.Webhooks {
			return nil, errors.New("the floor needs an operator to fill the pool and its webhooks installed")
		}
		probes.DetachOperator = env.DetachOperator
		standInProbes(env, &probes)
	}
	probes.ProfileWebhookServer = env.ProfileWebhookServer
	res, err := load.Run(ctx, env.Config, load.Config{
		Namespace:            ns,
		PodSpec:              podSpec,
		WarmPoolSize:         int32(o.WarmPoolSize),
		Autoscaler:           o.Autoscaler,
		BurstSize:            o.BurstSize,
		TotalBursts:          o.TotalBursts,
		QPS:                  o.QPS,
		PoolCreateWait:       o.PoolCreateWait,
		Timeout:              o.Timeout,
		BurstPause:           o.BurstPause,
		RefillWait:           o.RefillWait,
		Progress:             progress,
		APIServerProfile:     o.CPUProfile,
		WebhookServerProfile: o.WebhookProfile,
		ProfileSeconds:       o.ProfileSeconds,
		Floor:                o.Floor,
		LightFloor:           o.LightFloor,
		FloorRoute:           o.FloorRoute,
	}, probes)
	if err != nil {
		if env.Operator != nil {
			err = fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
		}
		return nil, err
	}
	res.Parameters = params
	if env.Cluster == nil {
		// A cluster the run did not start keeps nothing of it.
		if err := load.DeleteNamespace(ctx, env.Config, ns); err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	return res, nil
}
