// Package controlplane runs a local Kubernetes control plane with simulated nodes for
// sandgate's commands (sandgate-dev, sandgate-demo, sandgate-bench) and, through test/framework,
// for its integration tests, in one call:
//
//	cluster, err := controlplane.Start(ctx, controlplane.Options{Profile: controlplane.ProfileKubelet})
//	...
//	defer cluster.Stop()
//
// Start runs etcd and kube-apiserver through controller-runtime's envtest with the sandgate
// CRDs installed (their conversion webhook pointed at the local webhook address),
// kube-scheduler (so Pods get placed), kube-controller-manager with the garbage collector,
// namespace and storage controllers (so ownerReferences cascade, namespaces go away and PVCs
// bind to the cluster's PersistentVolumes of the default StorageClass), and kwok with a few
// simulated Nodes on which Pods become Running and Ready the way the chosen Profile describes.
// Everything listens on 127.0.0.1 only and uses the binaries `make tools` builds into
// bin/k8s/<version>.
//
// The machines this runs on are shared and processes get killed, so a cluster cleans up
// after itself: Stop (also run on SIGINT/SIGTERM and when Start fails) ends every process and
// removes every directory the cluster created; the components a cluster starts die with
// their parent; a watchdog kills etcd and kube-apiserver if the process disappears without
// stopping; and Start cleans up after earlier processes that died anyway.
//
// The testing.TB helpers built on it are in test/framework.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Profile selects how kwok simulates the kubelet of the fake Nodes.
type Profile string

const (
	// ProfileFast takes a bound Pod to Running and Ready, with an IP, in one status update,
	// like kwok's stock stages.
	ProfileFast Profile = "fast"
	// ProfileKubelet takes a bound Pod to Running and Ready through separate status updates
	// 20-50 ms apart — Initialized with IPs assigned, then ContainersReady, then Ready — as a
	// kubelet reports progress; the final state is the one ProfileFast writes.
	ProfileKubelet Profile = "kubelet"
	// ProfileRealistic takes a bound Pod through ProfileKubelet's steps, but its containers
	// become ready only after a start-up time drawn for the Pod from Options.PodStartup (a
	// median of 2 s and a p99 of 8 s by default), so that a cold start costs what it costs
	// on a real cluster. A Pod deleted while starting goes away without becoming Ready.
	ProfileRealistic Profile = "realistic"
)

// Profiles lists the valid profiles.
var Profiles = []Profile{ProfileFast, ProfileKubelet, ProfileRealistic}

// validate fails for an unknown profile.
func (p Profile) validate() error {
	for _, known := range Profiles {
		if p == known {
			return nil
		}
	}
	return fmt.Errorf("unknown profile %q (want %q, %q or %q)", p, ProfileFast, ProfileKubelet, ProfileRealistic)
}

// DefaultNodes is the number of simulated Nodes when Options.Nodes is 0.
const DefaultNodes = 3

