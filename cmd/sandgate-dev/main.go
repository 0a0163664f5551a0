// Command sandgate-dev runs a local Kubernetes control plane with simulated nodes for
// developing sandgate by hand — the same one the integration tests get from
// cmd/controlplane: etcd, kube-apiserver with the sandgate CRDs, kube-scheduler,
// kube-controller-manager (garbage collector, namespace and storage controllers, with a
// default StorageClass and volumes for PVCs) and kwok, whose fake Nodes take any Pod to
// Running and Ready. Nothing runs in containers and everything listens on 127.0.0.1.
//
// Usage:
//
//	go run ./cmd/sandgate-dev [--nodes 3] [--profile fast|kubelet] [--kubeconfig bin/sandgate-dev.kubeconfig] [--webhooks]
//
// It writes an admin kubeconfig and one for the operator, prints how to use them and how to run
// the operator so that the API server reaches its webhooks (the CRDs' conversion webhook, which
// serves v1alpha1, always; with --webhooks also the admission webhooks, which then fail closed
// until the operator runs), and runs until SIGINT (Ctrl-C) or SIGTERM; then it stops every
// process, removes its temporary directories and deletes the kubeconfigs it wrote. The binaries come from `make tools` (bin/k8s/<version>) or
// $KUBEBUILDER_ASSETS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandgate-dev/sandgate/test/controlplane"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "sandgate-dev: %v\n", err)
		os.Exit(1)
	}
}

// config is what the command line asks for.
type config struct {
	nodes      int
	profile    controlplane.Profile
	kubeconfig string
	webhooks   bool
}

// parseFlags parses and validates args.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("sandgate-dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sandgate-dev [flags]\n\n"+
			"Runs a local control plane with simulated nodes until Ctrl-C.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	nodes := fs.Int("nodes", controlplane.DefaultNodes, "number of simulated nodes (at least 1)")
	profile := fs.String("profile", string(controlplane.ProfileFast),
		"how pods become ready: fast (one status update) or kubelet (separate updates tens of ms apart)")
	kubeconfig := fs.String("kubeconfig", filepath.Join("bin", "sandgate-dev.kubeconfig"),
		"where to write the admin kubeconfig (removed on exit); the operator's goes beside it")
	webhooks := fs.Bool("webhooks", false,
		"also install sandgate's admission webhook configurations (they fail closed: writes of sandgate's kinds are refused until the operator runs)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	cfg := config{nodes: *nodes, profile: controlplane.Profile(*profile), kubeconfig: *kubeconfig, webhooks: *webhooks}
	if cfg.nodes < 1 {
		return config{}, fmt.Errorf("invalid --nodes %d: want at least 1", cfg.nodes)
	}
	valid := false
	for _, p := range controlplane.Profiles {
		valid = valid || cfg.profile == p
	}
	if !valid {
		return config{}, fmt.Errorf("invalid --profile %q: want %q or %q", *profile, controlplane.ProfileFast, controlplane.ProfileKubelet)
	}
	if cfg.kubeconfig == "" {
		return config{}, errors.New("invalid --kubeconfig: empty path")
	}
	abs, err := filepath.Abs(cfg.kubeconfig)
	if err != nil {
		return config{}, fmt.Errorf("resolve --kubeconfig: %w", err)
	}
	cfg.kubeconfig = abs
	return cfg, nil
}

// run starts the cluster, waits for a signal and stops it.
func run(args []string, stdout, stderr io.Writer) (retErr error) {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// Signals cancel the start as well as end the run; the control plane's own handler is off
	// so that the kubeconfig gets removed too.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	start := time.Now()
	cluster, err := controlplane.Start(ctx, controlplane.Options{
		Nodes:           cfg.nodes,
		Profile:         cfg.profile,
		Webhooks:        cfg.webhooks,
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
		for _, path := range []string{cfg.kubeconfig, operatorKubeconfig(cfg)} {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				retErr = errors.Join(retErr, fmt.Errorf("remove kubeconfig: %w", err))
			}
		}
		if retErr == nil {
			fmt.Fprintln(stderr, "sandgate-dev: stopped, temporary files removed")
		}
	}()
	if err := cluster.WriteKubeconfig(cfg.kubeconfig); err != nil {
		return err
	}
	if err := cluster.WriteUserKubeconfig(webhooks.DefaultOperatorUser, operatorKubeconfig(cfg)); err != nil {
		return err
	}
	printUsage(stdout, cluster, cfg, time.Since(start))

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
func operatorKubeconfig(cfg config) string {
	return filepath.Join(filepath.Dir(cfg.kubeconfig), "sandgate-dev-operator.kubeconfig")
}

// printUsage tells how to reach the running cluster.
func printUsage(w io.Writer, cluster *controlplane.Cluster, cfg config, took time.Duration) {
	kubectl := filepath.Join(cluster.BinaryDir, "kubectl")
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, kubectl); err == nil && filepath.IsLocal(rel) {
			kubectl = rel
		}
	}
	host, port, certDir := cluster.WebhookAddress()
	admission := "the CRDs' conversion webhook (v1alpha1)"
	if cfg.webhooks {
		admission = "the conversion and admission webhooks (until it runs, writes of sandgate's kinds are refused)"
	}
	fmt.Fprintf(w, `
sandgate-dev: control plane ready in %s: %s
  nodes:   %d simulated (kwok, profile %q): %v
  kubectl: %s

Use it from another shell:

  export KUBECONFIG=%s
  %s get nodes
  %s apply -k config/samples

Run the operator where the API server calls %s:

  go run ./cmd/sandgate --kubeconfig %s --extensions \
      --webhook-host %s --webhook-port %d --webhook-cert-dir %s

Press Ctrl-C to stop everything and remove the temporary files.
`, took.Round(100*time.Millisecond), cluster.Config.Host, len(cluster.NodeNames), cfg.profile,
		cluster.NodeNames, kubectl, cfg.kubeconfig, kubectl, kubectl,
		admission, operatorKubeconfig(cfg), host, port, certDir)
}
