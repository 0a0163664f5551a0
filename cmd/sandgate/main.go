// Command sandgate is the operator manager: it runs the Sandbox controller and, with
// --extensions, the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers, against the
// cluster of the current kubeconfig (or in-cluster config), and serves the admission webhooks
// (claim stamping, the binding guard, defaulting and validation) on --webhook-port.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// options are the manager's flags. Names match the public agent-sandbox controller where the
// meaning is the same, so existing Deployments keep working.
type options struct {
	kubeAPIQPS              float64
	kubeAPIBurst            int
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	pprofAddr               string
	webhookPort             int
	webhookCertDir          string
	webhookHost             string
	selfSignedCerts         bool
	operatorUser            string
	sandboxWorkers          int
	claimWorkers            int
	warmPoolWorkers         int
	clusterDomain           string
	extensions              bool
	coldStartGrace          time.Duration
	refillQuietPeriod       time.Duration
	refillLowWaterPercent   int
	gracefulShutdownTimeout time.Duration
	platformGroups          stringList
	runtimeAnnotations      stringList
	restamp                 bool
}

// stringList is a comma-separated flag value.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 1000, "Queries per second to the API server.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 2000, "Burst of queries to the API server.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one manager replica is active.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's namespace).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false, "Serve metrics over HTTPS to authenticated and authorized clients only (a bearer token the API server accepts, allowed to get /metrics). config/default turns it on; off serves plain HTTP, as the public controller's Deployment expects.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof profiling endpoints, for diagnosing the manager; empty (the default) disables them. Bind it to localhost: the endpoints are not authenticated.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the admission webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with tls.crt and tls.key of the webhook server.")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the webhook server listens on (default: all interfaces).")
	fs.BoolVar(&o.selfSignedCerts, "self-signed-certs", false, "Write a throwaway self-signed webhook certificate (CA in memory only) into --webhook-cert-dir. For local runs only, never in production: installed clusters get theirs from cert-manager.")
	fs.StringVar(&o.operatorUser, "operator-service-account", webhooks.DefaultOperatorUser, "User name of this manager's requests (system:serviceaccount:<namespace>:<name>); the binding guard admits bindings from it only.")
	fs.IntVar(&o.sandboxWorkers, "sandbox-concurrent-workers", 10, "Concurrent reconciles of Sandboxes.")
	fs.IntVar(&o.claimWorkers, "sandbox-claim-concurrent-workers", 64, "Concurrent reconciles of SandboxClaims.")
	fs.IntVar(&o.warmPoolWorkers, "sandbox-warm-pool-concurrent-workers", 4, "Concurrent reconciles of SandboxWarmPools.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "Cluster DNS domain used in Sandbox status.serviceFQDN.")
	fs.BoolVar(&o.extensions, "extensions", false, "Also run the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.")
	fs.DurationVar(&o.coldStartGrace, "cold-start-grace", reconcilers.DefaultColdStartGrace, "How long a claim with no ready warm sandbox of its template version waits for pool members being created before it cold-starts a sandbox.")
	fs.DurationVar(&o.refillQuietPeriod, "pool-refill-quiet-period", reconcilers.DefaultRefillQuietPeriod, "How long claims must pause before a pool replaces the members they took: replacements compete with claims for the API server. 0 replaces at once.")
	fs.IntVar(&o.refillLowWaterPercent, "pool-refill-low-water-percent", reconcilers.DefaultRefillLowWaterPercent, "Percentage of a pool's replicas below which its ready members are replaced at once, even while claims arrive.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown.")
	o.platformGroups = append(stringList(nil), webhooks.DefaultPlatformGroups...)
	fs.Var(&o.platformGroups, "platform-groups", "Comma-separated groups trusted to change and delete every claim and Sandbox, and to write the operator's metadata (docs/threat-model.md).")
	o.runtimeAnnotations = append(stringList(nil), policy.DefaultRuntimeAnnotationPrefixes...)
	fs.Var(&o.runtimeAnnotations, "claim-refused-annotation-prefixes", "Comma-separated annotation prefixes a claim's additionalPodMetadata may not use: the container runtimes' option annotations.")
	fs.BoolVar(&o.restamp, "restamp", true, "Restamp a claim whose stamped template version is gone (no member of it left, the template changed) to the current version, visibly (ClaimRestamped event, Ready reason Restamped); false leaves such a claim Ready=False with reason StampedVersionGone.")
}

