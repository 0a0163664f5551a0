// Command sandgate is the operator manager: it runs the Sandbox controller and, with
// --extensions, the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers, against the
// cluster of the current kubeconfig (or in-cluster config), and serves the admission webhooks
// (claim stamping, the binding guard, defaulting and validation) on --webhook-port. It parses
// and checks its flags (flags.go; every flag of the public agent-sandbox controller is
// accepted, see docs/flags.md); internal/operator builds the manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/version"
)

// bindAll registers every flag of the command on fs: the operator's, zap's (the public
// controller's logging flags) and klog's.
func bindAll(fs *flag.FlagSet) (*options, *zap.Options) {
	var opts options
	opts.bind(fs)
	zapOpts := &zap.Options{}
	zapOpts.BindFlags(fs)
	klog.InitFlags(fs)
	return &opts, zapOpts
}

func main() {
	opts, zapOpts := bindAll(flag.CommandLine)
	flag.Parse()
	if opts.printVersion {
		fmt.Print(version.Get().String("sandgate"))
		os.Exit(0)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(zapOpts)))

	if err := opts.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	log := ctrl.Log.WithName("setup")
	for _, f := range opts.noEffect(flag.CommandLine) {
		log.Info("flag accepted for compatibility with the public controller, without effect", "flag", f)
	}
	if err := run(opts.operatorOptions()); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(opts operator.Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	op, err := operator.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting manager", "version", version.Get().GitVersion, "extensions", opts.Extensions, "leaderElection", opts.LeaderElection)
	return op.Start(ctx)
}
