package operator

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// The production defaults: DefaultOptions returns them, cmd/sandgate's flags show them.
const (
	DefaultQPS                     = 1000
	DefaultBurst                   = 2000
	DefaultMetricsBindAddress      = ":8080"
	DefaultHealthProbeBindAddress  = ":8081"
	DefaultWebhookPort             = 9443
	DefaultWebhookCertDir          = "/tmp/k8s-webhook-server/serving-certs"
	DefaultSandboxWorkers          = 10
	DefaultClaimWorkers            = 64
	DefaultWarmPoolWorkers         = 4
	DefaultTemplateWorkers         = 4
	DefaultAPIConnections          = 1
	DefaultClusterDomain           = "cluster.local"
	DefaultGracefulShutdownTimeout = 30 * time.Second
)

// The public controller's defaults of its warm pool settings (its
// extensions/controllers/sandboxwarmpool_controller.go and cmd/agent-sandbox-controller flags).
const (
	DefaultWarmPoolReadinessGracePeriod         = 5 * time.Minute
	DefaultWarmPoolUnschedulableRecheckInterval = time.Minute
	DefaultWarmPoolMaxBatchSize                 = 300
)

// The public controller's pprof sampling defaults, applied with EnablePprofDebug.
const (
	DefaultPprofBlockProfileRate     = 1000000
	DefaultPprofMutexProfileFraction = 10
)

// DefaultClaimAdmissionMaxWait is the longest a new claim is predicted to wait in the control
// plane (the claims ahead of it over the rate claims are served) before it is refused
// (Options.ClaimAdmissionMaxWait). Neither a pod's start-up on its node nor a claim a ready
// pool member serves counts, so the limit depends on neither the cluster's images nor the
// pool's size: below the sustainable rate a cold start's part before its pod is placed takes
// well under a second, and past it the claims served settle about this much later than that
// (docs/performance.md, "Overload: past the sustainable rate").
const DefaultClaimAdmissionMaxWait = 2 * time.Second

// LeaderElectionID names the leader election Lease of every sandgate manager.
const LeaderElectionID = "sandgate.agents.x-k8s.io"

