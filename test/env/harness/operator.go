package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/proc"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
)

// placeholders substituted in an operator command line.
const (
	placeholderKubeconfig     = "{{kubeconfig}}"
	placeholderWebhookHost    = "{{webhook-host}}"
	placeholderWebhookPort    = "{{webhook-port}}"
	placeholderWebhookCertDir = "{{webhook-cert-dir}}"
	placeholderMetricsPort    = "{{metrics-port}}"
	placeholderProbePort      = "{{probe-port}}"
)

// operatorReadyTimeout bounds the wait for a started operator to serve.
const operatorReadyTimeout = 2 * time.Minute

// operatorStopTimeout is how long the operator gets to exit after SIGTERM.
const operatorStopTimeout = 15 * time.Second

// Operator is an operator process the harness started.
type Operator struct {
	// Template is the command line with its placeholders; Command after substitution.
	Template, Command string
	// PID is the operator's process id (the shell execs it, so it is the operator itself).
	PID int
	// LogPath holds its stdout and stderr.
	LogPath string
	// MetricsURL is its Prometheus endpoint, "" when the command line has no
	// {{metrics-port}}.
	MetricsURL string

	// StartedAt is when the process was started.
	StartedAt time.Time

	cmd  *exec.Cmd
	ep   endpoints
	done chan struct{}
	err  error

	stopOnce sync.Once
}

// endpoints are the values of the placeholders.
type endpoints struct {
	kubeconfig, webhookHost, webhookCertDir string
	webhookPort, metricsPort, probePort     int
	// webhooksInstalled: the API server calls the webhook port, so it must answer.
	webhooksInstalled bool
}

// expand substitutes the placeholders of command.
func expand(command string, ep endpoints) string {
	return strings.NewReplacer(
		placeholderKubeconfig, ep.kubeconfig,
		placeholderWebhookHost, ep.webhookHost,
		placeholderWebhookPort, strconv.Itoa(ep.webhookPort),
		placeholderWebhookCertDir, ep.webhookCertDir,
		placeholderMetricsPort, strconv.Itoa(ep.metricsPort),
		placeholderProbePort, strconv.Itoa(ep.probePort),
	).Replace(command)
}

// operatorBuild is an operator binary the harness built, and the flags it has that the
// harness uses when present (older builds of cmd/sandgate lack them).
type operatorBuild struct {
	binary string
	// webhookHost: --webhook-host; without it the webhook server listens on all interfaces.
	webhookHost bool
	// selfSignedCerts: --self-signed-certs, a throwaway certificate the operator makes itself.
	selfSignedCerts bool
}

// command is the command line of the build: extensions on, leader election off, every
// endpoint on 127.0.0.1, and the operator's own self-signed webhook certificate when selfSigned
// is set and the build can make one.
func (b operatorBuild) command(selfSigned bool) string {
	args := []string{
		b.binary,
		"--kubeconfig=" + placeholderKubeconfig,
		"--extensions",
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + placeholderMetricsPort,
		"--health-probe-bind-address=127.0.0.1:" + placeholderProbePort,
		"--webhook-port=" + placeholderWebhookPort,
		"--webhook-cert-dir=" + placeholderWebhookCertDir,
	}
	if b.webhookHost {
		args = append(args, "--webhook-host="+placeholderWebhookHost)
	}
	if selfSigned && b.selfSignedCerts {
		args = append(args, "--self-signed-certs")
	}
	return strings.Join(args, " ")
}

// builds are the operator builds of this process by repository root: one build serves every
// environment a process starts, so that all the runs of one `make bench` (some eighty fresh
// clusters) measure the same operator, and none waits for the go tool again.
var builds = struct {
	sync.Mutex
	byRoot map[string]operatorBuild
}{byRoot: map[string]operatorBuild{}}

// buildOperator builds ./cmd/sandgate of the repository at root, once per process (a failed
// build is tried again).
func buildOperator(ctx context.Context, root string, log func(string, ...any)) (operatorBuild, error) {
	builds.Lock()
	defer builds.Unlock()
	if b, ok := builds.byRoot[root]; ok {
		log("operator built already by this process: %s", b.binary)
		return b, nil
	}
	b, err := buildOperatorNow(ctx, root, log)
	if err == nil {
		builds.byRoot[root] = b
	}
	return b, err
}

