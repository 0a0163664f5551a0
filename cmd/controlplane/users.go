package controlplane

import (
	"fmt"

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
