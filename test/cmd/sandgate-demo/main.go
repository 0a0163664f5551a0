// Command sandgate-demo shows sandgate doing its main job on a local control plane, in one
// command (`make demo`; see package test/demo). It keeps the cluster running for kubectl
// until Ctrl-C (or exits at once with --once) and removes every process and temporary file
// on the way out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandgate-dev/sandgate/test/demo"
)

func main() {
	o := demo.DefaultOptions()
	fs := flag.NewFlagSet("sandgate-demo", flag.ContinueOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: sandgate-demo [flags]\n\nsandgate's main job on a local control plane (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	err := fs.Parse(os.Args[1:])
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if err == nil {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err = demo.Run(ctx, o, os.Stdout, os.Stderr)
		cancel()
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandgate-demo: %v\n", err)
		os.Exit(1)
	}
}