// Options are every knob of the operator: cmd/sandgate sets them from its flags, the
// integration suites from DefaultOptions and their test settings. Start from DefaultOptions:
// the zero value is not a working configuration (New rejects zero workers, for one).
type Options struct {
	// QPS and Burst limit the manager's requests to the API server; a negative QPS turns
	// client-side rate limiting off (client-go's meaning).
	QPS   float32
	Burst int
	// APIConnections spreads the manager's requests round-robin over this many HTTP/2
	// connections to the API server (each one's concurrent streams are capped by the server);
	// 1 (and 0) is client-go's one shared connection. SeparateWatchConnection gives the
	// informers' lists and watches a connection of their own. See transport.go.
	APIConnections          int
	SeparateWatchConnection bool
	// APIEncoding is how the Sandbox informer reads its lists and watches (encoding.go); ""
	// is APIEncodingJSONFramer.
	APIEncoding APIEncoding

	// LeaderElection elects a leader so that only one replica reconciles; the Lease lives in
	// LeaderElectionNamespace ("" means the manager's namespace) and is released on a clean
	// stop, so that the next replica takes over at once.
	LeaderElection          bool
	LeaderElectionNamespace string
	// LeaderElectionTimings are the Lease's durations. A leader whose last renewal is older
	// than RenewDeadline sends no write (leaseFence), so a replica frozen past its Lease cannot
	// write beside the next leader.
	LeaderElectionTimings LeaderElectionTimings

	// MetricsBindAddress is the address of the Prometheus endpoint; "0" disables it. With
	// SecureMetrics it serves HTTPS to authenticated and authorized clients only (see
	// metricsServerOptions).
	MetricsBindAddress string
	SecureMetrics      bool
	// MetricsRegistry receives the controllers' counters; nil means controller-runtime's
	// registry, the one the metrics endpoint serves. Tests give each manager its own.
	MetricsRegistry prometheus.Registerer
	// HealthProbeBindAddress is the address of /healthz and /readyz; "0" disables it (the
	// checks still run: see Operator.Ready).
	HealthProbeBindAddress string
	// PprofBindAddress is the address of /debug/pprof; "" disables it.
	PprofBindAddress string
	// EnablePprof serves /debug/pprof/profile (CPU) on the metrics endpoint; EnablePprofDebug
	// serves every pprof endpoint there and sets the block and mutex profile rates
	// (PprofBlockProfileRate, PprofMutexProfileFraction; <= 0 leaves that profile off).
	// The public controller's --enable-pprof and --enable-pprof-debug: see pprofHandlers.
	EnablePprof, EnablePprofDebug                    bool
	PprofBlockProfileRate, PprofMutexProfileFraction int
	// EnableTracing exports OpenTelemetry spans over OTLP (internal/tracing.Setup: the
	// exporter is configured by the OTEL_EXPORTER_OTLP_* environment variables).
	EnableTracing bool
	// TracerProvider receives the spans instead, whatever EnableTracing says: tests record
	// them in memory. nil with EnableTracing off is tracing off.
	TracerProvider trace.TracerProvider

	// WebhookHost ("" means every interface) and WebhookPort are where the admission webhook
	// server listens; WebhookCertDir holds its tls.crt and tls.key, watched for renewals.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// SelfSignedCerts writes a throwaway certificate for localhost, the loopback addresses and
	// WebhookHost, with the ca.crt that signed it, into WebhookCertDir before the server starts.
	// For local runs and tests only, never in production.
	SelfSignedCerts bool

	// OperatorUser is the user name of the manager's requests; the binding guard admits
	// bindings from it only.
	OperatorUser string
	// PlatformGroups are trusted to act on every claim and Sandbox.
	PlatformGroups []string
	// RefusedAnnotationPrefixes are the annotation prefixes a claim's additionalPodMetadata
	// may not use. The setting is process-wide (policy.SetRuntimeAnnotationPrefixes): New
	// applies it, nil restores policy.DefaultRuntimeAnnotationPrefixes.
	RefusedAnnotationPrefixes []string
	// ClaimAnnotationDomains is the allowlist of the annotation domains a claim's
	// additionalPodMetadata may use (an allowed domain or a subdomain of one), for admission
	// and the claim controller alike; RefusedAnnotationPrefixes are refused on top of it.
	// Empty means policy.DefaultClaimAnnotationDomains.
	ClaimAnnotationDomains []string
	// ConfigNamespace is the namespace of the public controller's ConfigMap
	// agent-sandbox-config, whose allowed-label-domains lists the label domains a claim's
	// additionalPodMetadata may use (watched: a change applies without a restart). "" means
	// the pod's namespace (POD_NAMESPACE, or its service account's), else
	// DefaultConfigNamespace.
	ConfigNamespace string

	// SandboxWorkers, ClaimWorkers and WarmPoolWorkers are the numbers of concurrent
	// reconciles of Sandboxes, SandboxClaims and SandboxWarmPools (and SandboxTemplates).
	SandboxWorkers, ClaimWorkers, WarmPoolWorkers int
	// TemplateWorkers is the number of concurrent reconciles of SandboxTemplates.
	TemplateWorkers int
	// DisableClaimEvents and DisableSandboxEvents make the SandboxClaim and the Sandbox
	// controller emit no Kubernetes Events.
	DisableClaimEvents, DisableSandboxEvents bool
	// WarmPool holds the public controller's warm pool settings, which the warm pool
	// controller acts on (docs/flags.md).
	WarmPool WarmPoolSettings
	// CacheLabelSelectors caches only the Pods and Services that carry the sandbox tracking
	// label (reconcilers.CacheOptions, Config.ScopedChildCaches).
	CacheLabelSelectors bool
	// ClusterDomain is the cluster's DNS domain, for Sandbox status.serviceFQDN.
	ClusterDomain string
	// Extensions also runs the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.
	Extensions bool
	// ColdStartGrace is how long a claim waits for warm members before a cold start; 0 means
	// reconcilers.DefaultColdStartGrace.
	ColdStartGrace time.Duration
	// ClaimReservationTTL is how long a ClaimPolicy counts a claim admission let through whose
	// create never completed; 0 means reconcilers.DefaultClaimReservationTTL.
	ClaimReservationTTL time.Duration
	// ClaimAdmissionMaxWait refuses a new claim with 429 and a retry delay when the claims
	// ahead of it in the control plane, at the rate claims are served, would take longer than
	// this (webhooks.ClaimShed); 0 turns it off. With Extensions only: without the claim
	// controller no claim is served.
	ClaimAdmissionMaxWait time.Duration
	// Refill says when pools replace the members claims took.
	Refill reconcilers.RefillPolicy
	// RefuseRestamp leaves a claim whose stamped template version is gone Ready=False
	// (StampedVersionGone) instead of restamping it.
	RefuseRestamp bool
	// WarmPoolAutoscaler runs the WarmPoolAutoscaler controller where its CRD is served
	// (New asks discovery once; without the CRD it logs that it does not run).
	WarmPoolAutoscaler bool
	// GracefulShutdownTimeout is how long running reconciles may take to finish on shutdown;
	// 0 skips waiting, a negative duration waits without bound (as controller-runtime has it).
	GracefulShutdownTimeout time.Duration

	// CacheNamespaces restricts the manager's cache, and so what it reconciles, to these
	// namespaces; empty means every namespace. Tests use it to keep their counts their own.
	CacheNamespaces []string
	// SkipNameValidation lets several managers with the same controllers run in one process.
	SkipNameValidation bool
	// Clock is the controllers' and the webhooks' clock; nil means the real one.
	Clock clock.Clock
}