// buildOperatorNow runs the build of buildOperator. The binary is named for its content,
// bin/operator/sandgate-<sha256 prefix>, and never written again once there: another process
// that builds other code from another checkout sharing bin/ (a worktree's link to it), or this
// checkout after an edit, gets a file of its own instead of replacing the one a run is still
// starting operators from.
func buildOperatorNow(ctx context.Context, root string, log func(string, ...any)) (operatorBuild, error) {
	dir := filepath.Join(root, "bin", "operator")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return operatorBuild{}, fmt.Errorf("building the operator: %w", err)
	}
	scratch, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return operatorBuild{}, fmt.Errorf("building the operator: %w", err)
	}
	defer os.RemoveAll(scratch)
	start := time.Now()
	log("building the operator (go build ./cmd/sandgate)...")
	built := filepath.Join(scratch, "sandgate")
	build := exec.CommandContext(ctx, "go", "build", "-o", built, "./cmd/sandgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return operatorBuild{}, fmt.Errorf("building the operator: %w\n%s", err, out)
	}
	sum, err := fileDigest(built)
	if err != nil {
		return operatorBuild{}, fmt.Errorf("building the operator: %w", err)
	}
	b := operatorBuild{binary: filepath.Join(dir, "sandgate-"+sum[:12])}
	pruneBuilds(dir, time.Now())
	if err := os.Chtimes(b.binary, time.Time{}, time.Now()); err != nil {
		// A rename within one directory is atomic: a concurrent build of the same code
		// leaves the same bytes under the same name.
		if err := os.Rename(built, b.binary); err != nil {
			return operatorBuild{}, fmt.Errorf("building the operator: %w", err)
		}
	}
	log("operator built in %s: %s", time.Since(start).Round(100*time.Millisecond), b.binary)
	help, _ := exec.CommandContext(ctx, b.binary, "--help").CombinedOutput() // exits 0 or 2; the text is what counts
	b.webhookHost = strings.Contains(string(help), "-webhook-host")
	b.selfSignedCerts = strings.Contains(string(help), "-self-signed-certs")
	return b, nil
}

// keepBuilds is how long an operator build nobody built again stays in bin/operator.
const keepBuilds = 48 * time.Hour

// pruneBuilds removes the builds in dir that were last built more than keepBuilds before now
// (each build of the same code touches its file), so that bin/operator does not grow with every
// edit. A run that started one of them longer ago has its operators running already.
func pruneBuilds(dir string, now time.Time) {
	old, _ := filepath.Glob(filepath.Join(dir, "sandgate-*"))
	for _, path := range old {
		if fi, err := os.Stat(path); err == nil && now.Sub(fi.ModTime()) > keepBuilds {
			_ = os.Remove(path) // best effort: another process may have removed it
		}
	}
}

// fileDigest is the hex SHA-256 of the file at path.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BuildOperator builds ./cmd/sandgate of the repository at root (buildOperatorNow says where)
// and returns the binary's path.
func BuildOperator(ctx context.Context, root string, log func(string, ...any)) (string, error) {
	b, err := buildOperator(ctx, root, log)
	return b.binary, err
}

// startOperator runs command (placeholders substituted) through /bin/sh, output to logPath,
// and waits until it serves.
func startOperator(ctx context.Context, command string, ep endpoints, logPath string) (*Operator, error) {
	o, err := spawnOperator(command, ep, logPath)
	if err != nil {
		return nil, err
	}
	if _, err := o.WaitReady(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// spawnOperator starts command (placeholders substituted) through /bin/sh, output to logPath
// (appended), and returns at once.
func spawnOperator(command string, ep endpoints, logPath string) (*Operator, error) {
	expanded := expand(command, ep)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening operator log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	// exec: the shell is replaced by the operator, so PID is the operator's and signals reach it.
	cmd := exec.Command("/bin/sh", "-c", "exec "+expanded)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), "KUBECONFIG="+ep.kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Forked from the control plane's spawner thread, it dies with the harness and never before.
	startedAt := time.Now()
	if err := controlplane.OnSpawnerThread(cmd.Start); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	o := &Operator{Template: command, Command: expanded, PID: cmd.Process.Pid, LogPath: logPath, StartedAt: startedAt,
		cmd: cmd, ep: ep, done: make(chan struct{})}
	if strings.Contains(command, placeholderMetricsPort) {
		o.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ep.metricsPort)
	}
	go func() {
		o.err = cmd.Wait()
		close(o.done)
	}()
	return o, nil
}

