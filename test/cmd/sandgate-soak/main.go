// Command sandgate-soak runs sandgate's fault soak (`make soak`, package test/soak): two
// operator replicas with leader election on a local control plane, a steady claim load, and
// the faults clusters really have injected on a schedule the seed decides; then it proves from
// the API server's audit log and the final state that no claim was lost, no Sandbox bound
// twice, nothing leaked and no stale leader wrote.
//
//	go -C test run ./cmd/sandgate-soak                                  # 8 claims/s for 10 minutes, every fault 3 times
//	go -C test run ./cmd/sandgate-soak --short                          # every fault once in about 2.5 minutes
//	go -C test run ./cmd/sandgate-soak --faults leader-freeze --faults-per-kind 5 --duration 5m
//
// The exit status is 1 when the checker found a violation (or a fault could not be
// injected, or the system did not settle), 2 when the soak could not run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/soak"
)

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errViolations):
		fmt.Fprintf(os.Stderr, "sandgate-soak: %v\n", err)
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "sandgate-soak: %v\n", err)
		os.Exit(2)
	}
}

var errViolations = errors.New("the soak did not pass (see the report)")

// wantsShort reports whether args ask for the short soak.
func wantsShort(args []string) bool {
	for _, a := range args {
		switch a {
		case "--short", "-short", "--short=true", "-short=true":
			return true
		case "--":
			return false
		}
	}
	return false
}

func run(args []string) error {
	// --short picks the defaults the other flags start from: the short soak's.
	o := soak.DefaultOptions()
	if wantsShort(args) {
		o = soak.ShortOptions()
	}
	fs := flag.NewFlagSet("sandgate-soak", flag.ContinueOnError)
	fs.Usage = func() {
		_, _ = fmt.Fprintf(fs.Output(), "Usage: sandgate-soak [flags]\n\nFault soak of sandgate on a local control plane (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.Bool("short", false, "Run the short soak of `make test` (every fault once, about 2.5 minutes of load): the other flags' defaults become the short soak's.")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "Claims created per second.")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "How long claims are created.")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "Seed of the claims' namespaces and lifetimes and of the fault schedule.")
	fs.IntVar(&o.Namespaces, "namespaces", o.Namespaces, "Namespaces, each with a template and a pool (even ones Recreate, odd ones OnReplenish).")
	poolSize := fs.Int("pool-size", int(o.PoolSize), "Members of each pool.")
	lifetime := fs.String("lifetime", fmt.Sprintf("%s-%s", o.LifetimeMin, o.LifetimeMax), "A claim's life from creation to deletion, min-max (uniform).")
	faults := fs.String("faults", "", "Comma-separated fault kinds to inject (default every kind): "+strings.Join(soak.FaultKinds, ", ")+".")
	fs.IntVar(&o.FaultsPerKind, "faults-per-kind", o.FaultsPerKind, "How many times each fault kind is injected.")
	pause := fs.String("fault-pause", fmt.Sprintf("%s-%s", o.PauseMin, o.PauseMax), "Pause before each fault, min-max.")
	hold := fs.String("fault-hold", fmt.Sprintf("%s-%s", o.HoldMin, o.HoldMax), "How long a lasting fault (webhook unreachable, slow API) lasts, min-max; a frozen leader stays frozen past its Lease.")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "Simulated Nodes.")
	controlplane.AddProfileFlags(fs, &o.Profile, &o.PodStartup)
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "How long a claim may take to become Ready before it counts as not served.")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", o.SettleTimeout, "How long the system may take to settle after the load.")
	fs.BoolVar(&o.KeepLogs, "keep-logs", o.KeepLogs, "Keep the cluster's logs, the audit log and the replicas' among them.")
	fs.Func("operator-arg", "A flag given to both replicas after the soak's own, as --name=value (repeat it for more), e.g. --operator-arg=--claim-admission-max-wait=1s.", func(v string) error {
		o.OperatorArgs = append(o.OperatorArgs, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	var err error
	if o.PauseMin, o.PauseMax, err = load.ParseLifetime(*pause); err != nil {
		return fmt.Errorf("--fault-pause: %w", err)
	}
	if o.HoldMin, o.HoldMax, err = load.ParseLifetime(*hold); err != nil {
		return fmt.Errorf("--fault-hold: %w", err)
	}
	o.PoolSize = int32(*poolSize)
	lo, hi, err := load.ParseLifetime(*lifetime)
	if err != nil {
		return fmt.Errorf("--lifetime: %w", err)
	}
	o.LifetimeMin, o.LifetimeMax = lo, hi
	if *faults != "" {
		o.Faults = strings.Split(*faults, ",")
	}
	o.Log = os.Stderr
	if err := o.Validate(); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	res, err := soak.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := res.WriteText(os.Stdout); err != nil {
		return err
	}
	if !res.OK() {
		return errViolations
	}
	return nil
}