// WarmPoolSettings are the public controller's warm pool flags, with its defaults and its
// meaning (docs/flags.md), acted on by the warm pool controller (reconcilers.WarmPoolPolicy).
type WarmPoolSettings struct {
	// EnableEviction marks the pods a pool creates as safe to evict.
	EnableEviction bool
	// ReadinessGracePeriod is how long a member may stay not Ready after its pod was created
	// before it is replaced (or
	// held, when its pod is unschedulable); positive.
	ReadinessGracePeriod time.Duration
	// UnschedulableRecheckInterval is how often a pool holding unschedulable members past
	// the grace period is looked at again; positive.
	UnschedulableRecheckInterval time.Duration
	// MaxBatchSize bounds the members created or deleted at once; positive.
	MaxBatchSize int
	// MaxRefillRate paces replacements (sandboxes per second per pool); 0 leaves them unpaced.
	MaxRefillRate float64
	// ReplenishDelay defers replacements after members leave; 0 replaces at once.
	ReplenishDelay time.Duration
}

// policy is what the warm pool controller is told.
func (w WarmPoolSettings) policy() reconcilers.WarmPoolPolicy {
	return reconcilers.WarmPoolPolicy{
		DisableEviction:              !w.EnableEviction,
		ReadinessGracePeriod:         w.ReadinessGracePeriod,
		UnschedulableRecheckInterval: w.UnschedulableRecheckInterval,
		MaxBatchSize:                 w.MaxBatchSize,
		MaxRefillRate:                w.MaxRefillRate,
		ReplenishDelay:               w.ReplenishDelay,
	}
}

// DefaultWarmPoolSettings are the public controller's defaults.
func DefaultWarmPoolSettings() WarmPoolSettings {
	return WarmPoolSettings{
		EnableEviction:               true,
		ReadinessGracePeriod:         DefaultWarmPoolReadinessGracePeriod,
		UnschedulableRecheckInterval: DefaultWarmPoolUnschedulableRecheckInterval,
		MaxBatchSize:                 DefaultWarmPoolMaxBatchSize,
	}
}

// validate names the field of every bad setting, under prefix.
func (w WarmPoolSettings) validate(prefix string) []error {
	var errs []error
	if w.ReadinessGracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("invalid %sReadinessGracePeriod: must be positive, got %s", prefix, w.ReadinessGracePeriod))
	}
	if w.UnschedulableRecheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("invalid %sUnschedulableRecheckInterval: must be positive, got %s", prefix, w.UnschedulableRecheckInterval))
	}
	if w.MaxBatchSize < 1 {
		errs = append(errs, fmt.Errorf("invalid %sMaxBatchSize: must be at least 1, got %d", prefix, w.MaxBatchSize))
	}
	if math.IsNaN(w.MaxRefillRate) || math.IsInf(w.MaxRefillRate, 0) || w.MaxRefillRate < 0 {
		errs = append(errs, fmt.Errorf("invalid %sMaxRefillRate: must be a finite number >= 0, got %v", prefix, w.MaxRefillRate))
	}
	if w.ReplenishDelay < 0 {
		errs = append(errs, fmt.Errorf("invalid %sReplenishDelay: must not be negative, got %s", prefix, w.ReplenishDelay))
	}
	return errs
}

