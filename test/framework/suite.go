//go:build integration

package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// StartTimeout bounds how long a suite waits for its cluster to start.
const StartTimeout = 3 * time.Minute

// RunSuite is the body of an integration suite's TestMain: it starts a cluster as opts say,
// hands it to use (which stores it for the tests), runs the tests, stops the cluster and
// returns the exit code for os.Exit. Progress goes to stderr unless opts.Log is set.
//
// It exists only with the build tag integration (this file's), which every test file that
// needs the control plane carries: a suite that forgets the tag does not compile, instead of
// failing in `make test-unit` on a machine without the binaries.
//
//	func TestMain(m *testing.M) {
//		os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileKubelet}, func(c *framework.Cluster) { cluster = c }))
//	}
//
// A suite whose tests need pods that take time to start, as on a real cluster, asks for
// controlplane.ProfileRealistic and its start-up times in opts, short ones to keep it quick:
// controlplane.Options{Profile: controlplane.ProfileRealistic, PodStartup:
// controlplane.PodStartup{Median: 300 * time.Millisecond, P99: 1200 * time.Millisecond}}.
//
// SANDGATE_TEST_LOG=<file> writes the controllers' logs (verbosity 1) of the suite's managers
// there.
func RunSuite(m *testing.M, opts controlplane.Options, use func(*Cluster)) int {
	// Without a log file the controllers' logs go nowhere (and controller-runtime does not
	// complain, with a stack trace, that no logger was set). controller-runtime takes the
	// first logger it is given and ignores the rest: one call, either way.
	if path := os.Getenv("SANDGATE_TEST_LOG"); path == "" {
		ctrl.SetLogger(logr.Discard())
	} else {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "creating the log file: %v\n", err)
			return 1
		}
		defer func() { _ = f.Close() }()
		ctrl.SetLogger(zap.New(zap.WriteTo(f), zap.Level(zapcore.Level(-1))))
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	c, err := controlplane.Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test cluster: %v\n", err)
		return 1
	}
	use(&Cluster{Cluster: c})
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test cluster: %v\n", err)
		code = 1
	}
	return code
}
