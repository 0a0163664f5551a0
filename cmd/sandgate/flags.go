package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/reconcilers"
)

// options are the manager's flags. Every flag of the public agent-sandbox controller is
// accepted, with its meaning where sandgate has the behaviour, so that its Deployments and
// Helm values keep working; docs/flags.md lists them all, and which ones sandgate accepts
// without acting on them.
type options struct {
	printVersion            bool
	kubeAPIQPS              float64
	kubeAPIBurst            int
	apiConnections          int
	separateWatchConnection bool
	apiEncoding             string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElection          operator.LeaderElectionTimings
	metricsAddr             string
	metricsSecure           bool
	probeAddr               string
	pprofAddr               string
	enablePprof             bool
	enablePprofDebug        bool
	pprofBlockRate          int
	pprofMutexFraction      int
	enableTracing           bool
	webhookPort             int
	webhookCertDir          string
	webhookHost             string
	selfSignedCerts         bool
	operatorUser            string
	sandboxWorkers          int
	claimWorkers            int
	warmPoolWorkers         int
	templateWorkers         int
	clusterDomain           string
	extensions              bool
	coldStartGrace          time.Duration
	claimReservationTTL     time.Duration
	claimAdmissionMaxWait   time.Duration
	refillQuietPeriod       time.Duration
	refillLowWaterPercent   int
	refillMaxDeferral       time.Duration
	refillMaxStarting       int
	gracefulShutdownTimeout time.Duration
	platformGroups          stringList
	runtimeAnnotations      stringList
	annotationDomains       stringList
	configNamespace         string
	restamp                 bool
	warmPoolAutoscaler      bool
	disableClaimEvents      bool
	disableSandboxEvents    bool
	cacheLabelSelectors     bool
	warmPool                operator.WarmPoolSettings

	// The public controller's flags that mean nothing to sandgate: accepted, checked as it
	// checks them, and reported at start (noEffect).
	enableWebhook           bool
	manageWebhookCerts      bool
	webhookCertName         string
	webhookKeyName          string
	webhookServiceName      string
	webhookNamespace        string
	disableClaimAnnotations bool
	writeBehindWindow       time.Duration
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

// claimAnnotationDomains is --claim-allowed-annotation-domains as the label allowlist is
// read: trimmed and lowercased.
func (o *options) claimAnnotationDomains() []string {
	return policy.ParseLabelDomains(strings.Join(o.annotationDomains, ","))
}

// bind registers the flags, their defaults those of operator.DefaultOptions.
func (o *options) bind(fs *flag.FlagSet) {
	d := operator.DefaultOptions()
	fs.BoolVar(&o.printVersion, "version", false, "Print version information and exit.")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", float64(d.QPS), "Queries per second to the API server; negative turns client-side rate limiting off.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", d.Burst, "Burst of queries to the API server.")
	fs.IntVar(&o.apiConnections, "api-connections", d.APIConnections, "Number of HTTP/2 connections to the API server the manager's requests are spread over round-robin. The API server caps the concurrent requests of one connection (100 by default), so one connection caps the manager's concurrency.")
	fs.BoolVar(&o.separateWatchConnection, "separate-watch-connection", d.SeparateWatchConnection, "Give the informers' lists and watches an HTTP/2 connection of their own, so that watch events do not queue behind bursts of writes.")
	fs.StringVar(&o.apiEncoding, "api-encoding", string(d.APIEncoding), fmt.Sprintf("How the Sandbox informer reads its lists and watches, one of %q: json-framer, JSON through its own framing and decoding; json, JSON as client-go reads it; cbor, CBOR where the API server serves it (its CBORServingAndStorage feature gate, alpha and off by default in Kubernetes v1.37), JSON as json-framer reads it elsewhere.", operator.APIEncodings))
	fs.BoolVar(&o.leaderElect, "leader-elect", d.LeaderElection, "Elect a leader so that only one manager replica is active.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", d.LeaderElectionNamespace, "Namespace of the leader election Lease (default: the manager's namespace).")
	fs.DurationVar(&o.leaderElection.LeaseDuration, "leader-election-lease-duration", d.LeaderElectionTimings.LeaseDuration, "How long a replica waits, after it last saw the leader renew its Lease, before it takes the Lease over.")
	fs.DurationVar(&o.leaderElection.RenewDeadline, "leader-election-renew-deadline", d.LeaderElectionTimings.RenewDeadline, "How long the leader retries a failed renewal before it gives the Lease up; a leader whose last renewal is older sends no write (less than the lease duration).")
	fs.DurationVar(&o.leaderElection.RetryPeriod, "leader-election-retry-period", d.LeaderElectionTimings.RetryPeriod, "How often replicas try to acquire, and the leader to renew, the Lease.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", d.MetricsBindAddress, "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", d.SecureMetrics, "Serve metrics over HTTPS to authenticated and authorized clients only (a bearer token the API server accepts, allowed to get /metrics). config/default turns it on; off serves plain HTTP, as the public controller's Deployment expects.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", d.HealthProbeBindAddress, "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", d.PprofBindAddress, "Address of Go's /debug/pprof profiling endpoints, for diagnosing the manager; empty (the default) disables them. Bind it to localhost: the endpoints are not authenticated.")
	fs.BoolVar(&o.enablePprof, "enable-pprof", d.EnablePprof, "Serve the CPU profile (/debug/pprof/profile) on the metrics endpoint (behind its authentication with --metrics-secure).")
	fs.BoolVar(&o.enablePprofDebug, "enable-pprof-debug", d.EnablePprofDebug, "Serve every pprof endpoint (heap, goroutine, cmdline, block, mutex, ...) and /debug/fgprof on the metrics endpoint; implies --enable-pprof. May expose sensitive data and costs sampling overhead.")
	fs.IntVar(&o.pprofBlockRate, "pprof-block-profile-rate", d.PprofBlockProfileRate, "Block profile sampling rate with --enable-pprof-debug: <=0 off, 1 every blocking event, N>=2 one sample per N ns blocked.")
	fs.IntVar(&o.pprofMutexFraction, "pprof-mutex-profile-fraction", d.PprofMutexProfileFraction, "Mutex contention sampling with --enable-pprof-debug: <=0 off, 1 every event, N>1 about 1/N of them.")
	fs.BoolVar(&o.enableTracing, "enable-tracing", d.EnableTracing, "Export OpenTelemetry traces over OTLP/gRPC, configured by the standard OTEL_EXPORTER_OTLP_* environment variables; claims created with a trace context continue the client's trace.")
	fs.IntVar(&o.webhookPort, "webhook-port", d.WebhookPort, "Port of the admission webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", d.WebhookCertDir, "Directory with tls.crt and tls.key of the webhook server.")
	fs.StringVar(&o.webhookHost, "webhook-host", d.WebhookHost, "Address the webhook server listens on (default: all interfaces).")
	fs.BoolVar(&o.selfSignedCerts, "self-signed-certs", d.SelfSignedCerts, "Write a throwaway self-signed webhook certificate (CA in memory only) into --webhook-cert-dir. For local runs only, never in production: installed clusters get theirs from cert-manager.")
	fs.StringVar(&o.operatorUser, "operator-service-account", d.OperatorUser, "User name of this manager's requests (system:serviceaccount:<namespace>:<name>); the binding guard admits bindings from it only.")
	fs.IntVar(&o.sandboxWorkers, "sandbox-concurrent-workers", d.SandboxWorkers, "Concurrent reconciles of Sandboxes.")
	fs.IntVar(&o.claimWorkers, "sandbox-claim-concurrent-workers", d.ClaimWorkers, "Concurrent reconciles of SandboxClaims.")
	fs.IntVar(&o.warmPoolWorkers, "sandbox-warm-pool-concurrent-workers", d.WarmPoolWorkers, "Concurrent reconciles of SandboxWarmPools.")
	fs.IntVar(&o.templateWorkers, "sandbox-template-concurrent-workers", d.TemplateWorkers, "Concurrent reconciles of SandboxTemplates.")
	fs.StringVar(&o.clusterDomain, "cluster-domain", d.ClusterDomain, "Cluster DNS domain used in Sandbox status.serviceFQDN.")
	fs.BoolVar(&o.extensions, "extensions", d.Extensions, "Also run the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.")
	fs.DurationVar(&o.coldStartGrace, "cold-start-grace", d.ColdStartGrace, "How long a claim that finds no warm sandbox of its template version to take (none ready, none starting) waits for pool members on their way (not schedulable yet, or about to be created) before it cold-starts a sandbox.")
	fs.DurationVar(&o.claimReservationTTL, "claim-reservation-ttl", d.ClaimReservationTTL, "How long a ClaimPolicy counts a claim admission let through whose create never completed (refused after admission by another webhook, a ResourceQuota or the schema): longer than a create can take after its admission (docs/fair-share.md).")
	fs.DurationVar(&o.claimAdmissionMaxWait, "claim-admission-max-wait", d.ClaimAdmissionMaxWait, "Refuse a new claim with 429 Too Many Requests and a retry delay when the claims ahead of it in the control plane (admitted, not Ready, with no ready pool member to take, their pods neither taken up by their node's kubelet nor on a node for less than this; at least 20 of them) would take longer than this to serve at the rate claims became Ready in the last 5 s, unless its creator holds less of them than its fair share: past the rate the cluster sustains, the claims it admits are served at that rate instead of all of them late (docs/design.md). 0 admits every claim.")
	fs.DurationVar(&o.refillQuietPeriod, "pool-refill-quiet-period", d.Refill.QuietPeriod, "How long claims must pause before a pool replaces the members they took: replacements compete with claims for the API server. 0 replaces at once.")
	fs.DurationVar(&o.refillMaxDeferral, "pool-refill-max-deferral", d.Refill.MaxDeferral, "Longest a pool's replacements, and a bound claim's sandbox-name annotation, wait for claims to pause: claims under steady traffic never pause. 0 waits for a pause however long.")
	fs.IntVar(&o.refillLowWaterPercent, "pool-refill-low-water-percent", d.Refill.LowWaterPercent, "Percentage of a pool's replicas below which its ready members are replaced at once, even while claims arrive.")
	fs.IntVar(&o.refillMaxStarting, "pool-refill-max-starting-percent", d.Refill.MaxStartingPercent, "While claims keep arriving, the most members a pool has being placed at a time (created, their pod not on a node yet), as a percentage of its replicas (at least one, and at least as many as claims wait for a member or found none ready, took one starting or were cold-started for want of one, and are not Ready yet); claims take priority over what the refill starts. 0 leaves it unbounded.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", d.GracefulShutdownTimeout, "How long running reconciles may take to finish on shutdown.")
	o.platformGroups = append(stringList(nil), d.PlatformGroups...)
	fs.Var(&o.platformGroups, "platform-groups", "Comma-separated groups trusted to change and delete every claim and Sandbox, and to write the operator's metadata (docs/threat-model.md).")
	o.runtimeAnnotations = append(stringList(nil), d.RefusedAnnotationPrefixes...)
	fs.Var(&o.runtimeAnnotations, "claim-refused-annotation-prefixes", "Comma-separated annotation prefixes a claim's additionalPodMetadata may not use: the container runtimes' option annotations. Refused even under --claim-allowed-annotation-domains.")
	o.annotationDomains = append(stringList(nil), d.ClaimAnnotationDomains...)
	fs.Var(&o.annotationDomains, "claim-allowed-annotation-domains", "Comma-separated annotation domains a claim's additionalPodMetadata may use (each domain and its subdomains; unprefixed keys are refused). Empty means the default, "+strings.Join(policy.DefaultClaimAnnotationDomains, ",")+".")
	fs.StringVar(&o.configNamespace, "config-namespace", d.ConfigNamespace, "Namespace of the ConfigMap agent-sandbox-config, whose allowed-label-domains lists the label domains claims may use (watched). Default: the pod's namespace (POD_NAMESPACE), else "+operator.DefaultConfigNamespace+".")
	fs.BoolVar(&o.restamp, "restamp", !d.RefuseRestamp, "Restamp a claim whose stamped template version is gone (no member of it left, the template changed) to the current version, visibly (ClaimRestamped event, Ready reason Restamped); false leaves such a claim Ready=False with reason StampedVersionGone.")
	fs.BoolVar(&o.warmPoolAutoscaler, "enable-warm-pool-autoscaler", d.WarmPoolAutoscaler, "Run the WarmPoolAutoscaler controller (autoscaling.sandgate.dev), which sets pools' replicas from the claims admission sees arrive (docs/autoscaling.md). It runs only where its CRD is installed; without it a line says so at start.")
	fs.BoolVar(&o.disableClaimEvents, "disable-claim-events", d.DisableClaimEvents, "Emit no Kubernetes Events from the SandboxClaim controller: fewer API writes during claim bursts.")
	fs.BoolVar(&o.disableSandboxEvents, "disable-sandbox-events", d.DisableSandboxEvents, "Emit no Kubernetes Events from the Sandbox controller (the public controller's, from its v1.0 Helm chart).")

	// The public controller's warm pool and cache flags, validated as it validates them; the
	// cache one is not acted on yet (docs/flags.md).
	fs.BoolVar(&o.cacheLabelSelectors, "cache-label-selectors", d.CacheLabelSelectors, "Cache only the Pods and Services that carry the sandbox tracking label (agents.x-k8s.io/sandbox-name-hash), as every child sandgate builds does: informer traffic and memory follow the sandboxes, not the cluster. A child's name the cache misses is looked up on the API server before it is built.")
	fs.BoolVar(&o.warmPool.EnableEviction, "enable-warm-pool-eviction", d.WarmPool.EnableEviction, "Mark the pods of idle warm pool members safe to evict (cluster-autoscaler.kubernetes.io/safe-to-evict: \"true\"), removed when a claim takes them.")
	fs.DurationVar(&o.warmPool.ReadinessGracePeriod, "sandbox-warm-pool-readiness-grace-period", d.WarmPool.ReadinessGracePeriod, "How long a warm pool member may stay not Ready after its pod's creation before it is replaced (or held, if its pod is unschedulable); positive.")
	fs.DurationVar(&o.warmPool.UnschedulableRecheckInterval, "sandbox-warm-pool-unschedulable-recheck-interval", d.WarmPool.UnschedulableRecheckInterval, "How often a pool holding unschedulable members past the grace period is re-checked; positive.")
	fs.IntVar(&o.warmPool.MaxBatchSize, "sandbox-warm-pool-max-batch-size", d.WarmPool.MaxBatchSize, "Most pool members created, or surplus members deleted, per pool reconcile; positive.")
	fs.Float64Var(&o.warmPool.MaxRefillRate, "sandbox-warm-pool-max-refill-rate", d.WarmPool.MaxRefillRate, "Most member creates per second per pool (a token bucket of one second's worth); 0 leaves them unpaced.")
	fs.DurationVar(&o.warmPool.ReplenishDelay, "sandbox-warm-pool-replenish-delay", d.WarmPool.ReplenishDelay, "How long a pool defers replacing members that left it, re-armed by every departure; 0 replaces at once (--pool-refill-quiet-period applies too).")

	// The public controller's flags with no meaning here.
	fs.BoolVar(&o.enableWebhook, "enable-webhook", true, "Serve the admission webhooks. Always true: sandgate's admission (claim stamping, the binding guard) is not optional; false is refused.")
	fs.BoolVar(&o.manageWebhookCerts, "manage-webhook-certs", true, "No effect: sandgate neither makes its serving certificate nor patches CRDs; cert-manager (or --self-signed-certs) provides tls.crt and tls.key in --webhook-cert-dir.")
	fs.StringVar(&o.webhookCertName, "webhook-cert-name", certs.CertFile, "File name of the serving certificate in --webhook-cert-dir; sandgate reads "+certs.CertFile+" only, so with --manage-webhook-certs=false another name is refused.")
	fs.StringVar(&o.webhookKeyName, "webhook-key-name", certs.KeyFile, "File name of the serving key in --webhook-cert-dir; sandgate reads "+certs.KeyFile+" only, so with --manage-webhook-certs=false another name is refused.")
	fs.StringVar(&o.webhookServiceName, "webhook-service-name", "agent-sandbox-webhook-service", "No effect: names the Service of the certificates the public controller makes; sandgate makes none.")
	fs.StringVar(&o.webhookNamespace, "webhook-namespace", "agent-sandbox-system", "No effect: the namespace of that Service.")
	fs.BoolVar(&o.disableClaimAnnotations, "disable-claim-observability-annotations", false, "No effect: sandgate's claim controller writes no observability annotation (admission stamps the first-observed times in the create request itself, at no write of its own).")
	fs.DurationVar(&o.writeBehindWindow, "sandbox-write-behind-window", 0, "No effect: sandgate's Sandbox controller already defers its bookkeeping writes until claims pause (--pool-refill-quiet-period); must not be negative.")
}

func (o *options) validate() error {
	var errs []error
	if o.kubeAPIQPS == 0 || math.IsNaN(o.kubeAPIQPS) || math.IsInf(o.kubeAPIQPS, 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be a finite non-zero number (negative: no client-side limit), got %v", o.kubeAPIQPS))
	}
	if o.kubeAPIBurst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be positive, got %d", o.kubeAPIBurst))
	}
	if o.apiConnections < 1 {
		errs = append(errs, fmt.Errorf("--api-connections must be at least 1, got %d", o.apiConnections))
	}
	for _, w := range []struct {
		name string
		n    int
	}{
		{"--sandbox-concurrent-workers", o.sandboxWorkers},
		{"--sandbox-claim-concurrent-workers", o.claimWorkers},
		{"--sandbox-warm-pool-concurrent-workers", o.warmPoolWorkers},
		{"--sandbox-template-concurrent-workers", o.templateWorkers},
		{"--sandbox-warm-pool-max-batch-size", o.warmPool.MaxBatchSize},
	} {
		if w.n < 1 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", w.name, w.n))
		}
	}
	if o.webhookPort < 1 || o.webhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port must be a TCP port, got %d", o.webhookPort))
	}
	if o.operatorUser == "" {
		errs = append(errs, errors.New("--operator-service-account must not be empty"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--pool-refill-quiet-period", o.refillQuietPeriod},
		{"--pool-refill-max-deferral", o.refillMaxDeferral},
		{"--cold-start-grace", o.coldStartGrace},
		{"--claim-reservation-ttl", o.claimReservationTTL},
		{"--claim-admission-max-wait", o.claimAdmissionMaxWait},
		{"--sandbox-warm-pool-replenish-delay", o.warmPool.ReplenishDelay},
		{"--sandbox-write-behind-window", o.writeBehindWindow},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.name, d.v))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--sandbox-warm-pool-readiness-grace-period", o.warmPool.ReadinessGracePeriod},
		{"--sandbox-warm-pool-unschedulable-recheck-interval", o.warmPool.UnschedulableRecheckInterval},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration, got %s", d.name, d.v))
		}
	}
	if r := o.warmPool.MaxRefillRate; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-warm-pool-max-refill-rate must be a finite number >= 0 (0 leaves refill unpaced), got %v", r))
	}
	if o.refillLowWaterPercent < 0 || o.refillLowWaterPercent > 100 {
		errs = append(errs, fmt.Errorf("--pool-refill-low-water-percent must be between 0 and 100, got %d", o.refillLowWaterPercent))
	}
	if o.refillMaxStarting < 0 || o.refillMaxStarting > 100 {
		errs = append(errs, fmt.Errorf("--pool-refill-max-starting-percent must be between 0 and 100, got %d", o.refillMaxStarting))
	}
	if len(o.platformGroups) == 0 {
		errs = append(errs, errors.New("--platform-groups must name at least one group"))
	}
	if o.clusterDomain == "" {
		errs = append(errs, errors.New("--cluster-domain must not be empty"))
	}
	if fe := policy.ValidateAnnotationDomains(o.claimAnnotationDomains(), nil); len(fe) > 0 {
		errs = append(errs, fmt.Errorf("--claim-allowed-annotation-domains: %w", fe.ToAggregate()))
	}
	if o.leaderElect {
		errs = append(errs, o.validateLeaderElection()...)
	}
	errs = append(errs, o.validateWebhookCompat()...)
	return errors.Join(errs...)
}

