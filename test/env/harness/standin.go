package harness

// The floor's stand-in webhook server in a process of its own. Served from the load
// generator's process, it shared that process's CPU with a hundred goroutines making writes
// and a watch decoding every claim: under a burst the API server's calls waited for a starved
// process, and the contract floor measured the load generator rather than the round trips
// (issue 37). In its own process it is scheduled as the operator's webhook server is: a
// process answering the API server and nothing else.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/test/env/proc"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// StandInArg is the first argument that makes a command built on the harness serve the
// stand-in webhooks (ServeStandIn) instead of doing its own work: the harness re-executes
// Options.StandInExecutable with it.
const StandInArg = "serve-stand-in-webhooks"

// ServeStandInIfAsked makes the running executable the stand-in when its first argument is
// StandInArg: it serves the stand-in webhooks until SIGINT or SIGTERM and exits (2 on an
// error, said on stderr). Otherwise it returns at once. sandgate-bench, and every test binary
// the harness re-executes as the stand-in, call it first in main or TestMain.
func ServeStandInIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != StandInArg {
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := ServeStandIn(ctx, os.Args[2:])
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", filepath.Base(os.Args[0]), StandInArg, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// ServeStandIn serves the stand-in webhooks as its arguments (after StandInArg) say, until ctx
// ends: the CRDs' conversion webhook with --conversion, answerAtOnce at every --path, and the
// webhook server's metrics (controller_runtime_webhook_latency_seconds, its own view of each
// call) at 127.0.0.1:--metrics-port/metrics.
func ServeStandIn(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(StandInArg, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "webhook host")
	port := fs.Int("port", 0, "webhook port")
	certDir := fs.String("cert-dir", "", "directory of tls.crt and tls.key")
	metricsPort := fs.Int("metrics-port", 0, "metrics port on 127.0.0.1")
	conv := fs.Bool("conversion", false, "serve the CRDs' conversion webhook")
	paths := fs.String("paths", "", "comma-separated admission paths answered at once")
	claimRate := fs.Float64("claim-admission-rate", 0, "admit claim creates at this rate a second and answer the rest 429 (0 admits every one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port == 0 || *certDir == "" || *metricsPort == 0 {
		return errors.New("--port, --cert-dir and --metrics-port are required")
	}
	var list []string
	if *paths != "" {
		list = strings.Split(*paths, ",")
	}
	if *claimRate < 0 {
		return errors.New("--claim-admission-rate must not be negative")
	}
	srv, _, err := standInServer(webhook.Options{Host: *host, Port: *port, CertDir: *certDir}, *conv, list, *claimRate)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	// The CPU profile only, as the operator's --enable-pprof serves it: ProfileWebhookServer.
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ms := &http.Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(*metricsPort)), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = ms.Close() // ending anyway
	}()
	go func() { _ = ms.ListenAndServe() }() // the harness's readiness check sees it fail
	return srv.Start(ctx)
}

// standInServer is the stand-in's webhook server: conversion when conv, answerAtOnce at each
// of paths, admitting claim creates at claimRate a second when it is positive; what says
// what it serves.
func standInServer(opts webhook.Options, conv bool, paths []string, claimRate float64) (webhook.Server, []string, error) {
	srv := webhook.NewServer(opts)
	var what []string
	if conv {
		h, err := webhooks.ConversionHandler(api.NewScheme(), conversion.NewRegistry())
		if err != nil {
			return nil, nil, err
		}
		srv.Register(webhooks.ConvertPath, h)
		what = append(what, "conversion (the CRDs serve v1alpha1)")
	}
	var admit func() bool
	if claimRate > 0 {
		// A second's worth at once: the arrivals are paced, not bursty.
		admit = rate.NewLimiter(rate.Limit(claimRate), max(1, int(claimRate))).Allow
	}
	for _, p := range paths {
		srv.Register(p, &admission.Webhook{Handler: answerAtOnce(time.Now, admit)})
	}
	if len(paths) > 0 {
		what = append(what, fmt.Sprintf("%d admission webhooks, each allowing at once", len(paths)))
	}
	if admit != nil {
		what = append(what, fmt.Sprintf("claim creates admitted at %g a second, the rest refused with 429", claimRate))
	}
	return srv, what, nil
}