// Options configure Start. The zero value gives a full cluster with DefaultNodes nodes and
// ProfileFast.
type Options struct {
	// Nodes is the number of simulated Nodes (kwok-node-0 ... kwok-node-<Nodes-1>); 0 means
	// DefaultNodes. Use NoKwok for a cluster without nodes.
	Nodes int
	// Profile is how Pods on the simulated Nodes become Ready; "" means ProfileFast.
	Profile Profile
	// PodStartup is the start-up time distribution of ProfileRealistic; other profiles
	// refuse anything but its zero value or the defaults (CheckProfile).
	PodStartup PodStartup
	// CRDDirectoryPaths are installed with the API server; default <repo root>/config/crd/bases.
	// A missing path is an error.
	CRDDirectoryPaths []string
	// WebhookInstallOptions are passed to envtest, which installs the webhook configurations.
	WebhookInstallOptions envtest.WebhookInstallOptions
	// Webhooks installs sandgate's webhook configurations (<repo root>/config/webhook unless
	// WebhookInstallOptions.Paths says otherwise), pointed at a local webhook server on the
	// host, port and certificate directory of Env.WebhookInstallOptions (test/framework's
	// StartManager with ManagerOptions.Webhooks runs one). Their failure policy is Fail: while
	// no such server runs, writes of sandgate's kinds are refused.
	Webhooks bool
	// APIServerFlags are extra kube-apiserver flags, by name without the dashes, set over
	// the ones the framework and envtest choose (e.g. "egress-selector-config-file").
	APIServerFlags map[string]string
	// AuditPolicy is a kube-apiserver audit policy (YAML, audit.k8s.io/v1 Policy); "" means no
	// audit log. The API server then writes JSON events to AuditLogPath, in the logs directory
	// (KeepLogs keeps it), synchronously (blocking mode: an event is written before its
	// request is answered, so none is lost when the API server is killed) and never rotated.
	AuditPolicy string
	// BinaryDir holds kube-apiserver, etcd, kubectl, kube-scheduler, kube-controller-manager
	// and kwok; default $KUBEBUILDER_ASSETS, else <repo root>/bin/k8s/<KubernetesVersion>.
	BinaryDir string
	// PersistentVolumes is how many PersistentVolumes of DefaultStorageClass the cluster has
	// (how many PVCs can be Bound at once; Released ones are recycled); 0 means
	// DefaultPersistentVolumes. Without kube-controller-manager there are none.
	PersistentVolumes int
	// PodCIDR is the range kwok gives pod IPs from; "" means DefaultPodCIDR. A loopback range
	// (LoopbackPodCIDR) makes pods reachable on this machine: every 127/8 address is local on
	// Linux, so a server listening on a pod's IP stands in for its container.
	PodCIDR string
	// NoKwok runs no kwok and creates no Nodes; NoScheduler runs no kube-scheduler;
	// NoControllerManager runs no kube-controller-manager (no garbage collection, no
	// namespace deletion, no PVC binding then).
	NoKwok, NoScheduler, NoControllerManager bool
	// Log receives progress lines; nil means none. The components' own output goes to log
	// files in the cluster's directory, which errors name.
	Log io.Writer
	// KeepLogs keeps the cluster's logs directory after Stop (Stop prints its path to Log).
	// The environment variable SANDGATE_KEEP_LOGS=1 does the same. Logs of a failed Start are
	// always kept, for a day.
	KeepLogs bool
	// NoSignalHandler leaves SIGINT and SIGTERM alone: the caller handles them and calls Stop,
	// as sandgate-dev (test/env/devcluster) does. By default Start installs a handler that stops
	// every cluster of the process and then lets the signal end it.
	NoSignalHandler bool
}

// Cluster is a running local control plane. Stop it when done.
type Cluster struct {
	// Config is a cluster-admin (system:masters) client configuration.
	Config *rest.Config
	// Env is the envtest environment running etcd and kube-apiserver.
	Env *envtest.Environment
	// KubeconfigPath is an admin kubeconfig file in Dir.
	KubeconfigPath string
	// Dir is the cluster's temporary directory: logs/, kubeconfigs, kwok's stages, etcd's
	// data and the API server's certificates. Stop removes it.
	Dir string
	// BinaryDir is where the control-plane binaries came from.
	BinaryDir string
	// Profile is the kwok profile in use ("" with NoKwok).
	Profile Profile
	// PodStartup is the start-up time distribution of ProfileRealistic, defaults filled in
	// (zero with another profile).
	PodStartup PodStartup
	// NodeNames are the simulated Nodes.
	NodeNames []string

	auditLog bool

	log       io.Writer
	keepLogs  bool
	stateFile string
	signals   bool

	// users caches the client configurations UserConfig provisioned, by user name.
	users sync.Map // string → *rest.Config

	mu       sync.Mutex
	children []*child // in start order
	watchdog *exec.Cmd
	// etcd and apiServer are envtest's processes, which Err watches; apiServerDown is set
	// while a restart has the API server down on purpose, apiServerErr when one failed.
	etcd, apiServer envtestProcess
	apiServerDown   bool
	apiServerErr    error
	// stopRecycler ends the watch that recycles Released PersistentVolumes.
	stopRecycler func()
	stopped      bool

	// starting is held while Start runs: Stop cancels the start and waits for it, so that
	// it never races envtest bringing up etcd and the API server.
	starting      sync.Mutex
	cancelStart   context.CancelFunc
	stopRequested atomic.Bool

	// apiServerMu serializes restarts of the API server with each other and with Stop.
	apiServerMu sync.Mutex

	stopOnce sync.Once
	stopErr  error
}

