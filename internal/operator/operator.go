// Package operator is the one wiring of the sandgate manager: New builds it with every
// controller (reconcilers.Setup) and every admission webhook (webhooks.Setup), the webhook
// server and the watcher of its certificate, the metrics, health and readiness endpoints and
// leader election. cmd/sandgate calls it with the options of its flags, the integration suites
// (test/framework.StartManager) with DefaultOptions and their test settings: what the suites
// run is what ships.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sandgate-dev/sandgate/api"
	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/reconcilers"
)

// LedgerUserAgent ends the User-Agent of admission's ClaimLedger writes, which every replica
// sends (the leader's own ledger writes carry the manager's): an audit of which writes only a
// leader may make leaves them out (the soak's checker does).
const LedgerUserAgent = "admission-ledger"

// Operator is a sandgate manager with every controller and webhook registered: Start (the
// embedded manager's) runs it until its context ends.
type Operator struct {
	manager.Manager
	// Metrics are the controllers' counters, registered in Options.MetricsRegistry.
	Metrics *reconcilers.Metrics

	readyz []namedCheck
	tracer *tracing.Tracer
	// labelDomains is the claims' label allowlist, which admission and the claim controller
	// share and watchLabelDomains keeps in step with its ConfigMap.
	labelDomains        *policy.LabelDomains
	labelDomainsChanged chan event.GenericEvent
	// demand is what the claim stamper records of claims' arrival and the warm pool
	// autoscaler decides from: shared by admission (every replica) and the controller (the
	// leader).
	demand *demand.Recorder
}

type namedCheck struct {
	name  string
	check healthz.Checker
}

// New builds the operator's manager against the cluster of cfg (which it copies, to set QPS,
// Burst and compression) from opts, which Validate must accept. ctx bounds the registration
// of the cache indexes; it need not be the context Start runs with.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid operator options: %w", err)
	}
	log := ctrl.Log.WithName("setup")
	cfg = clientConfig(cfg, opts)
	var watchClient *http.Client
	if opts.SeparateWatchConnection {
		var err error
		if watchClient, err = separateHTTPClient(cfg); err != nil {
			return nil, fmt.Errorf("building the watch connection: %w", err)
		}
	}
	if err := shardAPIConnections(cfg, opts.APIConnections); err != nil {
		return nil, err
	}
	policy.SetRuntimeAnnotationPrefixes(opts.RefusedAnnotationPrefixes)

	registry := opts.MetricsRegistry
	if registry == nil {
		registry = ctrlmetrics.Registry
	}
	metrics, err := reconcilers.NewMetrics(registry)
	if err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	fairShareMetrics, err := fairshare.NewMetrics(registry)
	if err != nil {
		return nil, fmt.Errorf("registering the claim policy metrics: %w", err)
	}
	tracer, flushTraces, err := newTracer(ctx, opts)
	if err != nil {
		return nil, err
	}
	webhookSrv, certWatcher, err := webhookServer(opts, log)
	if err != nil {
		return nil, err
	}
	gracefulShutdown := opts.GracefulShutdownTimeout
	// Admission's writes of ClaimLedgers go out from every replica (each admits claims), so
	// their client is made before the lease fence guards the manager's: each is conditional on
	// the ledger's resourceVersion and needs no leader (webhooks.Options.LedgerClient). Its
	// User-Agent ends in LedgerUserAgent, which tells them apart from the leader's in an
	// audit log.
	ledgerCfg := rest.AddUserAgent(rest.CopyConfig(cfg), LedgerUserAgent)
	leaderLock, err := fenceWrites(cfg, opts, registry)
	if err != nil {
		return nil, err
	}
	timings := opts.LeaderElectionTimings
	scheme := api.NewScheme()
	cacheOpts := cacheOptions(opts)
	cacheOpts.HTTPClient = watchClient
	configNS := configNamespace(opts.ConfigNamespace)
	configMapCache(&cacheOpts, configNS)
	if opts.APIEncoding == APIEncodingCBOR {
		if err := allowClientCBOR(); err != nil {
			return nil, err
		}
	}
	if opts.APIEncoding != APIEncodingJSON && fastSandboxWatch(cacheOpts) {
		httpClient := watchClient
		if httpClient == nil {
			// The manager's own client: client-go shares one transport between alike configs.
			if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
				return nil, fmt.Errorf("building the Sandbox informer's HTTP client: %w", err)
			}
		}
		if cacheOpts.NewInformer, err = sandboxInformer(cfg, httpClient, scheme, opts.APIEncoding); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		NewClient:               reconcilers.NewClientFunc(metrics),
		Metrics:                 metricsServerOptions(opts),
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		PprofBindAddress:        opts.PprofBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// The manager exits on its own after losing the lease; releasing it on a clean stop lets
		// the next replica take over at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
		// The Lease lock tells the write fence of every renewal (fenceWrites).
		LeaderElectionResourceLockInterface: leaderLock,
		LeaseDuration:                       &timings.LeaseDuration,
		RenewDeadline:                       &timings.RenewDeadline,
		RetryPeriod:                         &timings.RetryPeriod,
		GracefulShutdownTimeout:             &gracefulShutdown,
		WebhookServer:                       webhookSrv,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	op := &Operator{Manager: mgr, Metrics: metrics, tracer: tracer,
		labelDomains: &policy.LabelDomains{}, labelDomainsChanged: make(chan event.GenericEvent, 1),
		demand: demand.NewRecorder(opts.Clock)}
	if flushTraces != nil {
		if err := mgr.Add(flushTraces); err != nil {
			return nil, fmt.Errorf("adding the trace flusher: %w", err)
		}
	}
	// agent_sandboxes counts the Sandboxes the cache holds at each scrape.
	if err := registry.Register(reconcilers.NewSandboxCollector(mgr.GetCache(), mgr.GetLogger().WithName("sandbox-collector"))); err != nil {
		return nil, fmt.Errorf("registering the sandbox collector: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := op.addReadyzCheck("informers", cachesSynced(mgr.GetCache())); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	if err := op.watchLabelDomains(ctx, configNS, op.labelDomains, op.labelDomainsChanged); err != nil {
		return nil, err
	}
	ledgerClient, err := client.New(ledgerCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the ledger client: %w", err)
	}
	if err := setupWebhooks(op, opts, certWatcher, metrics.WrapClient(ledgerClient), fairShareMetrics); err != nil {
		return nil, err
	}
	rcfg := reconcilers.Config{
		Metrics:                  metrics,
		ClusterDomain:            opts.ClusterDomain,
		SandboxWorkers:           opts.SandboxWorkers,
		Extensions:               opts.Extensions,
		ColdStartGrace:           opts.ColdStartGrace,
		Refill:                   opts.Refill,
		WarmPool:                 opts.WarmPool.policy(),
		WarmPoolWorkers:          opts.WarmPoolWorkers,
		TemplateWorkers:          opts.TemplateWorkers,
		ClaimWorkers:             opts.ClaimWorkers,
		DisableClaimEvents:       opts.DisableClaimEvents,
		DisableSandboxEvents:     opts.DisableSandboxEvents,
		ScopedChildCaches:        opts.CacheLabelSelectors,
		Tracer:                   tracer,
		RefuseRestamp:            opts.RefuseRestamp,
		ClaimLabelDomains:        op.labelDomains,
		ClaimLabelDomainsChanged: op.labelDomainsChanged,
		ClaimAnnotationDomains:   opts.ClaimAnnotationDomains,
		FairShareMetrics:         fairShareMetrics,
		ClaimReservationTTL:      opts.ClaimReservationTTL,
		SkipNameValidation:       opts.SkipNameValidation,
		Clock:                    opts.Clock,
		Demand:                   op.demand,
	}
	if opts.WarmPoolAutoscaler {
		rcfg.Autoscaler = autoscalerServed(mgr, log)
	}
	if err := reconcilers.Setup(ctx, mgr, rcfg); err != nil {
		return nil, err
	}
	return op, nil
}

