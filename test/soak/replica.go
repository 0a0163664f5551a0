package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
)

// replica is one operator process, supervised as a kubelet supervises a container with
// restartPolicy Always: when it exits (killed, or on its own after losing the Lease) it is
// started again after restartDelay, on the same ports, kubeconfig and certificate directory.
type replica struct {
	name                                string
	args                                []string
	logPath                             string
	webhookPort, metricsPort, probePort int

	// launched is set once supervise runs (before it starts).
	launched bool

	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
	stopping bool
	done     chan struct{} // closed when the supervisor has ended
}

// restartDelay is how long the supervisor waits before starting an exited replica again.
const restartDelay = time.Second

func newReplica(name, binary, kubeconfig, certDir, logPath string, extra []string) (*replica, error) {
	r := &replica{name: name, logPath: logPath, done: make(chan struct{})}
	ports, err := controlplane.ReservePorts(3)
	if err != nil {
		return nil, err
	}
	r.webhookPort, r.metricsPort, r.probePort = ports[0], ports[1], ports[2]
	r.args = append([]string{binary,
		"--kubeconfig=" + kubeconfig,
		"--extensions",
		"--leader-elect",
		"--leader-election-namespace=" + leaseNamespace,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(r.metricsPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(r.probePort),
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + strconv.Itoa(r.webhookPort),
		"--webhook-cert-dir=" + certDir,
	}, extra...)
	return r, nil
}

func (r *replica) webhookAddr() string { return "127.0.0.1:" + strconv.Itoa(r.webhookPort) }
func (r *replica) readyzURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(r.probePort) + "/readyz"
}

// supervise runs the replica until stop.
func (r *replica) supervise(logf func(string, ...any)) {
	defer close(r.done)
	for {
		cmd, err := r.spawn()
		if err != nil {
			logf("replica %s: %v", r.name, err)
			return
		}
		err = cmd.Wait()
		r.mu.Lock()
		stopping := r.stopping
		r.cmd = nil
		if !stopping {
			r.restarts++
		}
		r.mu.Unlock()
		if stopping {
			return
		}
		logf("replica %s exited (%v); restarting it in %s", r.name, err, restartDelay)
		time.Sleep(restartDelay)
	}
}

func (r *replica) spawn() (*exec.Cmd, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return nil, errors.New("stopping")
	}
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log: %w", err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := controlplane.OnSpawnerThread(cmd.Start); err != nil {
		return nil, fmt.Errorf("starting: %w", err)
	}
	r.cmd = cmd
	return cmd, nil
}

// signal sends sig to the running process.
func (r *replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return fmt.Errorf("replica %s is not running", r.name)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling replica %s: %w", r.name, err)
	}
	return nil
}

// stop ends the supervision: SIGCONT (a frozen process cannot exit), SIGTERM, SIGKILL after
// timeout.
func (r *replica) stop(timeout time.Duration) {
	r.mu.Lock()
	r.stopping = true
	cmd := r.cmd
	r.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-r.done:
	case <-time.After(timeout):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		<-r.done
	}
}

// ready reports whether the replica's /readyz answers 200 within a second.
func (r *replica) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return harness.Answers200(ctx, r.readyzURL())
}

// identity returns the leader election identity the replica's current process logged ("" when
// none yet): a restarted process has a new one, logged after the old ones in the same file.
func (r *replica) identity() string {
	f, err := os.Open(r.logPath)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	last := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"leader election identity"`) {
			continue
		}
		if _, rest, ok := strings.Cut(line, `"identity":"`); ok {
			if id, _, ok := strings.Cut(rest, `"`); ok {
				last = id
			}
		}
	}
	return last
}
