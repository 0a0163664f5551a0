// Command sandgate-demo shows sandgate doing its main job on a local control plane, in one
// command (`make demo`): it starts etcd, kube-apiserver, kube-scheduler, the garbage collector
// and kwok's simulated nodes (cmd/controlplane), runs the operator with its admission webhooks,
// applies the SandboxTemplate and SandboxWarmPool of config/samples into the default
// namespace, waits for the pool, creates a few claims and prints which Sandbox each got, how
// it was launched and how long it took. Then it updates the template and shows that the next
// claim is bound to a Sandbox of the new template version, never a stale one.
//
// It then keeps the cluster running for kubectl until Ctrl-C (or exits at once with --once)
// and removes every process and temporary file on the way out.
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
	"strings"
	"syscall"
	"time"

	"github.com/sandgate-dev/sandgate/test/bench/harness"
	"github.com/sandgate-dev/sandgate/test/controlplane"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "sandgate-demo: %v\n", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	once        bool
	claims      int
	kubeconfig  string
	operatorCmd string
	verbose     bool
	webhooks    bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sandgate-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		printf(stderr, "Usage: sandgate-demo [flags]\n\nsandgate's main job on a local control plane (see the package documentation).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.once, "once", false, "exit after the table instead of running until Ctrl-C")
	fs.IntVar(&o.claims, "claims", 4, "claims to create before the template update")
	fs.StringVar(&o.kubeconfig, "kubeconfig", filepath.Join("bin", "sandgate-demo.kubeconfig"), "where to write the admin kubeconfig (removed on exit)")
	fs.StringVar(&o.operatorCmd, "operator-cmd", "", "operator command line (see sandgate-bench --help); default: build and run ./cmd/sandgate")
	fs.BoolVar(&o.webhooks, "webhooks", true, "install the admission webhooks (--webhooks=false shows what happens without them)")
	fs.BoolVar(&o.verbose, "v", false, "print the control plane's start-up steps")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	if o.claims < 1 {
		return o, fmt.Errorf("--claims must be at least 1, got %d", o.claims)
	}
	abs, err := filepath.Abs(o.kubeconfig)
	if err != nil {
		return o, fmt.Errorf("resolving --kubeconfig: %w", err)
	}
	o.kubeconfig = abs
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (retErr error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	start := time.Now()
	say := func(format string, args ...any) {
		printf(stdout, "[%5.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	say("starting a local control plane (etcd, kube-apiserver, scheduler, garbage collector, 3 kwok nodes)...")
	log := io.Writer(io.Discard)
	if o.verbose {
		log = stderr
	}
	env, err := harness.Start(ctx, harness.Options{Profile: controlplane.ProfileFast, OperatorCommand: o.operatorCmd, NoWebhooks: !o.webhooks, Log: progressLog{log, say}})
	if err != nil {
		return err
	}
	defer func() {
		printf(stdout, "\nstopping the operator and the control plane...\n")
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if err := os.Remove(o.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			retErr = errors.Join(retErr, fmt.Errorf("removing %s: %w", o.kubeconfig, err))
		}
		if retErr == nil {
			printf(stdout, "stopped; temporary files removed\n")
		}
	}()
	if err := env.Cluster.WriteKubeconfig(o.kubeconfig); err != nil {
		return err
	}
	if !env.Webhooks {
		say("warning: no admission webhooks: claims are not stamped at admission and bindings are not guarded")
	}

	d, err := newDemo(env, root, say)
	if err != nil {
		return err
	}
	if err := d.run(ctx, stdout, o.claims); err != nil {
		if env.Operator != nil {
			err = fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
		}
		return err
	}
	if o.once {
		return nil
	}
	printUsage(stdout, root, env, o.kubeconfig)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := env.Err(); err != nil {
				return fmt.Errorf("the demo environment broke: %w", err)
			}
		}
	}
}

// printf writes a line of the demo's narrative; a closed terminal is no reason to stop.
func printf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }

// progressLog passes the harness's lines about the operator to the demo's output and the
// rest to the verbose log.
type progressLog struct {
	verbose io.Writer
	say     func(string, ...any)
}

func (p progressLog) Write(b []byte) (int, error) {
	line := strings.TrimSuffix(string(b), "\n")
	for _, prefix := range []string{"building ", "operator ", "warning: "} {
		if strings.HasPrefix(line, prefix) {
			p.say("%s", line)
			return len(b), nil
		}
	}
	return p.verbose.Write(b)
}

// printUsage tells how to look around the running demo.
func printUsage(w io.Writer, root string, env *harness.Env, kubeconfig string) {
	kubectl := filepath.Join(env.Cluster.BinaryDir, "kubectl")
	if rel, err := filepath.Rel(root, kubectl); err == nil && filepath.IsLocal(rel) {
		kubectl = rel
	}
	if rel, err := filepath.Rel(root, kubeconfig); err == nil && filepath.IsLocal(rel) {
		kubeconfig = rel
	}
	opLog := "-"
	if env.Operator != nil {
		opLog = env.Operator.LogPath
	}
	printf(w, `
The control plane and the operator keep running. From another shell, in %s:

  export KUBECONFIG=%s
  %s get sandboxclaims,sandboxes,sandboxwarmpools,sandboxtemplates
  %s get pods -o wide -L agents.x-k8s.io/launch-type
  %s create -f config/samples/extensions_v1beta1_sandboxclaim.yaml
  %s get sandboxclaim claim-sample -o yaml
  %s scale swp python-agent-pool --replicas=10

Operator log: %s
Press Ctrl-C to stop everything and remove the temporary files.
`, root, kubeconfig, kubectl, kubectl, kubectl, kubectl, kubectl, opLog)
}
