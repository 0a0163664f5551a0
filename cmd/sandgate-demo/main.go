// Command sandgate-demo shows sandgate doing its main job on a local control plane, in one
// command (`make demo`): a warm pool of config/samples, a few claims and which Sandbox each
// got, how and how fast, then a template update and the next claim bound to a Sandbox of the
// new version (package test/demo tells the steps). It then keeps the cluster running for
// kubectl until Ctrl-C (or exits at once with --once) and removes every process and
// temporary file on the way out.
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

	"github.com/sandgate-dev/sandgate/test/demo"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err == nil {
		err = demo.Run(ctx, o, os.Stdout, os.Stderr)
	}
	cancel()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "sandgate-demo: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags maps the command line onto demo.Options; demo.Run validates them.
func parseFlags(args []string, stderr io.Writer) (demo.Options, error) {
	o := demo.DefaultOptions()
	fs := flag.NewFlagSet("sandgate-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(stderr, "Usage: sandgate-demo [flags]\n\nsandgate's main job on a local control plane (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.Once, "once", o.Once, "exit after the table instead of running until Ctrl-C")
	fs.IntVar(&o.Claims, "claims", o.Claims, "claims to create before the template update")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "where to write the admin kubeconfig (removed on exit)")
	fs.StringVar(&o.OperatorCmd, "operator-cmd", o.OperatorCmd, "operator command line (see sandgate-bench --help); default: build and run ./cmd/sandgate")
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks, "install the admission webhooks (--webhooks=false shows what happens without them)")
	fs.BoolVar(&o.Verbose, "v", o.Verbose, "print the control plane's start-up steps")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	return o, nil
}
