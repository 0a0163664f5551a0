package harness

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/sandgate-dev/sandgate/test/bench/proc"
	"github.com/sandgate-dev/sandgate/test/bench/scrape"
	"github.com/sandgate-dev/sandgate/test/controlplane"
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

	cmd  *exec.Cmd
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

// buildOperator builds ./cmd/sandgate of the repository at root into <root>/bin/sandgate.
func buildOperator(ctx context.Context, root string, log func(string, ...any)) (operatorBuild, error) {
	b := operatorBuild{binary: filepath.Join(root, "bin", "sandgate")}
	start := time.Now()
	log("building the operator (go build -o bin/sandgate ./cmd/sandgate)...")
	build := exec.CommandContext(ctx, "go", "build", "-o", b.binary, "./cmd/sandgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return b, fmt.Errorf("building the operator: %w\n%s", err, out)
	}
	log("operator built in %s", time.Since(start).Round(100*time.Millisecond))
	help, _ := exec.CommandContext(ctx, b.binary, "--help").CombinedOutput() // exits 0 or 2; the text is what counts
	b.webhookHost = strings.Contains(string(help), "-webhook-host")
	b.selfSignedCerts = strings.Contains(string(help), "-self-signed-certs")
	return b, nil
}

// startOperator runs command (placeholders substituted) through /bin/sh, output to logPath,
// and waits until it serves.
func startOperator(ctx context.Context, command string, ep endpoints, logPath string) (*Operator, error) {
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
	if err := controlplane.OnSpawnerThread(cmd.Start); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	o := &Operator{Template: command, Command: expanded, PID: cmd.Process.Pid, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	if strings.Contains(command, placeholderMetricsPort) {
		o.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ep.metricsPort)
	}
	go func() {
		o.err = cmd.Wait()
		close(o.done)
	}()

	// Ready means every endpoint the command line mentions answers: the readiness probe (or
	// else the metrics endpoint) and the webhook port, which the API server calls with
	// failurePolicy Fail as soon as the webhook configurations exist.
	checks := map[string]func(context.Context) bool{}
	switch {
	case strings.Contains(command, placeholderProbePort):
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", ep.probePort)
		checks[url] = httpOK(url)
	case o.MetricsURL != "":
		checks[o.MetricsURL] = httpOK(o.MetricsURL)
	}
	if strings.Contains(command, placeholderWebhookPort) && ep.webhooksInstalled {
		addr := net.JoinHostPort(ep.webhookHost, strconv.Itoa(ep.webhookPort))
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
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !ready(waitCtx) {
		select {
		case <-o.done:
			return nil, fmt.Errorf("the operator exited before it was ready (%v); log %s ends:\n%s", o.err, logPath, Tail(logPath, 20))
		case <-waitCtx.Done():
			_ = o.Stop()
			return nil, fmt.Errorf("the operator was not ready within %s (%s did not answer); log %s ends:\n%s", operatorReadyTimeout, waitingFor, logPath, Tail(logPath, 20))
		case <-tick.C:
		}
	}
	return o, nil
}

func httpOK(url string) func(context.Context) bool {
	return func(ctx context.Context) bool {
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

// freePort asks the kernel for an unused TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }() // only the port number was wanted
	return l.Addr().(*net.TCPAddr).Port, nil
}
