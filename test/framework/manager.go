package framework

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// Suite-wide bounds for Eventually and Consistently. Generous: the machines are shared.
const (
	Timeout  = 60 * time.Second
	Interval = 50 * time.Millisecond
	// Quiet is how long a suite waits for trailing wake-ups before it counts reconciles and
	// writes: longer than the coalescing delay of pod events, and than the time a starting
	// pod's steps wait to be reported.
	Quiet = max(2*reconcilers.DefaultPodProgressDelay, reconcilers.StartupReportDelay) + 500*time.Millisecond
)

// ManagerOptions configure StartManager. Whatever they leave unset is the operator's
// production default (operator.DefaultOptions): the workers, the refill policy, the cold-start
// grace, the operator user and the platform groups.
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
	// Webhooks serves sandgate's admission webhooks on the address the cluster's webhook
	// configurations call; the cluster must have been started with Options.Webhooks. Only one
	// such manager can run at a time per cluster. Without it the manager serves them too (it
	// is the same operator), on a free loopback port with a self-signed certificate that no
	// webhook configuration calls.
	Webhooks bool
	// Configure, when set, changes the operator's options last: for a test that needs a knob
	// ManagerOptions does not have (worker counts, a clock). Most tests should not need it.
	Configure func(*operator.Options)
}

// Manager is a sandgate manager running in the test process against a Cluster.
type Manager struct {
	// Client reads straight from the API server (no cache) and is not counted.
	Client client.Client
	// Clientset is a typed client, for what controller-runtime's client does not do.
	Clientset kubernetes.Interface
	// Metrics are this manager's counters, in a registry of its own.
	Metrics *reconcilers.Metrics
	// Stop stops the manager before the test ends (a replica going away mid-test) and waits
	// for it; the test's end stops it otherwise. Calling it again does nothing.
	Stop func()
}

// StartManager runs the operator against c until the test ends: operator.New, the wiring
// cmd/sandgate runs, with every controller and webhook and the production defaults, under
// the operator's identity (the user the binding guard admits), with its metrics in a registry
// of its own so that tests read their own counts, and with the metrics and probe endpoints
// off. It returns once the cache has synced and the readiness checks /readyz serves pass:
// the webhook server answers TLS handshakes on its address (with Webhooks, the one the API
// server's admission calls go to) and a serving certificate is loaded.
func (c *Cluster) StartManager(t testing.TB, opts ManagerOptions) *Manager {
	t.Helper()
	oopts := c.operatorOptions(t, opts)
	// The manager acts as the operator's identity, the one the binding guard admits.
	operatorCfg, err := c.operatorConfig()
	if err != nil {
		t.Fatalf("provisioning the operator user: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, operatorCfg, oopts)
	if err != nil {
		cancel()
		t.Fatalf("creating the operator: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
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
	}
	t.Cleanup(stop)
	syncCtx, syncCancel := context.WithTimeout(ctx, Timeout)
	defer syncCancel()
	if !op.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("manager cache did not sync within %s", Timeout)
	}
	if err := waitReady(syncCtx, op); err != nil {
		t.Fatalf("manager not ready within %s: %v", Timeout, err)
	}

	direct, err := client.New(c.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	cs, err := c.Clientset()
	if err != nil {
		t.Fatalf("creating clientset: %v", err)
	}
	return &Manager{Client: direct, Clientset: cs, Metrics: op.Metrics, Stop: stop}
}

// operatorOptions are the production defaults with the test's settings: a metrics registry
// of the manager's own, the cache restricted to the test's namespaces, no metrics or probe
// endpoint, several managers with the same controllers allowed in one process, and the
// webhook server where the cluster calls it (Webhooks) or on a free loopback port.
func (c *Cluster) operatorOptions(t testing.TB, opts ManagerOptions) operator.Options {
	t.Helper()
	o := operator.DefaultOptions()
	o.MetricsRegistry = prometheus.NewRegistry()
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = "0"
	o.CacheNamespaces = opts.Namespaces
	o.SkipNameValidation = true
	o.Extensions = opts.Extensions
	if opts.ClusterDomain != "" {
		o.ClusterDomain = opts.ClusterDomain
	}
	if opts.ColdStartGrace != 0 {
		o.ColdStartGrace = opts.ColdStartGrace
	}
	if opts.Refill != nil {
		o.Refill = *opts.Refill
	}
	if opts.Webhooks {
		c.envtestWebhookServer(t, &o)
	} else {
		o.WebhookHost, o.WebhookPort = "127.0.0.1", freePort(t)
		o.WebhookCertDir, o.SelfSignedCerts = filepath.Join(t.TempDir(), "webhook-certs"), true
	}
	if opts.Configure != nil {
		opts.Configure(&o)
	}
	return o
}

// waitReady returns once every readiness check of op passes, or the last failure when ctx
// ends first.
func waitReady(ctx context.Context, op *operator.Operator) error {
	for {
		err := op.Ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freePort reserves a TCP port on 127.0.0.1 (controlplane.ReservePort) for the test to listen on.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := controlplane.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
