// Command sandgate is the operator manager: it runs the Sandbox controller and, with
// --extensions, the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers, against the
// cluster of the current kubeconfig (or in-cluster config), and serves the admission webhooks
// (claim stamping, the binding guard, defaulting and validation) on --webhook-port. It parses
// and checks its flags; internal/operator builds the manager.
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
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/reconcilers"
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

// bind registers the flags, their defaults those of operator.DefaultOptions.
func (o *options) bind(fs *flag.FlagSet) {
	d := operator.DefaultOptions()
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", float64(d.QPS), "Queries per second to the API server.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", d.Burst, "Burst of queries to the API server.")
	fs.BoolVar(&o.leaderElect, "leader-elect", d.LeaderElection, "Elect a leader so that only one manager replica is active.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", d.LeaderElectionNamespace, "Namespace of the leader election Lease (default: the manager's namespace).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", d.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", d.SecureMetrics, "Serve metrics over HTTPS to authenticated and authorized clients only (a bearer token the API server accepts, allowed to get /metrics). config/default turns it on; off serves plain HTTP, as the public controller's Deployment expects.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", d.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", d.PprofBindAddress, "Address of Go's /debug/pprof profiling endpoints, for diagnosing the manager; empty (the default) disables them. Bind it to localhost: the endpoints are not authenticated.")
	fs.IntVar(&o.webhookPort, "webhook-port", d.WebhookPort, "Port of the admission webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", d.WebhookCertDir, "Directory with tls.crt and tls.key of the webhook server.")
	fs.StringVar(&o.webhookHost, "webhook-host", d.WebhookHost, "Address the webhook server listens on (default: all interfaces).")
	fs.BoolVar(&o.selfSignedCerts, "self-signed-certs", d.SelfSignedCerts, "Write a throwaway self-signed webhook certificate (CA in memory only) into --webhook-cert-dir. For local runs only, never in production: installed clusters get theirs from cert-manager.")
	fs.StringVar(&o.operatorUser, "operator-service-account", d.OperatorUser, "User name of this manager's requests (system:serviceaccount:<namespace>:<name>); the binding guard admits bindings from it only.")
	fs.IntVar(&o.sandboxWorkers, "sandbox-concurrent-workers", d.SandboxWorkers, "Concurrent reconciles of Sandboxes.")
	fs.IntVar(&o.claimWorkers, "sandbox-claim-concurrent-workers", d.ClaimWorkers, "Concurrent reconciles of SandboxClaims.")
	fs.IntVar(&o.warmPoolWorkers, "sandbox-warm-pool-concurrent-workers", d.WarmPoolWorkers, "Concurrent reconciles of SandboxWarmPools.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", d.ClusterDomain, "Cluster DNS domain used in Sandbox status.serviceFQDN.")
	fs.BoolVar(&o.extensions, "extensions", d.Extensions, "Also run the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.")
	fs.DurationVar(&o.coldStartGrace, "cold-start-grace", d.ColdStartGrace, "How long a claim with no ready warm sandbox of its template version waits for pool members being created before it cold-starts a sandbox.")
	fs.DurationVar(&o.refillQuietPeriod, "pool-refill-quiet-period", d.Refill.QuietPeriod, "How long claims must pause before a pool replaces the members they took: replacements compete with claims for the API server. 0 replaces at once.")
	fs.IntVar(&o.refillLowWaterPercent, "pool-refill-low-water-percent", d.Refill.LowWaterPercent, "Percentage of a pool's replicas below which its ready members are replaced at once, even while claims arrive.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", d.GracefulShutdownTimeout, "How long running reconciles may take to finish on shutdown.")
	o.platformGroups = append(stringList(nil), d.PlatformGroups...)
	fs.Var(&o.platformGroups, "platform-groups", "Comma-separated groups trusted to change and delete every claim and Sandbox, and to write the operator's metadata (docs/threat-model.md).")
	o.runtimeAnnotations = append(stringList(nil), d.RefusedAnnotationPrefixes...)
	fs.Var(&o.runtimeAnnotations, "claim-refused-annotation-prefixes", "Comma-separated annotation prefixes a claim's additionalPodMetadata may not use: the container runtimes' option annotations.")
	fs.BoolVar(&o.restamp, "restamp", !d.RefuseRestamp, "Restamp a claim whose stamped template version is gone (no member of it left, the template changed) to the current version, visibly (ClaimRestamped event, Ready reason Restamped); false leaves such a claim Ready=False with reason StampedVersionGone.")
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

// operatorOptions are the options of the flags.
func (o *options) operatorOptions() operator.Options {
	return operator.Options{
		QPS:                       float32(o.kubeAPIQPS),
		Burst:                     o.kubeAPIBurst,
		LeaderElection:            o.leaderElect,
		LeaderElectionNamespace:   o.leaderElectionNamespace,
		MetricsBindAddress:        o.metricsAddr,
		SecureMetrics:             o.metricsSecure,
		HealthProbeBindAddress:    o.probeAddr,
		PprofBindAddress:          o.pprofAddr,
		WebhookHost:               o.webhookHost,
		WebhookPort:               o.webhookPort,
		WebhookCertDir:            o.webhookCertDir,
		SelfSignedCerts:           o.selfSignedCerts,
		OperatorUser:              o.operatorUser,
		PlatformGroups:            o.platformGroups,
		RefusedAnnotationPrefixes: o.runtimeAnnotations,
		SandboxWorkers:            o.sandboxWorkers,
		ClaimWorkers:              o.claimWorkers,
		WarmPoolWorkers:           o.warmPoolWorkers,
		ClusterDomain:             o.clusterDomain,
		Extensions:                o.extensions,
		ColdStartGrace:            o.coldStartGrace,
		Refill:                    reconcilers.RefillPolicy{QuietPeriod: o.refillQuietPeriod, LowWaterPercent: o.refillLowWaterPercent},
		RefuseRestamp:             !o.restamp,
		GracefulShutdownTimeout:   o.gracefulShutdownTimeout,
	}
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
	if err := run(opts.operatorOptions()); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(opts operator.Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	op, err := operator.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager", "extensions", opts.Extensions, "leaderElection", opts.LeaderElection)
	return op.Start(ctx)
}
