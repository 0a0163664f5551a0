package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandgate-dev/sandgate/api"
)

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

// WriteUserKubeconfig writes a kubeconfig for user name in the groups given (system:masters
// when none) to path (mode 0600): for a process run by hand against the cluster under an
// identity of its own, such as the operator, which the binding guard recognises by name.
func (c *Cluster) WriteUserKubeconfig(name, path string, groups ...string) error {
	if len(groups) == 0 {
		groups = []string{"system:masters"}
	}
	user, err := c.Env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return fmt.Errorf("provision user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("build kubeconfig for %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", name, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", name, err)
	}
	return nil
}

// WebhookAddress is where the cluster calls its webhooks — the conversion webhook of the
// sandgate CRDs always, the admission webhooks when started with Options.Webhooks — and the
// directory holding the serving certificate (tls.crt, tls.key) it trusts: the operator's
// --webhook-host, --webhook-port and --webhook-cert-dir.
func (c *Cluster) WebhookAddress() (host string, port int, certDir string) {
	o := c.Env.WebhookInstallOptions
	return o.LocalServingHost, o.LocalServingPort, o.LocalServingCertDir
}