// WaitReady waits until the operator serves and returns when its checks first all passed
// (polled every 50 ms). Ready means every endpoint the command line mentions answers: the
// readiness probe (or else the metrics endpoint) and the webhook port, which the API server
// calls with failurePolicy Fail as soon as the webhook configurations exist. On failure the
// operator is stopped.
func (o *Operator) WaitReady(ctx context.Context) (time.Time, error) {
	checks := map[string]func(context.Context) bool{}
	switch {
	case strings.Contains(o.Template, placeholderProbePort):
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", o.ep.probePort)
		checks[url] = httpOK(url)
	case o.MetricsURL != "":
		checks[o.MetricsURL] = httpOK(o.MetricsURL)
	}
	if strings.Contains(o.Template, placeholderWebhookPort) && o.ep.webhooksInstalled {
		addr := net.JoinHostPort(o.ep.webhookHost, strconv.Itoa(o.ep.webhookPort))
		checks["webhook server "+addr] = dials(addr)
	}
	var waitingFor string
	ready := func(ctx context.Context) bool {
		for name, check := range checks {
			if !check(ctx) {
				waitingFor = name
				return false
			}
		}
		return true
	}
	waitCtx, cancel := context.WithTimeout(ctx, operatorReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ready(waitCtx) {
		select {
		case <-o.done:
			return time.Time{}, fmt.Errorf("the operator exited before it was ready (%v); log %s ends:\n%s", o.err, o.LogPath, Tail(o.LogPath, 20))
		case <-waitCtx.Done():
			_ = o.Stop()
			return time.Time{}, fmt.Errorf("the operator was not ready within %s (%s did not answer); log %s ends:\n%s", operatorReadyTimeout, waitingFor, o.LogPath, Tail(o.LogPath, 20))
		case <-tick.C:
		}
	}
	return time.Now(), nil
}

// selfSignedFlag is the flag of cmd/sandgate that writes a new certificate at every start.
const selfSignedFlag = " --self-signed-certs"

// RestartOperator stops the operator with SIGTERM, as a rolling update or a node drain does,
// and starts the same command again on the same ports; it returns as soon as the new process
// is started, with how long the old one took to exit: the caller times what follows from
// Operator.StartedAt (Operator.WaitReady; a claim created at once). The new process appends
// to the same log.
//
// A command the harness built with --self-signed-certs runs again without it: the new
// process serves the certificate its predecessor wrote, which the webhook configurations
// trust, as a restarted pod serves the certificate cert-manager keeps in its Secret. Another
// certificate would need the harness to rewrite every caBundle first, which no restart in a
// cluster does.
func (e *Env) RestartOperator(ctx context.Context) (*Operator, time.Duration, error) {
	old := e.Operator
	if old == nil {
		return nil, 0, errors.New("no operator to restart")
	}
	stopStart := time.Now()
	if err := old.Stop(); err != nil {
		return nil, 0, fmt.Errorf("stopping the operator: %w", err)
	}
	stopped := time.Since(stopStart)
	e.Operator = nil
	command := strings.Replace(old.Template, selfSignedFlag, "", 1)
	op, err := spawnOperator(command, old.ep, old.LogPath)
	if err != nil {
		return nil, stopped, err
	}
	e.Operator = op
	e.logf("operator restarted (pid %d, the old one exited %s after SIGTERM)", op.PID, stopped.Round(time.Millisecond))
	return op, stopped, nil
}

func httpOK(url string) func(context.Context) bool {
	return func(ctx context.Context) bool { return Answers200(ctx, url) }
}

// Answers200 reports whether a GET of url answers 200 OK before ctx ends.
func Answers200(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func dials(addr string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	}
}

// Usage reads the operator's CPU seconds and peak memory so far.
func (o *Operator) Usage() (proc.Usage, error) { return proc.Read("/proc", o.PID) }

// Metrics scrapes the operator's metrics endpoint.
func (o *Operator) Metrics(ctx context.Context) (scrape.Snapshot, error) {
	if o.MetricsURL == "" {
		return nil, errors.New("the operator command has no {{metrics-port}}: no metrics to scrape")
	}
	return scrape.FromURL(ctx, o.MetricsURL)
}

// Err reports the operator having exited while it should run.
func (o *Operator) Err() error {
	select {
	case <-o.done:
		return fmt.Errorf("the operator exited (%v); log %s ends:\n%s", o.err, o.LogPath, Tail(o.LogPath, 20))
	default:
		return nil
	}
}

// Stop ends the operator: SIGTERM, then SIGKILL after operatorStopTimeout.
func (o *Operator) Stop() error {
	var err error
	o.stopOnce.Do(func() {
		select {
		case <-o.done:
			return
		default:
		}
		_ = o.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-o.done:
		case <-time.After(operatorStopTimeout):
			_ = syscall.Kill(-o.PID, syscall.SIGKILL)
			<-o.done
			err = fmt.Errorf("the operator did not stop within %s and was killed", operatorStopTimeout)
		}
	})
	return err
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errNoOperator is what the operator's probes return while none runs (detached, or between
// a restart's stop and start).
var errNoOperator = errors.New("no operator running")

// OperatorMetrics scrapes the operator running now: unlike Operator.Metrics, it follows the
// operator across RestartOperator.
func (e *Env) OperatorMetrics(ctx context.Context) (scrape.Snapshot, error) {
	if e.Operator == nil {
		return nil, errNoOperator
	}
	return e.Operator.Metrics(ctx)
}

// OperatorUsage reads the CPU and memory of the operator running now, across restarts.
func (e *Env) OperatorUsage() (proc.Usage, error) {
	if e.Operator == nil {
		return proc.Usage{}, errNoOperator
	}
	return e.Operator.Usage()
}
