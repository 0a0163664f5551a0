package main

import (
	"flag"
	"go/build"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/sandgate-dev/sandgate/internal/operator"
)

// Without flags the command runs the operator with its production defaults.
func TestFlagDefaultsAreTheOperatorDefaults(t *testing.T) {
	var opts options
	fs := flag.NewFlagSet("sandgate", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := opts.validate(); err != nil {
		t.Fatalf("default flags invalid: %v", err)
	}
	if diff := cmp.Diff(operator.DefaultOptions(), opts.operatorOptions()); diff != "" {
		t.Errorf("flag defaults differ from operator.DefaultOptions (-want +got):\n%s", diff)
	}
}

func TestFlagsReachTheOperator(t *testing.T) {
	var opts options
	fs := flag.NewFlagSet("sandgate", flag.ContinueOnError)
	opts.bind(fs)
	if err := fs.Parse([]string{"--sandbox-claim-concurrent-workers=7", "--restamp=false", "--platform-groups=a,b", "--extensions",
		"--claim-allowed-annotation-domains= Acme.Example ,sandbox.users.io", "--leader-election-lease-duration=30s", "--leader-election-renew-deadline=20s", "--leader-election-retry-period=3s",
		"--claim-admission-max-wait=1500ms"}); err != nil {
		t.Fatal(err)
	}
	got := opts.operatorOptions()
	timings := operator.LeaderElectionTimings{LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 3 * time.Second}
	if got.ClaimWorkers != 7 || !got.RefuseRestamp || !got.Extensions || !cmp.Equal(got.PlatformGroups, []string{"a", "b"}) || got.LeaderElectionTimings != timings ||
		got.ClaimAdmissionMaxWait != 1500*time.Millisecond || !cmp.Equal(got.ClaimAnnotationDomains, []string{"acme.example", "sandbox.users.io"}) {
		t.Errorf("operator options %+v do not follow the flags", got)
	}
}

// The public controller's command lines (sigs.k8s.io/agent-sandbox v0.5.6), copied from its
// files so that the test runs without them; TestPublicSourceMatches checks the copies when
// the module is in the module cache.
var publicCommandLines = map[string][]string{
	// k8s/controller.yaml, the Deployment's args.
	"k8s/controller.yaml": {"--leader-elect=true"},
	// k8s/extensions.controller.yaml, the Deployment's args.
	"k8s/extensions.controller.yaml": {"--leader-elect=true", "--extensions"},
	// helm/templates/_controller-args.tpl rendered with helm/values.yaml as shipped
	// (controller.leaderElect, controller.extensions, webhookServiceName, namespace.name).
	"helm defaults": {
		"--leader-elect=true", "--extensions=false",
		"--webhook-service-name=agent-sandbox-webhook-service", "--webhook-namespace=agent-sandbox-system",
	},
	// The same template with every controller value helm/values.yaml documents (its
	// commented-out lines) set to the value it shows.
	"helm every documented value": {
		"--leader-elect=true", "--cluster-domain=cluster.local", "--leader-election-namespace=",
		"--extensions=false", "--enable-tracing=false", "--enable-pprof=false", "--enable-pprof-debug=false",
		"--pprof-block-profile-rate=1000000", "--pprof-mutex-profile-fraction=10",
		"--kube-api-qps=-1", "--kube-api-burst=10", "--sandbox-concurrent-workers=100",
		"--sandbox-claim-concurrent-workers=50", "--sandbox-warm-pool-concurrent-workers=1",
		"--sandbox-template-concurrent-workers=1", "--sandbox-warm-pool-max-batch-size=300",
		"--sandbox-warm-pool-readiness-grace-period=5m", "--sandbox-warm-pool-unschedulable-recheck-interval=1m",
		"--enable-warm-pool-eviction=true",
		"--webhook-service-name=agent-sandbox-webhook-service", "--webhook-namespace=agent-sandbox-system",
	},
	// The v1.0-era chart (kubernetes-sigs/agent-sandbox main at 0bc70e9,
	// helm/templates/_controller-args.tpl): every key it renders, at the public defaults.
	"helm v1.0 every key": {
		"--leader-elect=true", "--cluster-domain=cluster.local", "--leader-election-namespace=agent-sandbox-system",
		"--extensions=true", "--enable-tracing=false", "--enable-pprof=false", "--enable-pprof-debug=false",
		"--pprof-block-profile-rate=1000000", "--pprof-mutex-profile-fraction=10", "--kube-api-qps=-1",
		"--kube-api-burst=10", "--api-connections=1", "--separate-watch-connection=false",
		"--sandbox-concurrent-workers=100", "--cache-label-selectors=false", "--disable-sandbox-events=false",
		"--sandbox-write-behind-window=0s", "--sandbox-claim-concurrent-workers=50",
		"--sandbox-warm-pool-concurrent-workers=1", "--sandbox-template-concurrent-workers=1",
		"--sandbox-warm-pool-max-batch-size=300", "--sandbox-warm-pool-replenish-delay=0s",
		"--sandbox-warm-pool-max-refill-rate=0", "--sandbox-warm-pool-readiness-grace-period=5m",
		"--sandbox-warm-pool-unschedulable-recheck-interval=1m", "--enable-warm-pool-eviction=true",
		"--disable-claim-events=false", "--disable-claim-observability-annotations=false",
	},
	// cmd/agent-sandbox-controller/main.go: every flag it defines (but --version), at its
	// default value.
	"every public flag at its default": {
		"--webhook-port=9443", "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--webhook-cert-name=tls.crt", "--webhook-key-name=tls.key",
		"--webhook-service-name=agent-sandbox-webhook-service", "--webhook-namespace=agent-sandbox-system",
		"--manage-webhook-certs=true", "--enable-webhook=true", "--cluster-domain=cluster.local",
		"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--leader-elect=true",
		"--leader-election-namespace=", "--extensions=false", "--enable-tracing=false",
		"--enable-pprof=false", "--enable-pprof-debug=false", "--pprof-block-profile-rate=1000000",
		"--pprof-mutex-profile-fraction=10", "--kube-api-qps=-1", "--kube-api-burst=10",
		"--api-connections=1", "--separate-watch-connection=false",
		"--sandbox-concurrent-workers=100", "--sandbox-claim-concurrent-workers=50",
		"--sandbox-warm-pool-concurrent-workers=1", "--sandbox-template-concurrent-workers=1",
		"--sandbox-warm-pool-max-batch-size=300", "--sandbox-warm-pool-replenish-delay=0s",
		"--sandbox-warm-pool-max-refill-rate=0", "--sandbox-warm-pool-readiness-grace-period=5m0s",
		"--sandbox-warm-pool-unschedulable-recheck-interval=1m0s", "--enable-warm-pool-eviction=true",
		"--cache-label-selectors=false", "--disable-claim-events=false",
		"--disable-claim-observability-annotations=false", "--sandbox-write-behind-window=0s",
		"--zap-devel=false", "--zap-encoder=json", "--zap-log-level=info",
		"--zap-stacktrace-level=error", "--zap-time-encoding=epoch",
	},
}

// parse parses args as main does, on a flag set of its own, and checks them.
func parse(t *testing.T, args []string) (*options, *flag.FlagSet, error) {
	t.Helper()
	fs := flag.NewFlagSet("sandgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts, _ := bindAll(fs)
	if err := fs.Parse(args); err != nil {
		return opts, fs, err
	}
	return opts, fs, opts.validate()
}

// A Deployment or Helm release of the public controller runs sandgate unchanged.
func TestPublicCommandLinesAccepted(t *testing.T) {
	for name, args := range publicCommandLines {
		t.Run(name, func(t *testing.T) {
			opts, _, err := parse(t, args)
			if err != nil {
				t.Fatalf("refused %q: %v", args, err)
			}
			if err := opts.operatorOptions().Validate(); err != nil {
				t.Errorf("operator refuses the options of %q: %v", args, err)
			}
		})
	}
}

// The public flags sandgate has the behaviour of reach the operator with their meaning.
func TestPublicFlagsReachTheOperator(t *testing.T) {
	opts, fs, err := parse(t, []string{
		"--kube-api-qps=-1", "--api-connections=3", "--separate-watch-connection",
		"--sandbox-template-concurrent-workers=2", "--disable-claim-events", "--enable-tracing",
		"--enable-pprof-debug", "--pprof-block-profile-rate=5", "--pprof-mutex-profile-fraction=7",
		"--enable-warm-pool-eviction=false", "--sandbox-warm-pool-readiness-grace-period=2m",
		"--sandbox-warm-pool-unschedulable-recheck-interval=30s", "--sandbox-warm-pool-max-batch-size=12",
		"--sandbox-warm-pool-max-refill-rate=2.5", "--sandbox-warm-pool-replenish-delay=3s",
		"--cache-label-selectors", "--webhook-namespace=x", "--sandbox-write-behind-window=1s",
		"--disable-sandbox-events",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := opts.operatorOptions()
	want := operator.DefaultOptions()
	want.QPS, want.APIConnections, want.SeparateWatchConnection = -1, 3, true
	want.TemplateWorkers, want.DisableClaimEvents, want.EnableTracing = 2, true, true
	want.DisableSandboxEvents = true
	want.EnablePprofDebug, want.PprofBlockProfileRate, want.PprofMutexProfileFraction = true, 5, 7
	want.CacheLabelSelectors = true
	want.WarmPool = operator.WarmPoolSettings{
		EnableEviction: false, ReadinessGracePeriod: 2 * time.Minute, UnschedulableRecheckInterval: 30 * time.Second,
		MaxBatchSize: 12, MaxRefillRate: 2.5, ReplenishDelay: 3 * time.Second,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operator options (-want +got):\n%s", diff)
	}
	wantNoEffect := []string{
		"--sandbox-write-behind-window=1s: sandgate defers its bookkeeping writes until claims pause (--pool-refill-quiet-period)",
		"--webhook-namespace=x: it names the namespace of certificates sandgate does not make",
	}
	if diff := cmp.Diff(wantNoEffect, opts.noEffect(fs)); diff != "" {
		t.Errorf("flags reported without effect (-want +got):\n%s", diff)
	}
}

// A bad value is refused at start, and the refusal names the flag.
func TestBadValuesRefusedNamingTheFlag(t *testing.T) {
	for _, arg := range []string{
		"--kube-api-qps=0", "--kube-api-qps=NaN", "--kube-api-burst=0", "--api-connections=0",
		"--sandbox-concurrent-workers=0", "--sandbox-claim-concurrent-workers=-1",
		"--sandbox-warm-pool-concurrent-workers=0", "--sandbox-template-concurrent-workers=0",
		"--sandbox-warm-pool-max-batch-size=0", "--sandbox-warm-pool-max-refill-rate=-1",
		"--sandbox-warm-pool-max-refill-rate=+Inf", "--sandbox-warm-pool-replenish-delay=-1s",
		"--sandbox-warm-pool-readiness-grace-period=0s", "--sandbox-warm-pool-unschedulable-recheck-interval=-1m",
		"--sandbox-write-behind-window=-1s", "--webhook-port=70000", "--webhook-cert-name= ",
		"--webhook-key-name=", "--enable-webhook=false", "--pool-refill-low-water-percent=101",
		"--cold-start-grace=-1s", "--claim-admission-max-wait=-1s", "--sandbox-warm-pool-readiness-grace-period=soon",
		"--enable-tracing=maybe", "--claim-allowed-annotation-domains=acme.example/x",
	} {
		name, _, _ := strings.Cut(arg, "=")
		_, _, err := parse(t, []string{arg})
		if err == nil {
			t.Errorf("%s accepted", arg)
			continue
		}
		if !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), strings.TrimPrefix(name, "-")) {
			t.Errorf("%s refused without naming %s: %v", arg, name, err)
		}
	}
	// The Lease's durations are checked as client-go checks them, when a leader is elected.
	for _, arg := range []string{
		"--leader-election-retry-period=0s", "--leader-election-lease-duration=5s", "--leader-election-renew-deadline=2s",
	} {
		name, _, _ := strings.Cut(arg, "=")
		if _, _, err := parse(t, []string{"--leader-elect", arg}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("--leader-elect %s: %v, want a refusal naming %s", arg, err, name)
		}
		if _, _, err := parse(t, []string{arg}); err != nil {
			t.Errorf("%s without --leader-elect: %v, want it accepted (no Lease to time)", arg, err)
		}
	}
	// Names other than tls.crt/tls.key are refused when the certificates come from outside,
	// as sandgate's always do; with the public default (it makes its own) they are ignored.
	if _, _, err := parse(t, []string{"--manage-webhook-certs=false", "--webhook-cert-name=cert.pem"}); err == nil || !strings.Contains(err.Error(), "--webhook-cert-name") {
		t.Errorf("--webhook-cert-name=cert.pem with --manage-webhook-certs=false: %v, want a refusal naming the flag", err)
	}
	if _, _, err := parse(t, []string{"--webhook-cert-name=cert.pem"}); err != nil {
		t.Errorf("--webhook-cert-name=cert.pem with --manage-webhook-certs=true (ignored, as the public controller does): %v", err)
	}
}

// The copies above are the public project's: when its v0.5.6 source is in the module cache,
// every flag its main.go defines is one of sandgate's, and the Deployments' args are the ones
// copied.
func TestPublicSourceMatches(t *testing.T) {
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		modcache = filepath.Join(build.Default.GOPATH, "pkg", "mod")
	}
	root := filepath.Join(modcache, "sigs.k8s.io", "agent-sandbox@v0.5.6")
	src, err := os.ReadFile(filepath.Join(root, "cmd", "agent-sandbox-controller", "main.go"))
	if err != nil {
		t.Skipf("public source not in the module cache: %v", err)
	}
	_, fs, _ := parse(t, nil)
	defined := regexp.MustCompile(`flag\.\w+Var\(&\w+,\s*"([a-z0-9-]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(defined) < 30 {
		t.Fatalf("found only %d flag definitions in the public main.go; has its form changed?", len(defined))
	}
	for _, m := range defined {
		if fs.Lookup(m[1]) == nil {
			t.Errorf("public flag --%s is not a sandgate flag", m[1])
		}
	}
	argLine := regexp.MustCompile(`^\s*- "?(--[^"]+)"?\s*$`)
	for _, file := range []string{"k8s/controller.yaml", "k8s/extensions.controller.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, line := range strings.Split(string(data), "\n") {
			if m := argLine.FindStringSubmatch(line); m != nil {
				args = append(args, m[1])
			}
		}
		if diff := cmp.Diff(publicCommandLines[file], args); diff != "" {
			t.Errorf("%s args changed (-copy +file):\n%s", file, diff)
		}
	}
}

// docs/flags.md lists every flag of the command but klog's.
func TestEveryFlagDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_, fs, _ := parse(t, nil)
	fs.VisitAll(func(f *flag.Flag) {
		if klogFlags.Lookup(f.Name) == nil && !strings.Contains(string(doc), "`--"+f.Name+"`") {
			t.Errorf("docs/flags.md does not list --%s", f.Name)
		}
	})
}
