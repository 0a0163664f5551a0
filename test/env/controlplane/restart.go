package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

const (
	// apiServerStopTimeout is how long RestartAPIServer waits for kube-apiserver to exit after
	// SIGTERM before it kills it. Open watches hold up a graceful stop; envtest's own Stop
	// waits 20 s and then kills without waiting for the exit, which is why the cluster signals
	// the process itself.
	apiServerStopTimeout = 30 * time.Second
	// apiServerReadyTimeout bounds the wait for /readyz after a restart when ctx does not.
	apiServerReadyTimeout = 60 * time.Second
	// apiServerRestartTimeout is how long envtest waits for a restarted API server to answer
	// its health check before it gives up and kills it.
	apiServerRestartTimeout = 2 * time.Minute
)

// envtestProcess is a process envtest runs (etcd, kube-apiserver). envtest keeps its handle
// to itself: the cluster finds the process by the directory its command line names and tells
// it from a later process with the same pid by its start time. The zero value is "unknown".
type envtestProcess struct {
	name      string
	pid       int
	startTime uint64
}

// findProcess finds the process of binary name whose command line mentions dir.
func findProcess(name, dir string) (envtestProcess, error) {
	var found []int
	for _, pid := range processesMentioning([]string{dir}) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		if filepath.Base(string(argv0)) == name {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return envtestProcess{}, fmt.Errorf("find %s: %d processes of it mention %s, want 1", name, len(found), dir)
	}
	start, err := processStartTime(found[0])
	if err != nil {
		return envtestProcess{}, fmt.Errorf("find %s: %w", name, err)
	}
	return envtestProcess{name: name, pid: found[0], startTime: start}, nil
}

// known reports whether the process was found.
func (p envtestProcess) known() bool { return p.pid > 0 }

// alive reports whether the process still runs. envtest reaps its processes at once, so an
// exited one does not linger as a zombie.
func (p envtestProcess) alive() bool { return p.known() && processAlive(p.pid, p.startTime) }

// waitExit waits up to timeout for the process to be gone.
func (p envtestProcess) waitExit(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// restartWatchdog replaces the watchdog by one that knows the current etcd and
// kube-apiserver, unless the cluster is stopped.
func (c *Cluster) restartWatchdog() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	var pids []int
	for _, p := range []envtestProcess{c.etcd, c.apiServer} {
		if p.known() {
			pids = append(pids, p.pid)
		}
	}
	if len(pids) == 0 {
		return
	}
	wd, err := startWatchdog(c.Dir, c.stateFile, c.Env.WebhookInstallOptions.LocalServingCertDir, pids)
	if err != nil {
		c.logf("no new watchdog: %v", err) // the old one, if any, still knows etcd
		return
	}
	// The new one runs before the old one goes: if this process dies in between, both clean
	// up, which is harmless.
	if c.watchdog != nil {
		_ = syscall.Kill(-c.watchdog.Process.Pid, syscall.SIGKILL)
	}
	c.watchdog = wd
}

// RestartAPIServer stops kube-apiserver gracefully (SIGTERM; killed if it has not exited
// after 30 s) and starts it again on the same etcd, port, certificates and flags, then waits
// until /readyz answers. stopped is when the old process had exited, ready when /readyz first
// answered 200. Clients (the components, the operator, any rest.Config of the cluster) keep
// their configuration and reconnect by themselves; provisioned users stay valid. Err does not
// report the API server while a restart has it down. ctx bounds the wait for the restarted
// API server (60 s at most) and, once it is cancelled, prevents the start; the stop and
// start themselves are not interruptible. Restarts are serialized; Stop waits for one that
// is stopping or starting the process.
func (c *Cluster) RestartAPIServer(ctx context.Context) (stopped, ready time.Time, err error) {
	return c.restartAPIServer(ctx, syscall.SIGTERM)
}

// KillAPIServer is RestartAPIServer with SIGKILL: kube-apiserver crashes, with requests
// in flight and watches cut off, and is started again at once.
func (c *Cluster) KillAPIServer(ctx context.Context) (stopped, ready time.Time, err error) {
	return c.restartAPIServer(ctx, syscall.SIGKILL)
}

