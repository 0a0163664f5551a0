// Package demo is sandgate's main job shown on a local control plane, what
// test/cmd/sandgate-demo (`make demo`) parses flags for. Run starts etcd, kube-apiserver,
// kube-scheduler, the garbage collector and kwok's simulated nodes (test/env/controlplane), runs
// the operator with its admission webhooks (test/env/harness), applies the SandboxTemplate
// and SandboxWarmPool of config/samples into the default namespace, waits for the pool,
// creates a few claims and prints which Sandbox each got, how it was launched and how long it
// took. Then it updates the template and shows which Sandbox the next claim gets, and of
// which template version (what admission guarantees there: README.md#what-admission-guarantees).
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
)

// Options are what the demo does; each field is the sandgate-demo flag named in its comment
// (AddFlags).
type Options struct {
	Once        bool   // --once: exit after the table instead of running until Ctrl-C
	Claims      int    // --claims to create before the template update
	Kubeconfig  string // --kubeconfig: where to write the admin kubeconfig (removed on exit)
	OperatorCmd string // --operator-cmd (see harness.Options.OperatorCommand)
	Verbose     bool   // -v: print the control plane's start-up steps
	Webhooks    bool   // --webhooks: install the admission webhooks
	// Profile and PodStartup are --profile and --pod-startup-*: how the simulated nodes'
	// pods become Ready (with realistic, a cold start takes what it takes on a real cluster).
	Profile    controlplane.Profile
	PodStartup controlplane.PodStartup
}

// DefaultOptions returns the options of sandgate-demo without flags.
func DefaultOptions() Options {
	return Options{Claims: 4, Kubeconfig: filepath.Join("bin", "sandgate-demo.kubeconfig"), Webhooks: true, Profile: controlplane.ProfileFast}
}

// AddFlags registers the flags of sandgate-demo on fs, bound to o's fields, with o's values
// (DefaultOptions) as their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Once, "once", o.Once, "exit after the table instead of running until Ctrl-C")
	fs.IntVar(&o.Claims, "claims", o.Claims, "claims to create before the template update")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "where to write the admin kubeconfig (removed on exit)")
	fs.StringVar(&o.OperatorCmd, "operator-cmd", o.OperatorCmd, "operator command line (see sandgate-bench --help); default: build and run ./cmd/sandgate")
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks, "install the admission webhooks (--webhooks=false shows what happens without them)")
	fs.BoolVar(&o.Verbose, "v", o.Verbose, "print the control plane's start-up steps")
	controlplane.AddProfileFlags(fs, &o.Profile, &o.PodStartup)
}

// Run runs the demo: the narrative and the claims table go to stdout, the control plane's
// start-up steps to stderr with o.Verbose. Unless o.Once it then keeps everything running
// until ctx ends; it stops every process and removes every temporary file on the way out.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (retErr error) {
	if o.Claims < 1 {
		return fmt.Errorf("--claims must be at least 1, got %d", o.Claims)
	}
	if err := controlplane.CheckProfile(o.Profile, o.PodStartup); err != nil {
		return fmt.Errorf("--profile, --pod-startup-*: %w", err)
	}
	abs, err := filepath.Abs(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("resolving --kubeconfig: %w", err)
	}
	o.Kubeconfig = abs
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	start := time.Now()
	say := func(format string, args ...any) {
		printf(stdout, "[%5.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	say("starting a local control plane (etcd, kube-apiserver, scheduler, garbage collector, 3 kwok nodes, pod profile %s)...",
		controlplane.DescribeProfile(o.Profile, o.PodStartup))
	log := io.Writer(io.Discard)
	if o.Verbose {
		log = stderr
	}
	env, err := harness.Start(ctx, harness.Options{
		Profile: o.Profile, PodStartup: o.PodStartup,
		OperatorCommand: o.OperatorCmd, NoWebhooks: !o.Webhooks, Log: progressLog{log, say},
	})
	if err != nil {
		return err
	}
	defer func() {
		printf(stdout, "\nstopping the operator and the control plane...\n")
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
		if err := os.Remove(o.Kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			retErr = errors.Join(retErr, fmt.Errorf("removing %s: %w", o.Kubeconfig, err))
		}
		if retErr == nil {
			printf(stdout, "stopped; temporary files removed\n")
		}
	}()
	if err := env.Cluster.WriteKubeconfig(o.Kubeconfig); err != nil {
		return err
	}
	if !env.Webhooks {
		say("warning: no admission webhooks: claims are not stamped at admission and bindings are not guarded")
	}

	d, err := newDemo(env, root, say)
	if err != nil {
		return err
	}
	if err := d.run(ctx, stdout, o.Claims); err != nil {
		if env.Operator != nil {
			err = fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
		}
		return err
	}
	if o.Once {
		return nil
	}
	printUsage(stdout, root, env, o.Kubeconfig)
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
