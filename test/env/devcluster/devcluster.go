// Package devcluster is what test/cmd/sandgate-dev (`make dev-cluster`) parses flags for: a local
// Kubernetes control plane with simulated nodes for developing sandgate by hand, the same one
// the integration tests get from test/env/controlplane: etcd, kube-apiserver with the sandgate
// CRDs, kube-scheduler, kube-controller-manager (garbage collector, namespace and storage
// controllers, with a default StorageClass and volumes for PVCs) and kwok, whose fake Nodes
// take any Pod to Running and Ready.
//
// Run writes an admin kubeconfig and one for the operator, prints how to use them and how to
// run the operator so that the API server reaches its webhooks, and runs until its context
// ends; then it stops every process, removes its temporary directories and deletes the
// kubeconfigs it wrote.
package devcluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// Options are what the cluster looks like; each field is the sandgate-dev flag named in its
// comment (AddFlags).
type Options struct {
	Nodes      int                     // --nodes: number of simulated nodes (at least 1)
	Profile    controlplane.Profile    // --profile: how pods become ready
	PodStartup controlplane.PodStartup // --pod-startup-median, -p99, -seed of --profile realistic
	Kubeconfig string                  // --kubeconfig: where to write the admin kubeconfig
	Webhooks   bool                    // --webhooks: also install the admission webhook configurations
}

// DefaultOptions returns the options of sandgate-dev without flags.
func DefaultOptions() Options {
	return Options{
		Nodes:      controlplane.DefaultNodes,
		Profile:    controlplane.ProfileFast,
		Kubeconfig: filepath.Join("bin", "sandgate-dev.kubeconfig"),
	}
}

// AddFlags registers the flags of sandgate-dev on fs, bound to o's fields, with o's values
// (DefaultOptions) as their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "number of simulated nodes (at least 1)")
	controlplane.AddProfileFlags(fs, &o.Profile, &o.PodStartup)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"where to write the admin kubeconfig (removed on exit); the operator's goes beside it")
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks,
		"also install sandgate's admission webhook configurations (they fail closed: writes of sandgate's kinds are refused until the operator runs)")
}

// validate checks o and makes its kubeconfig path absolute.
func (o *Options) validate() error {
	if o.Nodes < 1 {
		return fmt.Errorf("invalid --nodes %d: want at least 1", o.Nodes)
	}
	if err := controlplane.CheckProfile(o.Profile, o.PodStartup); err != nil {
		return fmt.Errorf("invalid --profile or --pod-startup-*: %w", err)
	}
	if o.Kubeconfig == "" {
		return errors.New("invalid --kubeconfig: empty path")
	}
	abs, err := filepath.Abs(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("resolve --kubeconfig: %w", err)
	}
	o.Kubeconfig = abs
	return nil
}

// Run starts the cluster, prints how to use it to stdout (progress to stderr), runs until ctx
// ends and stops it. The control plane's own signal handler is off: the caller cancels ctx on
// a signal, which cancels the start as well as ends the run, so that the kubeconfigs get
// removed too.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (retErr error) {
	if err := o.validate(); err != nil {
		return err
	}
	start := time.Now()
	cluster, err := controlplane.Start(ctx, controlplane.Options{
		Nodes:           o.Nodes,
		Profile:         o.Profile,
		PodStartup:      o.PodStartup,
		Webhooks:        o.Webhooks,
		Log:             stderr,
		NoSignalHandler: true,
	})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer func() {
		fmt.Fprintln(stderr, "sandgate-dev: stopping...")
		if err := cluster.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stop cluster: %w", err))
		}
		for _, path := range []string{o.Kubeconfig, operatorKubeconfig(o)} {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				retErr = errors.Join(retErr, fmt.Errorf("remove kubeconfig: %w", err))
			}
		}
		if retErr == nil {
			fmt.Fprintln(stderr, "sandgate-dev: stopped, temporary files removed")
		}
	}()
	if err := cluster.WriteKubeconfig(o.Kubeconfig); err != nil {
		return err
	}
	if err := cluster.WriteUserKubeconfig(webhooks.DefaultOperatorUser, operatorKubeconfig(o)); err != nil {
		return err
	}
	printUsage(stdout, cluster, o, time.Since(start))

	// Run until a signal; report a component that dies meanwhile.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := cluster.Err(); err != nil {
				return fmt.Errorf("cluster broke: %w", err)
			}
		}
	}
}

// operatorKubeconfig is where the operator's kubeconfig goes: beside the admin's. The operator
// acts as webhooks.DefaultOperatorUser, the identity the binding guard admits.
func operatorKubeconfig(o Options) string {
	return filepath.Join(filepath.Dir(o.Kubeconfig), "sandgate-dev-operator.kubeconfig")
}

// printUsage tells how to reach the running cluster.
func printUsage(w io.Writer, cluster *controlplane.Cluster, o Options, took time.Duration) {
	kubectl := filepath.Join(cluster.BinaryDir, "kubectl")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, kubectl); err == nil && filepath.IsLocal(rel) {
			kubectl = rel
		}
	}
	host, port, certDir := cluster.WebhookAddress()
	admission := "the CRDs' conversion webhook (v1alpha1)"
	if o.Webhooks {
		admission = "the conversion and admission webhooks (until it runs, writes of sandgate's kinds are refused)"
	}
	fmt.Fprintf(w, `
sandgate-dev: control plane ready in %s: %s
  nodes:   %d simulated (kwok, profile %s): %v
  kubectl: %s

Use it from another shell:

  export KUBECONFIG=%s
  %s get nodes
  %s apply -k config/samples

Run the operator where the API server calls %s:

  go run ./cmd/sandgate --kubeconfig %s --extensions \
      --webhook-host %s --webhook-port %d --webhook-cert-dir %s

Press Ctrl-C to stop everything and remove the temporary files.
`, took.Round(100*time.Millisecond), cluster.Config.Host, len(cluster.NodeNames), controlplane.DescribeProfile(o.Profile, o.PodStartup),
		cluster.NodeNames, kubectl, o.Kubeconfig, kubectl, kubectl,
		admission, operatorKubeconfig(o), host, port, certDir)
}