// validateLeaderElection checks the Lease's durations as client-go will when the manager
// starts, with the flags' names.
func (o *options) validateLeaderElection() []error {
	t := o.leaderElection
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--leader-election-lease-duration", t.LeaseDuration},
		{"--leader-election-renew-deadline", t.RenewDeadline},
		{"--leader-election-retry-period", t.RetryPeriod},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if t.LeaseDuration <= t.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-election-lease-duration (%s) must be greater than --leader-election-renew-deadline (%s)", t.LeaseDuration, t.RenewDeadline))
	}
	if float64(t.RenewDeadline) <= 1.2*float64(t.RetryPeriod) {
		errs = append(errs, fmt.Errorf("--leader-election-renew-deadline (%s) must be greater than 1.2 × --leader-election-retry-period (%s)", t.RenewDeadline, t.RetryPeriod))
	}
	return errs
}

// validateWebhookCompat checks the public controller's webhook flags: sandgate cannot run
// without its admission, and reads tls.crt and tls.key only.
func (o *options) validateWebhookCompat() []error {
	var errs []error
	if !o.enableWebhook {
		errs = append(errs, errors.New("--enable-webhook=false is not supported: sandgate's admission webhooks (claim stamping, the binding guard) are what keeps claims and Sandboxes their owners'; without them its guarantees do not hold"))
	}
	for _, f := range []struct{ name, v, want string }{
		{"--webhook-cert-name", o.webhookCertName, certs.CertFile},
		{"--webhook-key-name", o.webhookKeyName, certs.KeyFile},
	} {
		switch {
		case strings.TrimSpace(f.v) == "":
			errs = append(errs, fmt.Errorf("%s must not be empty", f.name))
		case !o.manageWebhookCerts && f.v != f.want:
			errs = append(errs, fmt.Errorf("%s=%s is not supported: sandgate reads %s from --webhook-cert-dir (the key cert-manager writes)", f.name, f.v, f.want))
		}
	}
	return errs
}

