package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// defaultWebhookPaths returns <repo root>/config/webhook: the generated webhook configurations,
// which envtest rewrites to call the local webhook server with its own CA.
func defaultWebhookPaths() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(root, "config", "webhook")}, nil
}

// UserConfig returns a client configuration of the cluster authenticated as user name, in the
// groups given (system:masters when none: permission checks are not what the suites test;
// admission decisions by identity are).
func (c *Cluster) UserConfig(name string, groups ...string) (*rest.Config, error) {
	if len(groups) == 0 {
		groups = []string{"system:masters"}
	}
	// Provisioning signs a client certificate: once per user is enough for every manager of
	// a suite.
	if cfg, ok := c.users.Load(name); ok {
		return rest.CopyConfig(cfg.(*rest.Config)), nil
	}
	// A base of rate limits only: the admin's configuration carries the admin's credentials.
	base := &rest.Config{QPS: c.Config.QPS, Burst: c.Config.Burst}
	user, err := c.Env.AddUser(envtest.User{Name: name, Groups: groups}, base)
	if err != nil {
		return nil, fmt.Errorf("provision user %s: %w", name, err)
	}
	cfg := user.Config()
	c.users.Store(name, cfg)
	return rest.CopyConfig(cfg), nil
}

// ClientAs returns an uncached client acting as user name (see UserConfig).
func (c *Cluster) ClientAs(name string, groups ...string) (client.Client, error) {
	cfg, err := c.UserConfig(name, groups...)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("create client for %s: %w", name, err)
	}
	return cl, nil
}

// OperatorConfig is the manager's identity: webhooks.DefaultOperatorUser, the user the binding
// guard admits, as in an installed cluster.
func (c *Cluster) OperatorConfig() (*rest.Config, error) {
	return c.UserConfig(webhooks.DefaultOperatorUser)
}

// webhookServer returns the webhook server of a test manager: on the host, port and
// certificate directory envtest configured the webhook configurations for, with the
// certificate served through certs.Watcher as in cmd/sandgate.
func (c *Cluster) webhookServer(t testing.TB) (webhook.Server, *certs.Watcher) {
	t.Helper()
	o := c.Env.WebhookInstallOptions
	if o.LocalServingPort == 0 || len(o.MutatingWebhooks)+len(o.ValidatingWebhooks) == 0 {
		t.Fatalf("ManagerOptions.Webhooks needs a cluster started with Options.Webhooks")
	}
	w := certs.NewWatcher(o.LocalServingCertDir)
	return webhook.NewServer(webhook.Options{
		Host:    o.LocalServingHost,
		Port:    o.LocalServingPort,
		CertDir: o.LocalServingCertDir,
		TLSOpts: []func(*tls.Config){w.TLSOpt},
	}), w
}

// setupWebhooks registers the webhooks and the certificate watcher with mgr.
func setupWebhooks(mgr manager.Manager, w *certs.Watcher) error {
	if err := mgr.Add(w); err != nil {
		return fmt.Errorf("adding the certificate watcher: %w", err)
	}
	return webhooks.Setup(mgr, webhooks.Options{})
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
