package framework

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/reconcilers"
)

// Suite-wide bounds for Eventually and Consistently. Generous: the machines are shared.
const (
	Timeout  = 60 * time.Second
	Interval = 50 * time.Millisecond
	// Quiet is how long a suite waits for trailing wake-ups before it counts reconciles and
	// writes: longer than the coalescing delay of pod events.
	Quiet = 2*reconcilers.DefaultPodProgressDelay + 500*time.Millisecond
)

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// Namespaces restricts the manager's cache to these namespaces, so that a test's counts
	// are its own; empty means all namespaces.
	Namespaces []string
	// ClusterDomain defaults to cluster.local.
	ClusterDomain string
	// Extensions runs the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers too.
	Extensions bool
	// ColdStartGrace is the claim controller's wait for warm members before a cold start;
	// 0 means reconcilers.DefaultColdStartGrace.
	ColdStartGrace time.Duration
	// Refill is the pools' refill policy; nil means the operator's defaults
	// (reconcilers.DefaultRefillQuietPeriod and DefaultRefillLowWaterPercent).
	Refill *reconcilers.RefillPolicy
	// Webhooks serves sandgate's admission webhooks (webhooks.Setup) on the address the
	// cluster's webhook configurations call; the cluster must have been started with
	// Options.Webhooks. StartManager returns once the webhook server accepts connections.
	// Only one such manager can run at a time per cluster.
	Webhooks bool
}

// Manager is a sandgate manager running in the test process against a Cluster.
type Manager struct {
	// Client reads straight from the API server (no cache) and is not counted.
	Client client.Client
	// Clientset is a typed client, for what controller-runtime's client does not do.
	Clientset kubernetes.Interface
	// Metrics are this manager's counters, in a registry of its own.
	Metrics *reconcilers.Metrics
}

// StartManager runs the sandgate controllers against c, as cmd/sandgate wires them, until
// the test ends. Each manager has its own metrics registry, so tests read their own counts.
func (c *Cluster) StartManager(t testing.TB, opts ManagerOptions) *Manager {
	t.Helper()
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = "cluster.local"
	}
	metrics, err := reconcilers.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("creating metrics: %v", err)
	}
	cacheOpts := reconcilers.CacheOptions()
	if len(opts.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	scheme := api.NewScheme()
	// The manager acts as the operator's identity, the one the binding guard admits.
	operatorCfg, err := c.operatorConfig()
	if err != nil {
		t.Fatalf("provisioning the operator user: %v", err)
	}
	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		NewClient:              reconcilers.NewClientFunc(metrics),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	var certWatcher *certs.Watcher
	if opts.Webhooks {
		mgrOpts.WebhookServer, certWatcher = c.webhookServer(t)
	}
	mgr, err := ctrl.NewManager(operatorCfg, mgrOpts)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	if opts.Webhooks {
		if err := setupWebhooks(mgr, certWatcher, opts.Extensions); err != nil {
			t.Fatalf("setting up webhooks: %v", err)
		}
	}
	refill := reconcilers.RefillPolicy{QuietPeriod: reconcilers.DefaultRefillQuietPeriod, LowWaterPercent: reconcilers.DefaultRefillLowWaterPercent}
	if opts.Refill != nil {
		refill = *opts.Refill
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := reconcilers.Setup(ctx, mgr, reconcilers.Config{
		Refill:             refill,
		Metrics:            metrics,
		ClusterDomain:      opts.ClusterDomain,
		SandboxWorkers:     4,
		Extensions:         opts.Extensions,
		ColdStartGrace:     opts.ColdStartGrace,
		WarmPoolWorkers:    2,
		ClaimWorkers:       4,
		SkipNameValidation: true,
	}); err != nil {
		cancel()
		t.Fatalf("setting up controllers: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager stopped with an error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("manager did not stop within 30s")
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, Timeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("manager cache did not sync within %s", Timeout)
	}
	if opts.Webhooks {
		started := mgr.GetWebhookServer().StartedChecker()
		if err := c.waitForWebhookServer(syncCtx, func() error { return started(nil) }); err != nil {
			t.Fatalf("waiting for the webhook server: %v", err)
		}
	}

	direct, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatalf("creating clientset: %v", err)
	}
	return &Manager{Client: direct, Clientset: cs, Metrics: metrics}
}