// autoscalerServed says whether the API server serves WarmPoolAutoscalers: an install that
// lacks the CRD (the public controller's CRDs only, during a switch-over) runs without the
// autoscaler rather than failing to start its informer.
func autoscalerServed(mgr manager.Manager, log logr.Logger) bool {
	gk := autoscalingv1alpha1.GroupVersion.WithKind("WarmPoolAutoscaler").GroupKind()
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, autoscalingv1alpha1.GroupVersion.Version); err != nil {
		log.Info("not running the warm pool autoscaler: its CRD is not served (install config/crd, then restart)", "error", err.Error())
		return false
	}
	return true
}

// cacheOptions are reconcilers.CacheOptions, restricted to Options.CacheNamespaces.
func cacheOptions(opts Options) cache.Options {
	o := reconcilers.CacheOptions(opts.CacheLabelSelectors)
	if len(opts.CacheNamespaces) > 0 {
		o.DefaultNamespaces = make(map[string]cache.Config, len(opts.CacheNamespaces))
		for _, ns := range opts.CacheNamespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// addReadyzCheck adds a readiness check to the manager's /readyz and to Ready.
func (o *Operator) addReadyzCheck(name string, check healthz.Checker) error {
	if err := o.AddReadyzCheck(name, check); err != nil {
		return err
	}
	o.readyz = append(o.readyz, namedCheck{name: name, check: check})
	return nil
}

// Ready runs the readiness checks the manager serves on /readyz (the webhook server answers
// TLS handshakes, a serving certificate is loaded) and returns their failures, nil once the
// operator is ready. It works with the probe endpoint disabled too: the suites wait on it.
func (o *Operator) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/readyz", http.NoBody)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range o.readyz {
		if err := c.check(req); err != nil {
			errs = append(errs, fmt.Errorf("readiness check %s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}
