package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// Config configures the controllers Setup registers.
type Config struct {
	// Metrics receives the controllers' counters; required.
	Metrics *Metrics
	// ClusterDomain is the cluster's DNS domain, for Sandbox status.serviceFQDN.
	ClusterDomain string
	// SandboxWorkers is the number of concurrent Sandbox reconciles.
	SandboxWorkers int
	// PodProgressDelay: see sandboxReconciler.PodProgressDelay; 0 means
	// DefaultPodProgressDelay.
	PodProgressDelay time.Duration
	// Extensions runs the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.
	Extensions bool
	// ColdStartGrace: see DefaultColdStartGrace; 0 means the default.
	ColdStartGrace time.Duration
	// WarmPool holds the public controller's warm pool settings (eviction marking, readiness
	// grace, unschedulable hold, batch size, refill rate, replenish delay); zero fields mean
	// their defaults (WarmPoolPolicy).
	WarmPool WarmPoolPolicy
	// WarmPoolWorkers and ClaimWorkers are the numbers of concurrent reconciles of pools and
	// claims; 0 means 1.
	WarmPoolWorkers, ClaimWorkers int
	// TemplateWorkers is the number of concurrent template reconciles; 0 means
	// WarmPoolWorkers.
	TemplateWorkers int
	// DisableClaimEvents makes the claim controller emit no Events (fewer API writes in
	// claim bursts).
	DisableClaimEvents bool
	// DisableSandboxEvents makes the Sandbox controller emit no Events.
	DisableSandboxEvents bool
	// ScopedChildCaches says the manager caches only the Pods and Services that carry the
	// sandbox tracking label (CacheOptions(true), --cache-label-selectors): a child's name
	// the cache does not show is then looked up on the API server before it is built, so that
	// an unlabelled object holding the name is seen as taken, as it would be with a full cache.
	ScopedChildCaches bool
	// Tracer traces the claim controller's binds and readiness; nil is tracing off.
	Tracer *tracing.Tracer
	// SkipNameValidation lets tests run several managers with the same controllers in one
	// process.
	SkipNameValidation bool
	// Clock is every controller's clock; nil means the real one.
	Clock clock.Clock
	// RefuseRestamp leaves a claim whose stamped template version is gone unserved
	// (Ready=False, StampedVersionGone) instead of restamping it to the current version.
	RefuseRestamp bool
	// Refill says when pools replace the members claims took; the zero value creates them
	// at once (DefaultRefillQuietPeriod and DefaultRefillLowWaterPercent suit bursts).
	Refill RefillPolicy
	// ClaimLabelDomains is the allowlist of the label domains a claim's additionalPodMetadata
	// may use, the one admission applies; nil is the public default
	// (policy.DefaultClaimLabelDomains). An event on ClaimLabelDomainsChanged, sent after the
	// list changed, wakes the unbound claims refused for their metadata.
	ClaimLabelDomains        *policy.LabelDomains
	ClaimLabelDomainsChanged <-chan event.GenericEvent
	// ClaimAnnotationDomains is the allowlist of the annotation domains a claim's
	// additionalPodMetadata may use, the one admission applies; empty is
	// policy.DefaultClaimAnnotationDomains.
	ClaimAnnotationDomains []string
	// FairShareMetrics meter what ClaimPolicies' tenants are served; nil meters nothing.
	FairShareMetrics *fairshare.Metrics
	// ClaimReservationTTL is how long a reservation admission made for a claim that never
	// appears is counted; 0 means DefaultClaimReservationTTL.
	ClaimReservationTTL time.Duration
	// Autoscaler runs the WarmPoolAutoscaler controller, deciding from Demand (required with
	// it: the recorder the stamping webhook feeds). It needs no other controller: a pool
	// another controller serves scales the same way.
	Autoscaler bool
	Demand     *demand.Recorder
}

// Setup registers the cache indexes (package indexes) and the controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	if cfg.Metrics == nil {
		return errors.New("reconcilers: Config.Metrics is required")
	}
	if cfg.PodProgressDelay == 0 {
		cfg.PodProgressDelay = DefaultPodProgressDelay
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Autoscaler && cfg.Demand == nil {
		return errors.New("reconcilers: Config.Demand is required with Config.Autoscaler")
	}
	if err := indexes.Setup(ctx, mgr.GetFieldIndexer(), cfg.Extensions, cfg.Autoscaler); err != nil {
		return err
	}
	// Claims and pools share what they know of claims' arrival; so does the Sandbox controller,
	// to leave bookkeeping writes until claims pause.
	var activity *poolActivity
	if cfg.Extensions {
		activity = newPoolActivity()
	}
	var sandboxRecorder events.EventRecorder = noEvents{}
	if !cfg.DisableSandboxEvents {
		sandboxRecorder = mgr.GetEventRecorder("sandgate-sandbox-controller")
	}
	sandboxes := &sandboxReconciler{
		Client:           mgr.GetClient(),
		Recorder:         sandboxRecorder,
		Metrics:          cfg.Metrics,
		Clock:            cfg.Clock,
		ClusterDomain:    cfg.ClusterDomain,
		PodProgressDelay: cfg.PodProgressDelay,
		BookkeepingDelay: cfg.Refill.QuietPeriod,
		APIReader:        mgr.GetAPIReader(),
		activity:         activity,
	}
	if cfg.ScopedChildCaches {
		sandboxes.uncachedChildren = mgr.GetAPIReader()
	}
	if err := sandboxes.SetupWithManager(mgr, queueOptions(controller.Options{
		MaxConcurrentReconciles: cfg.SandboxWorkers,
		SkipNameValidation:      &cfg.SkipNameValidation,
	})); err != nil {
		return fmt.Errorf("setting up the sandbox controller: %w", err)
	}
	if cfg.Extensions {
		// The claim controller writes pods' routes beside the Sandbox controller's metadata
		// writes: they share what was written (podmetadata.go; made by SetupWithManager).
		if err := setupExtensions(mgr, cfg, activity, sandboxes.podViews); err != nil {
			return err
		}
	}
	if cfg.Autoscaler {
		autoscalers := &autoscalerReconciler{
			Client:    mgr.GetClient(),
			APIReader: mgr.GetAPIReader(),
			Recorder:  mgr.GetEventRecorder("sandgate-warmpoolautoscaler"),
			Metrics:   cfg.Metrics,
			Clock:     cfg.Clock,
			Demand:    cfg.Demand,
		}
		// One worker: a reconcile is a few cache reads and, rarely, one write.
		opts := queueOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &cfg.SkipNameValidation})
		if err := autoscalers.SetupWithManager(mgr, opts); err != nil {
			return fmt.Errorf("setting up the warm pool autoscaler: %w", err)
		}
	}
	return nil
}

