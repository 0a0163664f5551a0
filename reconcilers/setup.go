package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Cache indexes, shared by the manager, the test suites and fake clients.
const (
	// IndexPodController indexes pods by the name of the Sandbox that controls them.
	IndexPodController = "sandgate.podController"
)

// Config configures the controllers Setup registers.
type Config struct {
	// Metrics receives the controllers' counters; required.
	Metrics *Metrics
	// ClusterDomain is the cluster's DNS domain, for Sandbox status.serviceFQDN.
	ClusterDomain string
	// SandboxWorkers is the number of concurrent Sandbox reconciles.
	SandboxWorkers int
	// PodProgressDelay: see SandboxReconciler.PodProgressDelay; 0 means
	// DefaultPodProgressDelay.
	PodProgressDelay time.Duration
	// SkipNameValidation lets tests run several managers with the same controllers in one
	// process.
	SkipNameValidation bool
}

// Setup registers the cache indexes and the controllers with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	if cfg.Metrics == nil {
		return errors.New("reconcilers: Config.Metrics is required")
	}
	if cfg.PodProgressDelay == 0 {
		cfg.PodProgressDelay = DefaultPodProgressDelay
	}
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	sandboxes := &SandboxReconciler{
		Client:           mgr.GetClient(),
		Recorder:         mgr.GetEventRecorder("sandgate-sandbox-controller"),
		Metrics:          cfg.Metrics,
		ClusterDomain:    cfg.ClusterDomain,
		PodProgressDelay: cfg.PodProgressDelay,
	}
	if err := sandboxes.SetupWithManager(mgr, controller.Options{
		MaxConcurrentReconciles: cfg.SandboxWorkers,
		SkipNameValidation:      &cfg.SkipNameValidation,
	}); err != nil {
		return fmt.Errorf("setting up the sandbox controller: %w", err)
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

func podControllerSandbox(obj client.Object) []string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Sandbox" || ref.APIVersion != agentsv1beta1.GroupVersion.String() {
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
