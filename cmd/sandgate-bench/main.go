// Command sandgate-bench is sandgate's load generator. It creates a SandboxTemplate and a
// SandboxWarmPool, waits for the pool to be full and Ready, fires bursts of SandboxClaims at
// a given rate, watches them to Ready and reports startup latency (client and server view),
// warm hits and cold starts, API requests by verb, resource and code (409s singled out),
// reconciles, and the operator's CPU and memory.
//
// By default it starts a local control plane with simulated nodes (cmd/controlplane) and runs
// the operator it builds from ./cmd/sandgate as a child process; --kubeconfig targets an
// existing cluster instead, and --operator-cmd runs any operator binary, so the same harness
// measures another implementation of the API:
//
//	go run ./cmd/sandgate-bench --burst-size 300 --qps 300 --total-bursts 1 --warmpool-size 600
//	go run ./cmd/sandgate-bench --serial 50 --warmpool-size 60 --json serial.json
//	go run ./cmd/sandgate-bench --scenarios all --out docs/performance.md   # what `make bench` runs
//
// The exit status is 1 when a claim did not become Ready within --timeout. Everything talks
// to 127.0.0.1 only and stops by itself; Ctrl-C stops the cluster and the operator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sandgate-dev/sandgate/test/bench/harness"
	"github.com/sandgate-dev/sandgate/test/bench/load"
	"github.com/sandgate-dev/sandgate/test/bench/report"
	"github.com/sandgate-dev/sandgate/test/controlplane"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errFailedClaims):
		fmt.Fprintf(os.Stderr, "sandgate-bench: %v\n", err)
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "sandgate-bench: %v\n", err)
		os.Exit(2)
	}
}

// logf prints a progress line. Progress is best effort: a closed terminal must not fail a
// run whose results go to --json.
func logf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }

// errFailedClaims marks a run that completed with claims that never became Ready.
var errFailedClaims = errors.New("claims failed")