// startStandIn runs the stand-in webhooks in a process of their own: e.standIn re-executed
// with StandInArg, on the operator's webhook address and certificate and its metrics port
// (the operator is stopped), its log in the environment's directory.
func (e *Env) startStandIn(ctx context.Context, admissionPaths []string) error {
	args := []string{shellQuote(e.standInExe), StandInArg,
		"--host=" + placeholderWebhookHost, "--port=" + placeholderWebhookPort,
		"--cert-dir=" + placeholderWebhookCertDir, "--metrics-port=" + placeholderMetricsPort}
	if !e.v1beta1Only {
		args = append(args, "--conversion")
	}
	if len(admissionPaths) > 0 {
		args = append(args, "--paths="+shellQuote(strings.Join(admissionPaths, ",")))
	}
	if e.floorClaimRate > 0 {
		args = append(args, fmt.Sprintf("--claim-admission-rate=%g", e.floorClaimRate))
	}
	ep := e.webhook
	ep.webhooksInstalled = true
	p, err := startOperator(ctx, strings.Join(args, " "), ep, filepath.Join(e.dir, "stand-in-webhooks.log"))
	if err != nil {
		return fmt.Errorf("starting the stand-in webhook process: %w", err)
	}
	e.standIn = p
	e.stopWebhooks = func() { _ = p.Stop() } // it only answers: nothing to lose on a kill
	e.logf("stand-in webhooks served by a process of their own (pid %d) at %s:%d: conversion %t, %d admission paths, log %s",
		p.PID, ep.webhookHost, ep.webhookPort, !e.v1beta1Only, len(admissionPaths), p.LogPath)
	return nil
}

// StandInMetrics scrapes the stand-in webhooks of a floor run: their process's metrics, or,
// served from this process, this process's controller-runtime registry; nil when the harness
// serves no webhook (a floor whose CRDs serve v1beta1 only calls none).
func (e *Env) StandInMetrics(ctx context.Context) (scrape.Snapshot, error) {
	if e.standIn != nil {
		return e.standIn.Metrics(ctx)
	}
	if e.stopWebhooks == nil {
		return nil, nil
	}
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering the stand-in webhooks' metrics: %w", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return nil, fmt.Errorf("encoding the stand-in webhooks' metrics: %w", err)
		}
	}
	return scrape.Parse(&buf)
}

// ProfileWebhookServer writes a CPU profile of seconds of the process answering the webhooks
// to path: the floor's stand-in process, or else the operator (started with
// Options.OperatorPprof).
func (e *Env) ProfileWebhookServer(ctx context.Context, seconds int, path string) error {
	var metricsURL string
	switch {
	case e.standIn != nil:
		metricsURL = e.standIn.MetricsURL
	case e.Operator != nil:
		metricsURL = e.Operator.MetricsURL
	}
	if metricsURL == "" {
		return errors.New("profiling the webhook server: no process of its own serves the webhooks")
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(metricsURL, "/metrics"), seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profiling the webhook server: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling the webhook server: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or failed already
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling the webhook server: HTTP %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the webhook server's profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy error is the one to report
		return fmt.Errorf("writing the webhook server's profile: %w", err)
	}
	return f.Close()
}

// StandInUsage reads the stand-in webhook process's CPU and memory so far: none while no
// such process runs (a floor that calls no webhook starts none).
func (e *Env) StandInUsage() (proc.Usage, error) {
	if e.standIn == nil {
		return proc.Usage{}, nil
	}
	return e.standIn.Usage()
}

// StandInProcess reports whether a floor run's webhooks are answered by a process of their
// own (Options.StandInExecutable) rather than by the harness's.
func (e *Env) StandInProcess() bool { return e.standInExe != "" }

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// StandInExecutable is the running executable, for Options.StandInExecutable: a command that
// calls ServeStandIn when its first argument is StandInArg.
func StandInExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the executable to serve the stand-in webhooks: %w", err)
	}
	return exe, nil
}
