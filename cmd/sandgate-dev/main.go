// Command sandgate-dev runs a local Kubernetes control plane with simulated nodes for
// developing sandgate by hand (`make dev-cluster`), the one the integration tests get from
// test/controlplane. Nothing runs in containers and everything listens on 127.0.0.1.
//
// Usage:
//
//	go run ./cmd/sandgate-dev [--nodes 3] [--profile fast|kubelet] [--kubeconfig bin/sandgate-dev.kubeconfig] [--webhooks]
//
// It writes an admin kubeconfig and one for the operator, prints how to use them and how to run
// the operator so that the API server reaches its webhooks (the CRDs' conversion webhook, which
// serves v1alpha1, always; with --webhooks also the admission webhooks, which then fail closed
// until the operator runs), and runs until SIGINT (Ctrl-C) or SIGTERM; then it stops every
// process, removes its temporary directories and deletes the kubeconfigs it wrote. The
// binaries come from `make tools` (bin/k8s/<version>) or $KUBEBUILDER_ASSETS. The command is
// test/devcluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandgate-dev/sandgate/test/devcluster"
)

func main() {
	// Signals cancel the start as well as end the run.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		err = devcluster.Run(ctx, o, os.Stdout, os.Stderr)
	}
	cancel()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "sandgate-dev: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags maps the command line onto devcluster.Options; devcluster.Run validates them.
func parseFlags(args []string, stderr io.Writer) (devcluster.Options, error) {
	o := devcluster.DefaultOptions()
	fs := flag.NewFlagSet("sandgate-dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(stderr, "Usage: sandgate-dev [flags]\n\n"+
			"Runs a local control plane with simulated nodes until Ctrl-C.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "number of simulated nodes (at least 1)")
	fs.StringVar((*string)(&o.Profile), "profile", string(o.Profile),
		"how pods become ready: fast (one status update) or kubelet (separate updates tens of ms apart)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"where to write the admin kubeconfig (removed on exit); the operator's goes beside it")
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks,
		"also install sandgate's admission webhook configurations (they fail closed: writes of sandgate's kinds are refused until the operator runs)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	return o, nil
}