func (o *options) validate() error {
	var errs []error
	if o.kubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.kubeAPIQPS))
	}
	if o.kubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be positive, got %d", o.kubeAPIBurst))
	}
	for name, v := range map[string]int{
		"--sandbox-concurrent-workers":           o.sandboxWorkers,
		"--sandbox-claim-concurrent-workers":     o.claimWorkers,
		"--sandbox-warm-pool-concurrent-workers": o.warmPoolWorkers,
	} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, v))
		}
	}
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be a TCP port, got %d", o.webhookPort))
	}
	if o.operatorUser == "" {
		errs = append(errs, errors.New("--operator-service-account must not be empty"))
	}
	if o.refillQuietPeriod < 0 {
		errs = append(errs, fmt.Errorf("--pool-refill-quiet-period must not be negative, got %s", o.refillQuietPeriod))
	}
	if o.refillLowWaterPercent < 0 || o.refillLowWaterPercent > 100 {
		errs = append(errs, fmt.Errorf("--pool-refill-low-water-percent must be between 0 and 100, got %d", o.refillLowWaterPercent))
	}
	if o.coldStartGrace < 0 {
		errs = append(errs, fmt.Errorf("--cold-start-grace must not be negative, got %s", o.coldStartGrace))
	}
	if len(o.platformGroups) == 0 {
		errs = append(errs, errors.New("--platform-groups must name at least one group"))
	}
	if o.clusterDomain == "" {
		errs = append(errs, errors.New("--cluster-domain must not be empty"))
	}
	return errors.Join(errs...)
}

func main() {
	var opts options
	opts.bind(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := opts.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	policy.SetRuntimeAnnotationPrefixes(opts.runtimeAnnotations)
	if err := run(opts); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(opts options) error {
	log := ctrl.Log.WithName("setup")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS = float32(opts.kubeAPIQPS)
	cfg.Burst = opts.kubeAPIBurst

	metrics, err := reconcilers.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	webhookSrv, certWatcher, err := webhookServer(opts, log)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  api.NewScheme(),
		Cache:                   reconcilers.CacheOptions(),
		NewClient:               reconcilers.NewClientFunc(metrics),
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.probeAddr,
		PprofBindAddress:        opts.pprofAddr,
		LeaderElection:          opts.leaderElect,
		LeaderElectionID:        "sandgate.agents.x-k8s.io",
		LeaderElectionNamespace: opts.leaderElectionNamespace,
		// The manager exits on its own after losing the lease; releasing it on a clean stop lets
		// the next replica take over at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &opts.gracefulShutdownTimeout,
		WebhookServer:                 webhookSrv,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := setupWebhooks(mgr, opts, certWatcher); err != nil {
		return err
	}

	ctx := ctrl.SetupSignalHandler()
	if err := reconcilers.Setup(ctx, mgr, reconcilers.Config{
		Metrics:         metrics,
		ClusterDomain:   opts.clusterDomain,
		SandboxWorkers:  opts.sandboxWorkers,
		Extensions:      opts.extensions,
		ColdStartGrace:  opts.coldStartGrace,
		Refill:          reconcilers.RefillPolicy{QuietPeriod: opts.refillQuietPeriod, LowWaterPercent: opts.refillLowWaterPercent},
		WarmPoolWorkers: opts.warmPoolWorkers,
		ClaimWorkers:    opts.claimWorkers,
		RefuseRestamp:   !opts.restamp,
	}); err != nil {
		return err
	}

	log.Info("starting manager", "extensions", opts.extensions, "leaderElection", opts.leaderElect)
	return mgr.Start(ctx)
}
