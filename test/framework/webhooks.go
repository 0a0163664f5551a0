package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// webhookServer returns the webhook server of a test manager: on the host, port and
// certificate directory envtest configured the webhook configurations for, with the
// certificate served through certs.Watcher as in cmd/sandgate.
func (c *Cluster) webhookServer(t testing.TB) (webhook.Server, *certs.Watcher) {
	t.Helper()
	o := c.Env.WebhookInstallOptions
	if o.LocalServingPort == 0 || len(o.MutatingWebhooks)+len(o.ValidatingWebhooks) == 0 {
		t.Fatalf("ManagerOptions.Webhooks needs a cluster started with controlplane.Options.Webhooks")
	}
	w := certs.NewWatcher(o.LocalServingCertDir)
	return webhook.NewServer(webhook.Options{
		Host:    o.LocalServingHost,
		Port:    o.LocalServingPort,
		CertDir: o.LocalServingCertDir,
		TLSOpts: []func(*tls.Config){w.TLSOpt},
	}), w
}

// setupWebhooks registers the webhooks and the certificate watcher with mgr; with extensions
// the binding guard uses the claim controller's claim-uid index, as the operator does.
func setupWebhooks(mgr manager.Manager, w *certs.Watcher, extensions bool) error {
	if err := mgr.Add(w); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}
	var opts webhooks.Options
	if extensions {
		opts.ClaimUIDIndex = indexes.SandboxClaimUID
	}
	return webhooks.Setup(mgr, opts)
}

// waitForWebhookServer returns once the webhook server completes TLS handshakes: only then
// do the API server's admission calls succeed.
func (c *Cluster) waitForWebhookServer(ctx context.Context, started func() error) error {
	o := c.Env.WebhookInstallOptions
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	var last error
	for {
		if last = started(); last == nil {
			conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that the server is up
			if err == nil {
				return conn.Close()
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook server at %s not serving: %w", addr, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