// noEffect lists the flags given on fs's command line that sandgate accepts without acting
// on them, each with why, sorted by flag: main logs them once at start.
func (o *options) noEffect(fs *flag.FlagSet) []string {
	why := map[string]string{
		"enable-webhook":                          "sandgate always serves its admission webhooks",
		"manage-webhook-certs":                    "sandgate makes no serving certificate and patches no CRD: cert-manager (or --self-signed-certs) provides them",
		"webhook-cert-name":                       "sandgate reads " + certs.CertFile + " from --webhook-cert-dir",
		"webhook-key-name":                        "sandgate reads " + certs.KeyFile + " from --webhook-cert-dir",
		"webhook-service-name":                    "it names the Service of certificates sandgate does not make",
		"webhook-namespace":                       "it names the namespace of certificates sandgate does not make",
		"disable-claim-observability-annotations": "sandgate's claim controller writes no observability annotation (admission stamps them in the create request)",
		"sandbox-write-behind-window":             "sandgate defers its bookkeeping writes until claims pause (--pool-refill-quiet-period)",
	}
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if w, ok := why[f.Name]; ok {
			out = append(out, fmt.Sprintf("--%s=%s: %s", f.Name, f.Value, w))
		}
	})
	sort.Strings(out)
	return out
}

// operatorOptions are the options of the flags.
func (o *options) operatorOptions() operator.Options {
	return operator.Options{
		QPS:                       float32(o.kubeAPIQPS),
		Burst:                     o.kubeAPIBurst,
		APIConnections:            o.apiConnections,
		SeparateWatchConnection:   o.separateWatchConnection,
		APIEncoding:               operator.APIEncoding(o.apiEncoding),
		LeaderElection:            o.leaderElect,
		LeaderElectionNamespace:   o.leaderElectionNamespace,
		LeaderElectionTimings:     o.leaderElection,
		MetricsBindAddress:        o.metricsAddr,
		SecureMetrics:             o.metricsSecure,
		HealthProbeBindAddress:    o.probeAddr,
		PprofBindAddress:          o.pprofAddr,
		EnablePprof:               o.enablePprof,
		EnablePprofDebug:          o.enablePprofDebug,
		PprofBlockProfileRate:     o.pprofBlockRate,
		PprofMutexProfileFraction: o.pprofMutexFraction,
		EnableTracing:             o.enableTracing,
		WebhookHost:               o.webhookHost,
		WebhookPort:               o.webhookPort,
		WebhookCertDir:            o.webhookCertDir,
		SelfSignedCerts:           o.selfSignedCerts,
		OperatorUser:              o.operatorUser,
		PlatformGroups:            o.platformGroups,
		RefusedAnnotationPrefixes: o.runtimeAnnotations,
		ClaimAnnotationDomains:    o.claimAnnotationDomains(),
		ConfigNamespace:           o.configNamespace,
		SandboxWorkers:            o.sandboxWorkers,
		ClaimWorkers:              o.claimWorkers,
		WarmPoolWorkers:           o.warmPoolWorkers,
		TemplateWorkers:           o.templateWorkers,
		DisableClaimEvents:        o.disableClaimEvents,
		DisableSandboxEvents:      o.disableSandboxEvents,
		CacheLabelSelectors:       o.cacheLabelSelectors,
		WarmPool:                  o.warmPool,
		ClusterDomain:             o.clusterDomain,
		Extensions:                o.extensions,
		ColdStartGrace:            o.coldStartGrace,
		ClaimReservationTTL:       o.claimReservationTTL,
		ClaimAdmissionMaxWait:     o.claimAdmissionMaxWait,
		Refill: reconcilers.RefillPolicy{QuietPeriod: o.refillQuietPeriod, LowWaterPercent: o.refillLowWaterPercent, MaxDeferral: o.refillMaxDeferral,
			MaxStartingPercent: o.refillMaxStarting},
		RefuseRestamp:           !o.restamp,
		WarmPoolAutoscaler:      o.warmPoolAutoscaler,
		GracefulShutdownTimeout: o.gracefulShutdownTimeout,
	}
}
