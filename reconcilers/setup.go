package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Cache indexes, shared by the manager, the test suites and fake clients.
const (
	// IndexPodController indexes pods by the name of the Sandbox that controls them.
	IndexPodController = "sandgate.podController"
	// IndexSandboxClaimUID indexes Sandboxes by their claim-uid label: how a claim finds the
	// Sandbox bound to it, after a restart too.
	IndexSandboxClaimUID = "sandgate.sandboxClaimUID"
	// IndexSandboxPool indexes Sandboxes by the name of the pool that controls them.
	IndexSandboxPool = "sandgate.sandboxPool"
	// IndexPoolTemplate indexes SandboxWarmPools by spec.sandboxTemplateRef.name.
	IndexPoolTemplate = "sandgate.poolTemplate"
	// IndexClaimPool indexes SandboxClaims by spec.warmPoolRef.name.
	IndexClaimPool = "sandgate.claimPool"
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
	// MemberReadyTimeout: see defaultMemberReadyTimeout; 0 means the default.
	MemberReadyTimeout time.Duration
	// WarmPoolWorkers and ClaimWorkers are the numbers of concurrent reconciles of pools and
	// claims (templates get WarmPoolWorkers too); 0 means 1.
	WarmPoolWorkers, ClaimWorkers int
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
}

// Setup registers the cache indexes and the controllers with mgr.
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
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if cfg.Extensions {
		if err := SetupExtensionIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
			return err
		}
	}
	// Claims and pools share what they know of claims' arrival; so does the Sandbox controller,
	// to leave bookkeeping writes until claims pause.
	var activity *poolActivity
	if cfg.Extensions {
		activity = newPoolActivity()
	}
	sandboxes := &sandboxReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("sandgate-sandbox-controller"),
		Metrics:          cfg.Metrics,
		Clock:            cfg.Clock,
		ClusterDomain:    cfg.ClusterDomain,
		PodProgressDelay: cfg.PodProgressDelay,
		BookkeepingDelay: cfg.Refill.QuietPeriod,
		activity:         activity,
	}
	if err := sandboxes.SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: cfg.SandboxWorkers,
		SkipNameValidation:      &cfg.SkipNameValidation,
	}); err != nil {
		return fmt.Errorf("setting up the sandbox controller: %w", err)
	}
	if cfg.Extensions {
		return setupExtensions(mgr, cfg, activity)
	}
	return nil
}

// setupExtensions registers the SandboxTemplate, SandboxWarmPool and SandboxClaim
// controllers.
func setupExtensions(mgr ctrl.Manager, cfg Config, activity *poolActivity) error {
	options := func(workers int) controller.Options {
		return controller.Options{MaxConcurrentReconciles: max(workers, 1), SkipNameValidation: &cfg.SkipNameValidation}
	}
	templates := &templateReconciler{Client: mgr.GetClient(), Metrics: cfg.Metrics, Clock: cfg.Clock}
	if err := templates.SetupWithManager(mgr, options(cfg.WarmPoolWorkers)); err != nil {
		return fmt.Errorf("setting up the template controller: %w", err)
	}
	pools := &warmPoolReconciler{
		Client:             mgr.GetClient(),
		Recorder:           mgr.GetEventRecorder("sandgate-warmpool-controller"),
		Metrics:            cfg.Metrics,
		Clock:              cfg.Clock,
		Refill:             cfg.Refill,
		MemberReadyTimeout: cfg.MemberReadyTimeout,
		activity:           activity,
	}
	if err := pools.SetupWithManager(mgr, options(cfg.WarmPoolWorkers)); err != nil {
		return fmt.Errorf("setting up the warm pool controller: %w", err)
	}
	claims := &claimReconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         mgr.GetEventRecorder("sandgate-claim-controller"),
		Metrics:          cfg.Metrics,
		Clock:            cfg.Clock,
		Index:            newWarmIndex(),
		ColdStartGrace:   cfg.ColdStartGrace,
		BookkeepingDelay: cfg.Refill.QuietPeriod,
		RefuseRestamp:    cfg.RefuseRestamp,
		activity:         activity,
	}
	if err := claims.SetupWithManager(mgr, options(cfg.ClaimWorkers)); err != nil {
		return fmt.Errorf("setting up the claim controller: %w", err)
	}
	return nil
}

// SetupIndexes registers the field indexes the controllers query.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodController, podControllerSandbox); err != nil {
		return fmt.Errorf("indexing pods by controlling sandbox: %w", err)
	}
	return nil
}

// SetupExtensionIndexes registers the field indexes of the template, pool and claim
// controllers.
func SetupExtensionIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		name    string
		extract client.IndexerFunc
		what    string
	}{
		{&agentsv1beta1.Sandbox{}, IndexSandboxClaimUID, sandboxClaimUID, "sandboxes by claim uid"},
		{&agentsv1beta1.Sandbox{}, IndexSandboxPool, sandboxPool, "sandboxes by controlling pool"},
		{&extv1beta1.SandboxWarmPool{}, IndexPoolTemplate, poolTemplate, "pools by template"},
		{&extv1beta1.SandboxClaim{}, IndexClaimPool, claimPool, "claims by pool"},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.name, ix.extract); err != nil {
			return fmt.Errorf("indexing %s: %w", ix.what, err)
		}
	}
	return nil
}

func sandboxClaimUID(obj client.Object) []string {
	if uid := obj.GetLabels()[agentsv1beta1.LabelClaimUID]; uid != "" {
		return []string{uid}
	}
	return nil
}

func sandboxPool(obj client.Object) []string {
	if pool, ok := poolOf(obj); ok {
		return []string{pool.Name}
	}
	return nil
}

func poolTemplate(obj client.Object) []string {
	if p, ok := obj.(*extv1beta1.SandboxWarmPool); ok && p.Spec.SandboxTemplateRef.Name != "" {
		return []string{p.Spec.SandboxTemplateRef.Name}
	}
	return nil
}

func claimPool(obj client.Object) []string {
	if c, ok := obj.(*extv1beta1.SandboxClaim); ok && c.Spec.WarmPoolRef.Name != "" {
		return []string{c.Spec.WarmPoolRef.Name}
	}
	return nil
}

func podControllerSandbox(obj client.Object) []string {
	ref := policy.ControllerOf(obj, policy.SandboxKind)
	if ref == nil {
		return nil
	}
	return []string{ref.Name}
}

// CacheOptions are the manager's cache settings: objects are stored without managedFields,
// which no controller reads and which make up much of a pod's size.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
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