// restartAPIServer stops kube-apiserver with sig, starts it again and waits for /readyz.
func (c *Cluster) restartAPIServer(ctx context.Context, sig syscall.Signal) (stopped, ready time.Time, err error) {
	begin := time.Now()
	stopped, err = c.cycleAPIServer(ctx, sig)
	if err != nil {
		return stopped, time.Time{}, fmt.Errorf("restart kube-apiserver: %w", err)
	}
	ready, err = c.waitAPIServerReady(ctx)
	if err != nil {
		return stopped, time.Time{}, fmt.Errorf("restart kube-apiserver: %w", err)
	}
	c.logf("kube-apiserver restarted (%v): down after %s, ready %s later",
		sig, stopped.Sub(begin).Round(time.Millisecond), ready.Sub(stopped).Round(time.Millisecond))
	return stopped, ready, nil
}

// cycleAPIServer stops kube-apiserver with sig and starts it again through envtest, which
// reuses the port, certificates and flags of the first start: its secure port is set by
// then, the serving certificate is in CertDir and the client CA (provisioned users) stays in
// memory. It returns when the old process was gone.
func (c *Cluster) cycleAPIServer(ctx context.Context, sig syscall.Signal) (stopped time.Time, err error) {
	c.apiServerMu.Lock()
	defer c.apiServerMu.Unlock()
	c.mu.Lock()
	if c.stopped || c.Env == nil {
		c.mu.Unlock()
		return time.Time{}, errors.New("the cluster is stopped")
	}
	old := c.apiServer
	c.apiServerDown = true
	c.mu.Unlock()
	// On failure Err reports it: the cluster has no API server then.
	defer func() {
		c.mu.Lock()
		c.apiServerDown = false
		c.apiServerErr = err
		c.mu.Unlock()
	}()
	if !old.alive() {
		return time.Time{}, errors.New("kube-apiserver is not running (or its process is unknown)")
	}

	c.logf("stopping kube-apiserver (%v)...", sig)
	_ = syscall.Kill(old.pid, sig)
	timeout := apiServerStopTimeout
	if sig == syscall.SIGKILL {
		timeout = 5 * time.Second
	}
	if !old.waitExit(timeout) {
		c.logf("kube-apiserver did not exit within %s of %v, killing it", timeout, sig)
		_ = syscall.Kill(old.pid, syscall.SIGKILL)
		if !old.waitExit(5 * time.Second) {
			return time.Time{}, fmt.Errorf("kube-apiserver (pid %d) does not exit even after SIGKILL", old.pid)
		}
	}
	stopped = time.Now()
	api := c.Env.ControlPlane.APIServer
	// envtest has seen the exit, or is about to: its Stop then finds nothing to signal
	// (it signals the process group, which is gone).
	if err := api.Stop(); err != nil && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, os.ErrProcessDone) {
		return stopped, fmt.Errorf("let envtest see the stop: %w", err)
	}

	c.mu.Lock()
	halted := c.stopped
	c.mu.Unlock()
	if halted {
		return stopped, errors.New("the cluster was stopped meanwhile")
	}
	if err := ctx.Err(); err != nil {
		return stopped, fmt.Errorf("stopped it, not started again: %w", err)
	}

	logPath := c.LogPath("kube-apiserver")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return stopped, fmt.Errorf("open its log: %w", err)
	}
	defer log.Close() // the process has its own descriptor
	fmt.Fprintf(log, "\n=== controlplane: kube-apiserver stopped (%v) at %s, starting it again ===\n\n",
		sig, stopped.Format(time.RFC3339Nano))
	// The first start's log file is closed by now.
	api.Out, api.Err = log, log
	// envtest gives a start 20 s and then kills the process: a restart on a busy machine,
	// with every client re-listing at once, took longer (the fault soak saw /readyz after
	// 5 s of a 20 s start on a loaded 2-core machine, then the kill).
	api.StartTimeout = apiServerRestartTimeout
	if err := api.Start(); err != nil {
		return stopped, fmt.Errorf("start it again: %w; %s ends:\n%s", err, logPath, tail(logPath, 15))
	}
	p, findErr := findProcess("kube-apiserver", api.CertDir)
	if findErr != nil {
		c.logf("not watching the restarted kube-apiserver: %v", findErr)
	}
	c.mu.Lock()
	c.apiServer = p
	c.mu.Unlock()
	c.restartWatchdog()
	return stopped, nil
}

// waitAPIServerReady waits until the API server's /readyz answers 200, and returns when.
func (c *Cluster) waitAPIServerReady(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, apiServerReadyTimeout)
	defer cancel()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return time.Time{}, fmt.Errorf("create client: %w", err)
	}
	for {
		reqCtx, reqCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(reqCtx)
		reqCancel()
		if err == nil {
			return time.Now(), nil
		}
		if stopErr := c.Err(); stopErr != nil {
			return time.Time{}, fmt.Errorf("wait for /readyz: %w", stopErr)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for /readyz: %w (last answer: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
