package sdk

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// RouterOptions say how to run the public sandbox-router.
type RouterOptions struct {
	// Binary is the router built from sigs.k8s.io/agent-sandbox (make tools builds it).
	Binary string
	// Kubeconfig is the router's own identity, with the RBAC its manifests give it.
	Kubeconfig string
	// ScopedTokenSecretFile, when set, runs the router with --authz-mode=scoped-token and
	// this HMAC secret: requests are routed by namespace and name only.
	ScopedTokenSecretFile string
	// LogPath receives the router's output.
	LogPath string
}

// Router is a running sandbox-router on loopback.
type Router struct {
	// URL is the proxy's address, the SDK's APIURL.
	URL string
	// MetricsURL serves the router's Prometheus metrics.
	MetricsURL string
	cmd        *exec.Cmd
	done       chan error
}

// StartRouter runs the router as its own process, as its Deployment does (the name cache on,
// everything bound to 127.0.0.1, loopback pod IPs allowed because the local cluster's pods
// have them), and returns once it reports ready.
func StartRouter(ctx context.Context, o RouterOptions) (*Router, error) {
	ports, err := controlplane.ReservePorts(3)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--http-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[2]),
		"--kubeconfig=" + o.Kubeconfig,
		"--cluster-domain=cluster.local",
		"--proxy-timeout=180s",
		"--upstream-max-retries=3",
		"--cache-enabled=true",
		"--allow-loopback-pod-ip=true",
	}
	if o.ScopedTokenSecretFile != "" {
		args = append(args, "--authz-mode=scoped-token", "--authz-scoped-token-secret-file="+o.ScopedTokenSecretFile)
	}
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The router dies with this process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting the router: %w", err)
	}
	r := &Router{
		URL:        "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/metrics",
		cmd:        cmd,
		done:       make(chan error, 1),
	}
	go func() { r.done <- cmd.Wait(); _ = logf.Close() }()
	ready := "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/readyz"
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-r.done:
			return nil, fmt.Errorf("the router exited before it was ready (%v); its log is %s", err, o.LogPath)
		case <-ctx.Done():
			r.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get(ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("the router was not ready within 90s; its log is %s", o.LogPath)
		}
	}
}

// Stop ends the router.
func (r *Router) Stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// Metric sums the router's series of a metric whose labels include every pair in match
// ("code=502"): for the retries and status codes a test counts.
func (r *Router) Metric(name string, match ...string) (float64, error) {
	resp, err := http.Get(r.MetricsURL)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			k, v, _ := strings.Cut(m, "=")
			if !strings.Contains(line, k+`="`+v+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("reading %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
