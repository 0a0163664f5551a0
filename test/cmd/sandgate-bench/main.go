// Command sandgate-bench is sandgate's load generator (`make bench`): bursts of SandboxClaims
// against a warm pool, measured (see package test/performance). By default on a local control plane
// with the operator built from ./cmd/sandgate; --kubeconfig targets an existing cluster and
// --operator-cmd runs any operator binary:
//
//	go -C test run ./cmd/sandgate-bench --burst-size 300 --qps 300 --total-bursts 1 --warmpool-size 600
//	go -C test run ./cmd/sandgate-bench --serial 50 --warmpool-size 60 --json serial.json
//	go -C test run ./cmd/sandgate-bench --scenarios all --out docs/performance.md   # what `make bench` runs
//
// The exit status is 1 when a claim did not become Ready within --timeout, 2 on other errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == harness.StandInArg {
		// A floor run's stand-in webhooks, in a process of their own (harness.ServeStandIn).
		ctrllog.SetLogger(logr.Discard())
		harness.ServeStandInIfAsked()
	}
	o := performance.DefaultOptions()
	fs := flag.NewFlagSet("sandgate-bench", flag.ContinueOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: sandgate-bench [flags]\n\nLoad generator for the SandboxClaim path (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	performance.AddSustainedFlags(fs)
	performance.AddScaleFlags(fs)
	performance.AddRapidBurstFlags(fs)
	performance.AddTraceFlags(fs)
	performance.AddFairShareFlags(fs)
	performance.AddOverloadFlags(fs)
	// The load generator's own caches log through controller-runtime; the run's progress is
	// its own lines, and an unset logger prints a stack trace in their middle instead.
	ctrllog.SetLogger(logr.Discard())
	err := fs.Parse(os.Args[1:])
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if err == nil {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err = performance.Run(ctx, o, os.Stdout, os.Stderr)
		cancel()
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, performance.ErrFailedClaims):
		fmt.Fprintf(os.Stderr, "sandgate-bench: %v\n", err)
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "sandgate-bench: %v\n", err)
		os.Exit(2)
	}
}