// DefaultOptions are the production defaults: the operator as cmd/sandgate runs it without
// flags.
func DefaultOptions() Options {
	return Options{
		QPS:                       DefaultQPS,
		Burst:                     DefaultBurst,
		APIEncoding:               APIEncodingJSONFramer,
		MetricsBindAddress:        DefaultMetricsBindAddress,
		HealthProbeBindAddress:    DefaultHealthProbeBindAddress,
		WebhookPort:               DefaultWebhookPort,
		WebhookCertDir:            DefaultWebhookCertDir,
		OperatorUser:              webhooks.DefaultOperatorUser,
		PlatformGroups:            append([]string(nil), webhooks.DefaultPlatformGroups...),
		RefusedAnnotationPrefixes: append([]string(nil), policy.DefaultRuntimeAnnotationPrefixes...),
		ClaimAnnotationDomains:    append([]string(nil), policy.DefaultClaimAnnotationDomains...),
		SandboxWorkers:            DefaultSandboxWorkers,
		ClaimWorkers:              DefaultClaimWorkers,
		WarmPoolWorkers:           DefaultWarmPoolWorkers,
		TemplateWorkers:           DefaultTemplateWorkers,
		APIConnections:            DefaultAPIConnections,
		PprofBlockProfileRate:     DefaultPprofBlockProfileRate,
		PprofMutexProfileFraction: DefaultPprofMutexProfileFraction,
		WarmPool:                  DefaultWarmPoolSettings(),
		ClusterDomain:             DefaultClusterDomain,
		ColdStartGrace:            reconcilers.DefaultColdStartGrace,
		ClaimReservationTTL:       reconcilers.DefaultClaimReservationTTL,
		ClaimAdmissionMaxWait:     DefaultClaimAdmissionMaxWait,
		Refill: reconcilers.RefillPolicy{
			QuietPeriod:        reconcilers.DefaultRefillQuietPeriod,
			LowWaterPercent:    reconcilers.DefaultRefillLowWaterPercent,
			MaxDeferral:        reconcilers.DefaultRefillMaxDeferral,
			MaxStartingPercent: reconcilers.DefaultRefillMaxStartingPercent,
		},
		GracefulShutdownTimeout: DefaultGracefulShutdownTimeout,
		LeaderElectionTimings:   DefaultLeaderElectionTimings(),
		WarmPoolAutoscaler:      true,
	}
}

// Validate reports every setting New cannot run with. cmd/sandgate checks its flags first,
// with the flags' names (the same checks, so a command line it accepts New accepts too); this
// is the check for every other caller.
func (o Options) Validate() error {
	var errs []error
	if o.QPS == 0 || math.IsNaN(float64(o.QPS)) || math.IsInf(float64(o.QPS), 0) {
		errs = append(errs, fmt.Errorf("invalid Options.QPS: must be a finite non-zero number (negative: no client-side limit), got %v", o.QPS))
	}
	if o.APIConnections < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.APIConnections: must not be negative, got %d", o.APIConnections))
	}
	if o.APIEncoding != "" {
		if err := o.APIEncoding.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("invalid Options.Burst: must be positive, got %d", o.Burst))
	}
	for _, w := range []struct {
		name string
		n    int
	}{{"SandboxWorkers", o.SandboxWorkers}, {"ClaimWorkers", o.ClaimWorkers}, {"WarmPoolWorkers", o.WarmPoolWorkers}, {"TemplateWorkers", o.TemplateWorkers}} {
		if w.n < 1 {
			errs = append(errs, fmt.Errorf("invalid Options.%s: must be at least 1, got %d", w.name, w.n))
		}
	}
	if o.WebhookPort < 1 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("invalid Options.WebhookPort: must be a TCP port, got %d", o.WebhookPort))
	}
	if o.OperatorUser == "" {
		errs = append(errs, errors.New("invalid Options.OperatorUser: must not be empty"))
	}
	if len(o.PlatformGroups) == 0 {
		errs = append(errs, errors.New("invalid Options.PlatformGroups: must name at least one group"))
	}
	if o.ClusterDomain == "" {
		errs = append(errs, errors.New("invalid Options.ClusterDomain: must not be empty"))
	}
	if o.LeaderElection {
		errs = append(errs, o.LeaderElectionTimings.validate("Options.LeaderElectionTimings.")...)
	}
	if o.ClaimAdmissionMaxWait < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.ClaimAdmissionMaxWait: must not be negative, got %s", o.ClaimAdmissionMaxWait))
	}
	if o.ColdStartGrace < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.ColdStartGrace: must not be negative, got %s", o.ColdStartGrace))
	}
	if o.ClaimReservationTTL < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.ClaimReservationTTL: must not be negative, got %s", o.ClaimReservationTTL))
	}
	if o.Refill.QuietPeriod < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.Refill.QuietPeriod: must not be negative, got %s", o.Refill.QuietPeriod))
	}
	if o.Refill.MaxDeferral < 0 {
		errs = append(errs, fmt.Errorf("invalid Options.Refill.MaxDeferral: must not be negative, got %s", o.Refill.MaxDeferral))
	}
	if o.Refill.MaxStartingPercent < 0 || o.Refill.MaxStartingPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid Options.Refill.MaxStartingPercent: must be between 0 and 100, got %d", o.Refill.MaxStartingPercent))
	}
	if o.Refill.LowWaterPercent < 0 || o.Refill.LowWaterPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid Options.Refill.LowWaterPercent: must be between 0 and 100, got %d", o.Refill.LowWaterPercent))
	}
	if fe := policy.ValidateAnnotationDomains(o.ClaimAnnotationDomains, nil); len(fe) > 0 {
		errs = append(errs, fmt.Errorf("invalid Options.ClaimAnnotationDomains: %w", fe.ToAggregate()))
	}
	errs = append(errs, o.WarmPool.validate("Options.WarmPool.")...)
	return errors.Join(errs...)
}
