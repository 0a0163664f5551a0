package helmchart

import (
	"context"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Helm runs Helm's actions on the cluster of a kubeconfig, storing releases (as Helm's CLI
// does, in Secrets) in Namespace.
type Helm struct {
	Kubeconfig string
	Namespace  string
	// Timeout bounds each action; 0 means two minutes.
	Timeout time.Duration
}

func (h Helm) configuration() (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &h.Kubeconfig
	flags.Namespace = &h.Namespace
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, h.Namespace, "secret"); err != nil {
		return nil, fmt.Errorf("configuring helm: %w", err)
	}
	return cfg, nil
}

func (h Helm) timeout() time.Duration {
	if h.Timeout == 0 {
		return 2 * time.Minute
	}
	return h.Timeout
}

// Install installs the chart of the repository at root as ReleaseName, with values over its
// defaults, as `helm install` does (server-side apply), without waiting for the objects to
// become ready: the local control plane runs no pods.
func (h Helm) Install(ctx context.Context, root string, values map[string]any) (*releasev1.Release, error) {
	ch, err := LoadChart(root)
	if err != nil {
		return nil, err
	}
	cfg, err := h.configuration()
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = ReleaseName
	install.Namespace = h.Namespace
	install.WaitStrategy = kube.HookOnlyStrategy
	install.Timeout = h.timeout()
	rel, err := install.RunWithContext(ctx, ch, values)
	if err != nil {
		return nil, fmt.Errorf("helm install: %w", err)
	}
	return asRelease(rel)
}

// Upgrade upgrades the release to the chart of the repository at root with values over its
// defaults (not the release's earlier values), as `helm upgrade` does.
func (h Helm) Upgrade(ctx context.Context, root string, values map[string]any) (*releasev1.Release, error) {
	ch, err := LoadChart(root)
	if err != nil {
		return nil, err
	}
	cfg, err := h.configuration()
	if err != nil {
		return nil, err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = h.Namespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	upgrade.Timeout = h.timeout()
	rel, err := upgrade.RunWithContext(ctx, ReleaseName, ch, values)
	if err != nil {
		return nil, fmt.Errorf("helm upgrade: %w", err)
	}
	return asRelease(rel)
}

// Uninstall uninstalls the release, as `helm uninstall` does, and returns what Helm reports
// it kept (the objects with helm.sh/resource-policy: keep).
func (h Helm) Uninstall() (kept string, err error) {
	cfg, err := h.configuration()
	if err != nil {
		return "", err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	uninstall.Timeout = h.timeout()
	res, err := uninstall.Run(ReleaseName)
	if err != nil {
		return "", fmt.Errorf("helm uninstall: %w", err)
	}
	return res.Info, nil
}

func asRelease(rel any) (*releasev1.Release, error) {
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, want a v1 release", rel)
	}
	return r, nil
}