// setupExtensions registers the SandboxTemplate, SandboxWarmPool and SandboxClaim
// controllers.
func setupExtensions(mgr ctrl.Manager, cfg Config, activity *poolActivity, podViews *podMetadataViews) error {
	options := func(workers int) controller.Options {
		return queueOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1), SkipNameValidation: &cfg.SkipNameValidation})
	}
	templates := &templateReconciler{Client: mgr.GetClient(), Metrics: cfg.Metrics, Clock: cfg.Clock}
	templateWorkers := cfg.TemplateWorkers
	if templateWorkers == 0 {
		templateWorkers = cfg.WarmPoolWorkers
	}
	if err := templates.SetupWithManager(mgr, options(templateWorkers)); err != nil {
		return fmt.Errorf("setting up the template controller: %w", err)
	}
	pools := &warmPoolReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("sandgate-warmpool-controller"),
		Metrics:  cfg.Metrics,
		Clock:    cfg.Clock,
		Refill:   cfg.Refill,
		WarmPool: cfg.WarmPool,
		activity: activity,
	}
	if err := pools.SetupWithManager(mgr, options(cfg.WarmPoolWorkers)); err != nil {
		return fmt.Errorf("setting up the warm pool controller: %w", err)
	}
	var claimRecorder events.EventRecorder = noEvents{}
	if !cfg.DisableClaimEvents {
		claimRecorder = mgr.GetEventRecorder("sandgate-claim-controller")
	}
	// Warm shares are decided by the claim controller and reported by the policy controller,
	// from the same record of which claims hold warm members; so is what each was served.
	shares, meter := newWarmShares(), newPolicyMeter()
	claims := &claimReconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Recorder:            claimRecorder,
		Metrics:             cfg.Metrics,
		Clock:               cfg.Clock,
		Index:               newWarmIndex(),
		ColdStartGrace:      cfg.ColdStartGrace,
		BookkeepingDelay:    cfg.Refill.QuietPeriod,
		MaxBookkeepingDelay: cfg.Refill.MaxDeferral,
		// A sixteenth of the claim workers (4 of the default 64) write bookkeeping that came
		// due under traffic; the rest stay with the claims.
		BookkeepingConcurrency: max(1, cfg.ClaimWorkers/16),
		RefuseRestamp:          cfg.RefuseRestamp,
		LabelDomains:           cfg.ClaimLabelDomains,
		LabelDomainsChanged:    cfg.ClaimLabelDomainsChanged,
		AnnotationDomains:      cfg.ClaimAnnotationDomains,
		Tracer:                 cfg.Tracer,
		activity:               activity,
		podViews:               podViews,
		shares:                 shares,
		meter:                  meter,
		FairShareMetrics:       cfg.FairShareMetrics,
	}
	if err := claims.SetupWithManager(mgr, options(cfg.ClaimWorkers)); err != nil {
		return fmt.Errorf("setting up the claim controller: %w", err)
	}
	policies := &claimPolicyReconciler{Client: mgr.GetClient(), Metrics: cfg.Metrics, FairShareMetrics: cfg.FairShareMetrics,
		Clock: cfg.Clock, ReservationTTL: cfg.ClaimReservationTTL, meter: meter, shares: shares}
	if err := policies.SetupWithManager(mgr, options(1)); err != nil {
		return fmt.Errorf("setting up the claim policy controller: %w", err)
	}
	return nil
}

// noEvents is the recorder of a controller told to emit no Events.
type noEvents struct{}

func (noEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// CacheOptions are the manager's cache settings: objects are stored without managedFields,
// which no controller reads and which make up much of a pod's size.
//
// With scopeChildren (--cache-label-selectors, as the public controller's flag), the Pod and
// Service informers hold only objects carrying agents.x-k8s.io/sandbox-name-hash, which every
// child a Sandbox builds carries: list/watch volume, decode CPU and memory follow the
// sandboxes, not the cluster. Config.ScopedChildCaches must then be set too.
func CacheOptions(scopeChildren bool) cache.Options {
	o := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if scopeChildren {
		tracked := labels.NewSelector().Add(mustRequirement(agentsv1beta1.LabelSandboxNameHash, selection.Exists))
		o.ByObject = map[client.Object]cache.ByObject{
			&corev1.Pod{}:     {Label: tracked},
			&corev1.Service{}: {Label: tracked},
		}
	}
	return o
}

func mustRequirement(key string, op selection.Operator, vals ...string) labels.Requirement {
	r, err := labels.NewRequirement(key, op, vals)
	if err != nil {
		panic(err)
	}
	return *r
}

// NewClientFunc returns a manager client constructor whose writes are counted in m.
func NewClientFunc(m *Metrics) client.NewClientFunc {
	return func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		return m.WrapClient(c), nil
	}
}