// options are the command line.
type options struct {
	burstSize      int
	qps            float64
	totalBursts    int
	serial         int
	warmPoolSize   int
	namespace      string
	template       string
	poolCreateWait time.Duration
	timeout        time.Duration
	refillWait     time.Duration
	kubeconfig     string
	operatorCmd    string
	nodes          int
	profile        string
	jsonPath       string
	webhooks       bool
	serveV1alpha1  bool
	cpuProfile     string
	profileSeconds int
	floor          bool
	floorAdmission bool

	scenarios  string
	scalePool  int
	out        string
	resultsDir string
	render     bool
	skipFloor  bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sandgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		logf(stderr, "Usage: sandgate-bench [flags]\n\nLoad generator for the SandboxClaim path (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.burstSize, "burst-size", 10, "claims per burst")
	fs.Float64Var(&o.qps, "qps", 10, "rate at which a burst's claims are created, per second")
	fs.IntVar(&o.totalBursts, "total-bursts", 1, "number of bursts; each waits for the previous one's claims to be Ready")
	fs.IntVar(&o.serial, "serial", 0, "create N claims one at a time, each after the previous is Ready (same as --burst-size 1 --total-bursts N)")
	fs.IntVar(&o.warmPoolSize, "warmpool-size", 20, "replicas of the warm pool")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the run (created; default bench-<time>)")
	fs.StringVar(&o.template, "template", "", "YAML or JSON file with the pod spec of the template (default: one container, image registry.example/agent:1)")
	fs.DurationVar(&o.poolCreateWait, "pool-create-wait", 10*time.Minute, "how long to wait for the pool to be full and Ready before the run")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long a burst's claims may take to become Ready")
	fs.DurationVar(&o.refillWait, "refill-wait", 2*time.Minute, "how long to wait after the run for the pool to be full again (its requests are counted)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of an existing cluster (an admin: the API server's /metrics is read); default: start a local control plane")
	fs.StringVar(&o.operatorCmd, "operator-cmd", "",
		"command line of the operator to run, with placeholders {{kubeconfig}} {{webhook-host}} {{webhook-port}} {{webhook-cert-dir}} {{metrics-port}} {{probe-port}}; "+
			"default: build ./cmd/sandgate and run it (local cluster), none with --kubeconfig; \"none\" runs no operator")
	fs.IntVar(&o.nodes, "nodes", 0, "simulated nodes of the local cluster (default: enough for the pool and the claims)")
	fs.StringVar(&o.profile, "profile", string(controlplane.ProfileFast), "how the local cluster's pods become Ready: fast or kubelet")
	fs.BoolVar(&o.webhooks, "webhooks", true, "install config/webhook in the local cluster; --webhooks=false for an operator that serves none")
	fs.BoolVar(&o.serveV1alpha1, "serve-v1alpha1", true, "serve the deprecated v1alpha1 of the CRDs in the local cluster, as config/default does; --serve-v1alpha1=false serves v1beta1 only, as config/v1beta1-only does")
	fs.StringVar(&o.cpuProfile, "apiserver-profile", "", "write a CPU profile of kube-apiserver over the start of the run to this file (go tool pprof reads it)")
	fs.IntVar(&o.profileSeconds, "apiserver-profile-seconds", 10, "length of the --apiserver-profile")
	fs.BoolVar(&o.floor, "floor", false, "measure the API server's floor instead of the operator: the operator fills the pool and is stopped, its webhooks removed, and the load generator makes each claim's three writes itself (local cluster only)")
	fs.BoolVar(&o.floorAdmission, "floor-admission", false, "with --floor: keep the operator's webhook configurations and answer every admission call at once from the load generator, allowing it (a claim's create gets webhook-first-observed-at): the floor of an API guarded by admission webhooks, their round trips included, no decision in them")
	fs.StringVar(&o.jsonPath, "json", "", "also write the result as JSON to this file")
	fs.StringVar(&o.scenarios, "scenarios", "", "run canonical scenarios instead (each on a fresh local cluster): all, or a comma-separated list of "+strings.Join(scenarioNames(), ", "))
	fs.IntVar(&o.scalePool, "scale-pool", 5000, "pool size of the large scale scenario")
	fs.StringVar(&o.out, "out", "", "with --scenarios: write the markdown report (docs/performance.md) from the results")
	fs.StringVar(&o.resultsDir, "results-dir", "bin/bench", "with --scenarios: where the JSON results of each scenario are written and read")
	fs.BoolVar(&o.render, "render", false, "with --scenarios and --out: only rewrite the report from the JSON results already in --results-dir")
	fs.BoolVar(&o.skipFloor, "skip-floor", false, "with --scenarios: do not measure each scenario's floor (faster; the report then has no ratios)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if o.serial > 0 {
		o.burstSize, o.totalBursts = 1, o.serial
	}
	var errs []error
	if o.burstSize < 1 || o.totalBursts < 1 {
		errs = append(errs, errors.New("--burst-size and --total-bursts must be at least 1"))
	}
	if o.qps <= 0 {
		errs = append(errs, errors.New("--qps must be positive"))
	}
	if o.warmPoolSize < 0 {
		errs = append(errs, errors.New("--warmpool-size must not be negative"))
	}
	if o.profile != string(controlplane.ProfileFast) && o.profile != string(controlplane.ProfileKubelet) {
		errs = append(errs, fmt.Errorf("--profile must be fast or kubelet, got %q", o.profile))
	}
	if o.render && (o.scenarios == "" || o.out == "") {
		errs = append(errs, errors.New("--render needs --scenarios and --out"))
	}
	if o.scenarios != "" && o.kubeconfig != "" {
		errs = append(errs, errors.New("--scenarios runs on fresh local clusters; it does not take --kubeconfig"))
	}
	if o.floorAdmission && !o.floor {
		errs = append(errs, errors.New("--floor-admission needs --floor"))
	}
	if o.floor && (o.kubeconfig != "" || o.operatorCmd == "none" || !o.webhooks || o.scenarios != "") {
		errs = append(errs, errors.New("--floor needs the local cluster with an operator filling the pool and its webhooks installed (no --kubeconfig, --operator-cmd none, --webhooks=false or --scenarios: scenarios measure their floors themselves)"))
	}
	return o, errors.Join(errs...)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.scenarios != "" {
		return runScenarios(ctx, o, stdout, stderr)
	}
	podSpec, templateName := load.DefaultPodSpec(), "built-in"
	if o.template != "" {
		if podSpec, err = load.ReadPodSpec(o.template); err != nil {
			return err
		}
		templateName = o.template
	}
	res, err := runOnce(ctx, o, podSpec, templateName, stderr)
	if err != nil {
		return err
	}
	if err := report.WriteText(stdout, res); err != nil {
		return err
	}
	if o.jsonPath != "" {
		if err := res.WriteJSON(o.jsonPath); err != nil {
			return err
		}
	}
	if !res.OK() {
		return fmt.Errorf("%w: %d never Ready within %s, %d create errors, %d on a stale template",
			errFailedClaims, res.Claims.NeverReady, o.timeout, res.Claims.CreateErrors, res.Claims.Stale)
	}
	return nil
}

// runOnce starts the environment, runs the load and stops the environment.
func runOnce(ctx context.Context, o options, podSpec corev1.PodSpec, templateName string, progress io.Writer) (_ *report.Result, retErr error) {
	claims := o.burstSize * o.totalBursts
	nodes := o.nodes
	if nodes == 0 {
		// The simulated nodes take 1000 pods each; keep headroom for cold starts.
		nodes = max(controlplane.DefaultNodes, (o.warmPoolSize+claims)/800+1)
	}
	env, err := harness.Start(ctx, harness.Options{
		Kubeconfig:      o.kubeconfig,
		Nodes:           nodes,
		Profile:         controlplane.Profile(o.profile),
		OperatorCommand: o.operatorCmd,
		NoWebhooks:      !o.webhooks,
		V1beta1Only:     !o.serveV1alpha1,
		FloorAdmission:  o.floorAdmission,
		Log:             progress,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf(progress, "stopping...\n")
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	ns := o.namespace
	if ns == "" {
		ns = "bench-" + time.Now().Format("150405")
	}
	probes := load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage}
	params := report.Parameters{
		BurstSize: o.burstSize, QPS: o.qps, TotalBursts: o.totalBursts, WarmPoolSize: int32(o.warmPoolSize),
		Namespace: ns, Template: templateName, TimeoutSeconds: o.timeout.Seconds(), Floor: o.floor,
		FloorAdmission: o.floorAdmission,
	}
	if env.Cluster != nil {
		params.Cluster = "local control plane " + controlplane.KubernetesVersion
		params.Profile, params.Nodes = string(env.Cluster.Profile), len(env.Cluster.NodeNames)
		if !env.Webhooks {
			params.Cluster += " without webhooks"
		}
		if !o.serveV1alpha1 {
			params.Cluster += ", v1beta1 served only"
		}
		probes.APIServerCPU = env.APIServerCPU
	} else {
		params.Cluster = env.Config.Host
	}
	if env.Operator != nil {
		op := env.Operator
		params.OperatorCommand = op.Template
		// The floor stops the operator before the claims: nothing of it to measure.
		if !o.floor {
			probes.OperatorUsage = op.Usage
			if op.MetricsURL != "" {
				probes.OperatorMetrics = op.Metrics
			}
		}
	}
	if o.floor {
		if env.Operator == nil || !env.Webhooks {
			return nil, errors.New("the floor needs an operator to fill the pool and its webhooks installed")
		}
		probes.DetachOperator = env.DetachOperator
	}
	res, err := load.Run(ctx, env.Config, load.Config{
		Namespace:        ns,
		PodSpec:          podSpec,
		WarmPoolSize:     int32(o.warmPoolSize),
		BurstSize:        o.burstSize,
		TotalBursts:      o.totalBursts,
		QPS:              o.qps,
		PoolCreateWait:   o.poolCreateWait,
		Timeout:          o.timeout,
		RefillWait:       o.refillWait,
		Progress:         progress,
		APIServerProfile: o.cpuProfile,
		ProfileSeconds:   o.profileSeconds,
		Floor:            o.floor,
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