// Start starts a cluster as opts describe and returns once the API server serves the CRDs,
// the components run and the simulated Nodes are Ready. ctx bounds the start only (cancel it
// to give up); the cluster runs until Stop. When Start fails it stops whatever it started.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := checkBinaries(opts.BinaryDir, opts); err != nil {
		return nil, err
	}
	base := baseDir()
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", base, err)
	}
	reapStale(base, opts.Log)

	dir, err := os.MkdirTemp(base, "cluster-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{
		Dir:       dir,
		BinaryDir: opts.BinaryDir,
		log:       opts.Log,
		keepLogs:  opts.KeepLogs || os.Getenv("SANDGATE_KEEP_LOGS") == "1",
		stateFile: filepath.Join(base, strconv.Itoa(os.Getpid())+"-"+filepath.Base(dir)+".json"),
	}
	if !opts.NoKwok {
		c.Profile = opts.Profile
		if opts.Profile == ProfileRealistic {
			c.PodStartup = opts.PodStartup
		}
		c.NodeNames = nodeNames(opts.Nodes)
	}
	if err := c.saveState(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.cancelStart = cancel
	c.starting.Lock()
	if !opts.NoSignalHandler {
		c.signals = true
		registerForSignals(c)
	}
	defer func() {
		interrupted := c.stopRequested.Load() || parent.Err() != nil
		if retErr != nil && !interrupted {
			c.keepLogs = true
		}
		c.starting.Unlock()
		if retErr == nil {
			return
		}
		if err := c.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
		switch {
		case interrupted:
			retErr = fmt.Errorf("interrupted while starting, stopped: %w", retErr)
		case c.keepLogs:
			retErr = fmt.Errorf("%w\n(component logs kept in %s)", retErr, c.logDir())
		}
	}()
	if err := os.Mkdir(c.logDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create logs directory: %w", err)
	}

	if err := c.startAPIServer(opts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("abort after the API server started: %w", err)
	}
	if err := c.startComponents(ctx, opts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("abort after the components started: %w", err)
	}
	c.logf("cluster ready: %s (admin kubeconfig %s)", c.Config.Host, c.KubeconfigPath)
	return c, nil
}

