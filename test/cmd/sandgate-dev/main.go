// Command sandgate-dev runs a local Kubernetes control plane with simulated nodes for
// developing sandgate by hand (`make dev-cluster`; see package test/env/devcluster):
//
//	go -C test run ./cmd/sandgate-dev [--nodes 3] [--profile fast|kubelet|realistic [--pod-startup-median 2s] [--pod-startup-p99 8s]] [--kubeconfig bin/sandgate-dev.kubeconfig] [--webhooks]
//
// It prints how to use the cluster and run the operator against it, and runs until SIGINT
// (Ctrl-C) or SIGTERM; then it stops every process and removes every file it wrote. The
// binaries come from `make tools` (bin/k8s/<version>) or $KUBEBUILDER_ASSETS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandgate-dev/sandgate/test/env/devcluster"
)

func main() {
	o := devcluster.DefaultOptions()
	fs := flag.NewFlagSet("sandgate-dev", flag.ContinueOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: sandgate-dev [flags]\n\nRuns a local control plane with simulated nodes until Ctrl-C.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	err := fs.Parse(os.Args[1:])
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if err == nil {
		// Signals cancel the start as well as end the run.
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err = devcluster.Run(ctx, o, os.Stdout, os.Stderr)
		cancel()
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandgate-dev: %v\n", err)
		os.Exit(1)
	}
}