// defaults fills in the defaults of opts and validates them.
func (o *Options) defaults() error {
	if o.Nodes < 0 {
		return fmt.Errorf("invalid node count %d: want at least 1 (or NoKwok)", o.Nodes)
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.PersistentVolumes < 0 {
		return fmt.Errorf("invalid PersistentVolumes %d: want at least 1 (0 for the default)", o.PersistentVolumes)
	}
	if o.PersistentVolumes == 0 {
		o.PersistentVolumes = DefaultPersistentVolumes
	}
	if o.Profile == "" {
		o.Profile = ProfileFast
	}
	if err := CheckProfile(o.Profile, o.PodStartup); err != nil {
		return err
	}
	o.PodStartup = o.PodStartup.withDefaults()
	if o.BinaryDir == "" {
		dir, err := defaultBinaryDir()
		if err != nil {
			return fmt.Errorf("locate control-plane binaries: %w", err)
		}
		o.BinaryDir = dir
	}
	if abs, err := filepath.Abs(o.BinaryDir); err == nil {
		o.BinaryDir = abs
	}
	if o.Webhooks && len(o.WebhookInstallOptions.Paths) == 0 {
		paths, err := defaultWebhookPaths()
		if err != nil {
			return fmt.Errorf("locate webhook configurations: %w", err)
		}
		o.WebhookInstallOptions.Paths = paths
	}
	if len(o.CRDDirectoryPaths) == 0 {
		paths, err := defaultCRDDirectoryPaths()
		if err != nil {
			return fmt.Errorf("locate CRDs: %w", err)
		}
		o.CRDDirectoryPaths = paths
	}
	return nil
}

// logDir is where the components' output goes.
func (c *Cluster) logDir() string { return filepath.Join(c.Dir, "logs") }

// LogPath is the file that holds the output of a component of the cluster: kube-apiserver,
// etcd, kube-scheduler, ...
func (c *Cluster) LogPath(component string) string {
	return filepath.Join(c.logDir(), component+".log")
}

// logf writes a progress line to the cluster's log, if any.
func (c *Cluster) logf(format string, args ...any) {
	if c.log != nil {
		fmt.Fprintf(c.log, "controlplane: "+format+"\n", args...)
	}
}

// saveState records the cluster's directories and processes in its state file.
func (c *Cluster) saveState() error {
	st := stateFile{PID: os.Getpid(), Dirs: []string{c.Dir}}
	st.StartTime, _ = processStartTime(st.PID)
	if c.Env != nil && c.Env.WebhookInstallOptions.LocalServingCertDir != "" {
		st.Dirs = append(st.Dirs, c.Env.WebhookInstallOptions.LocalServingCertDir)
	}
	c.mu.Lock()
	for _, ch := range c.children {
		st.Children = append(st.Children, childInfo{Name: ch.name, PID: ch.pid()})
	}
	c.mu.Unlock()
	return writeState(c.stateFile, st)
}

// Stop stops the cluster: kwok, kube-scheduler and kube-controller-manager first (with their
// watches open the API server takes ~20 s to stop), then the API server and etcd; then it
// removes the cluster's directories. It is safe to call more than once and concurrently.
func (c *Cluster) Stop() error {
	c.stopRequested.Store(true)
	if c.cancelStart != nil {
		c.cancelStart()
	}
	c.starting.Lock()
	c.starting.Unlock() //nolint:staticcheck // only waits for Start to finish
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

// stop does the work of Stop.
func (c *Cluster) stop() error {
	start := time.Now()
	if c.signals {
		unregisterForSignals(c)
	}
	var errs []error
	c.mu.Lock()
	c.stopped = true
	children := c.children
	if c.watchdog != nil {
		_ = syscall.Kill(-c.watchdog.Process.Pid, syscall.SIGKILL) // its own process group
	}
	stopRecycler := c.stopRecycler
	c.mu.Unlock()
	// Its watch, like the components', would hold up the API server's stop.
	if stopRecycler != nil {
		stopRecycler()
	}
	for i := len(children) - 1; i >= 0; i-- {
		children[i].signal(syscall.SIGTERM)
	}
	for i := len(children) - 1; i >= 0; i-- {
		if err := children[i].wait(childStopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Env != nil {
		c.apiServerMu.Lock() // a restart finishes starting the API server first
		if err := c.Env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop API server and etcd: %w", err))
		}
		c.apiServerMu.Unlock()
	}
	// envtest leaves the processes it could not stop running: make sure nothing survives.
	for _, pid := range processesMentioning([]string{c.Dir}) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		errs = append(errs, fmt.Errorf("stop cluster: killed leftover process %d", pid))
	}
	if c.keepLogs {
		if err := removeAllBut(c.Dir, "logs"); err != nil {
			errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
		}
		c.logf("logs kept in %s", c.logDir())
	} else if err := os.RemoveAll(c.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove cluster directory: %w", err))
	}
	if err := os.Remove(c.stateFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove state file: %w", err))
	}
	c.logf("cluster stopped in %s", time.Since(start).Round(time.Millisecond))
	return errors.Join(errs...)
}

// WriteKubeconfig writes an admin kubeconfig for the cluster to path (mode 0600), creating
// its directory if needed.
func (c *Cluster) WriteKubeconfig(path string) error {
	if c.Env == nil || len(c.Env.KubeConfig) == 0 {
		return errors.New("write kubeconfig: the cluster has no API server")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, c.Env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// Kubectl returns a command running the kubectl of BinaryDir against the cluster as admin.
func (c *Cluster) Kubectl(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(c.BinaryDir, "kubectl"),
		append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
}

// Clientset returns a typed client for the cluster, as admin.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("create clientset: %w", err)
	}
	return cs, nil
}

// Err reports a component (kwok, kube-scheduler, kube-controller-manager, etcd,
// kube-apiserver) that has exited although the cluster was not stopped, or a failed
// RestartAPIServer; nil while all of them run (the API server may be down for a restart),
// and after Stop.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if c.apiServerErr != nil {
		return fmt.Errorf("kube-apiserver did not restart: %w", c.apiServerErr)
	}
	watched := []envtestProcess{c.etcd}
	if !c.apiServerDown {
		watched = append(watched, c.apiServer)
	}
	for _, p := range watched {
		if p.known() && !p.alive() {
			log := c.LogPath(p.name)
			return fmt.Errorf("%s (pid %d) exited unexpectedly; end of %s:\n%s", p.name, p.pid, log, tail(log, 20))
		}
	}
	for _, ch := range c.children {
		if done, _ := ch.exited(); done {
			return ch.failure()
		}
	}
	return nil
}
