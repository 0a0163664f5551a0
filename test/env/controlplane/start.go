package controlplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandgate-dev/sandgate/api"
)

// crdInstallWait bounds the wait for the installed CRDs to be served.
const crdInstallWait = time.Minute

// startAPIServer starts etcd and kube-apiserver through envtest and installs the CRDs and
// webhook configurations.
func (c *Cluster) startAPIServer(opts Options) error {
	etcdLog, err := os.Create(filepath.Join(c.logDir(), "etcd.log"))
	if err != nil {
		return fmt.Errorf("create etcd log: %w", err)
	}
	defer etcdLog.Close()
	apiLog, err := os.Create(filepath.Join(c.logDir(), "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("create kube-apiserver log: %w", err)
	}
	defer apiLog.Close()

	env := &envtest.Environment{
		BinaryAssetsDirectory: opts.BinaryDir,
		CRDDirectoryPaths:     opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing: true,
		// envtest waits 10 s for the CRDs to be served; the API server takes longer on a
		// machine busy with other suites (CI failed there at 10 s).
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: crdInstallWait},
		WebhookInstallOptions: opts.WebhookInstallOptions,
		UseExistingCluster:    ptr.To(false),
		// The sandgate kinds convert between their versions: envtest points their CRDs'
		// conversion webhook at the local webhook address (https://<host>:<port>/convert, the
		// self-signed CA of WebhookInstallOptions), where a manager with webhooks.Setup serves
		// it. Without one, v1alpha1 requests fail; v1beta1, the storage version, never converts.
		Scheme: api.NewScheme(),
		// The directories sit in c.Dir: the API server's and etcd's command lines name them,
		// which is how leftovers of a killed process are found (see reapStale).
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(opts.BinaryDir, "etcd"),
				DataDir: filepath.Join(c.Dir, "etcd"),
				Out:     etcdLog,
				Err:     etcdLog,
			},
			APIServer: &envtest.APIServer{
				Path:    filepath.Join(opts.BinaryDir, "kube-apiserver"),
				CertDir: filepath.Join(c.Dir, "apiserver"),
				Out:     apiLog,
				Err:     apiLog,
			},
			KubectlPath: filepath.Join(opts.BinaryDir, "kubectl"),
		},
	}
	for _, d := range []string{env.ControlPlane.Etcd.DataDir, env.ControlPlane.APIServer.CertDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	// No kubelet or node lifecycle controller runs: without this the Nodes would keep the
	// not-ready taint the TaintNodesByCondition plugin gives new Nodes. ServiceAccount stays
	// disabled as envtest has it (no token controller runs either).
	env.ControlPlane.GetAPIServer().Configure().Set("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
	// A graceful stop (RestartAPIServer, Stop) would otherwise wait for the open watches of
	// the components and operators, up to the 60 s request timeout: end them at once (their
	// clients re-watch), answer requests that come in while in-flight ones drain with 429 and
	// Retry-After as a real API server behind a load balancer does, and give the HTTP server 2 s.
	env.ControlPlane.GetAPIServer().Configure().
		Set("shutdown-watch-termination-grace-period", "5s").
		Set("shutdown-send-retry-after", "true")
	if opts.AuditPolicy != "" {
		if err := c.configureAudit(env.ControlPlane.GetAPIServer().Configure(), opts.AuditPolicy); err != nil {
			return err
		}
	}
	for name, value := range opts.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	c.Env = env

	start := time.Now()
	c.logf("starting etcd and kube-apiserver (binaries in %s, cluster directory %s)...", opts.BinaryDir, c.Dir)
	cfg, err := env.Start()
	// envtest creates the webhook certificate directory in $TMPDIR: record it for cleanup.
	if stateErr := c.saveState(); stateErr != nil && err == nil {
		err = stateErr
	}
	if err != nil {
		return fmt.Errorf("start etcd and kube-apiserver: %w; kube-apiserver log %s ends:\n%s",
			err, apiLog.Name(), tail(apiLog.Name(), 15))
	}
	c.Config = cfg
	c.logf("kube-apiserver serving at %s after %s", cfg.Host, time.Since(start).Round(time.Millisecond))

	c.KubeconfigPath = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.WriteKubeconfig(c.KubeconfigPath); err != nil {
		return err
	}
	etcd, etcdErr := findProcess("etcd", env.ControlPlane.Etcd.DataDir)
	apiServer, apiErr := findProcess("kube-apiserver", env.ControlPlane.APIServer.CertDir)
	c.mu.Lock()
	c.etcd, c.apiServer = etcd, apiServer
	c.mu.Unlock()
	if err := errors.Join(etcdErr, apiErr); err != nil {
		// Without the pids Err cannot watch them and the watchdog cannot kill them; Stop
		// still finds them by their command lines, and so does the next Start after a crash.
		c.logf("not watching etcd and kube-apiserver: %v", err)
	}
	c.restartWatchdog()
	return nil
}

// userKubeconfig provisions a system:masters user for a component and writes its kubeconfig
// into the cluster directory.
func (c *Cluster) userKubeconfig(component string) (string, error) {
	user, err := c.Env.AddUser(envtest.User{Name: "sandgate-controlplane:" + component, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("provision user for %s: %w", component, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("build kubeconfig for %s: %w", component, err)
	}
	path := filepath.Join(c.Dir, component+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write kubeconfig for %s: %w", component, err)
	}
	return path, nil
}

// startChild starts a component binary from BinaryDir, logging into logs/<name>.log, and
// records it for Stop and for the state file.
func (c *Cluster) startChild(name string, args ...string) (*child, error) {
	ch, err := startChild(name, filepath.Join(c.BinaryDir, name), args, filepath.Join(c.logDir(), name+".log"))
	if err != nil {
		return nil, err
	}
	return ch, c.addChild(ch)
}

// addChild records a started child for Stop and for the state file; it kills the child if
// the cluster was stopped meanwhile.
func (c *Cluster) addChild(ch *child) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		ch.signal(syscall.SIGKILL)
		_ = ch.wait(childStopTimeout)
		return fmt.Errorf("start %s: the cluster was stopped", ch.name)
	}
	c.children = append(c.children, ch)
	c.mu.Unlock()
	return c.saveState()
}

// StartProcess runs binary with args as a component of the cluster, like kube-scheduler or
// kwok: its output goes to logs/<name>.log in Dir, Err reports it if it exits, Stop ends it
// (before the API server), and it dies with this process. name must be unique in the cluster.
func (c *Cluster) StartProcess(name, binary string, args ...string) error {
	c.mu.Lock()
	for _, ch := range c.children {
		if ch.name == name {
			c.mu.Unlock()
			return fmt.Errorf("start %s: the cluster already runs a process of that name", name)
		}
	}
	c.mu.Unlock()
	ch, err := startChild(name, binary, args, filepath.Join(c.logDir(), name+".log"))
	if err != nil {
		return err
	}
	return c.addChild(ch)
}

// startComponents starts kube-controller-manager, kube-scheduler and kwok as opts ask and
// waits for the simulated Nodes.
func (c *Cluster) startComponents(ctx context.Context, opts Options) error {
	if !opts.NoControllerManager {
		kubeconfig, err := c.userKubeconfig("kube-controller-manager")
		if err != nil {
			return err
		}
		c.logf("starting kube-controller-manager (%s)...", strings.Join(kubeControllers, ", "))
		if _, err := c.startChild("kube-controller-manager",
			"--kubeconfig="+kubeconfig,
			"--controllers="+strings.Join(kubeControllers, ","),
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		); err != nil {
			return err
		}
		if err := c.startStorage(ctx, opts.PersistentVolumes); err != nil {
			return err
		}
	}
	if !opts.NoScheduler {
		kubeconfig, err := c.userKubeconfig("kube-scheduler")
		if err != nil {
			return err
		}
		c.logf("starting kube-scheduler...")
		if _, err := c.startChild("kube-scheduler",
			"--kubeconfig="+kubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		); err != nil {
			return err
		}
	}
	if !opts.NoKwok {
		if err := c.startKwok(ctx, opts); err != nil {
			return err
		}
	}
	// A component that could not start (bad flag, unreachable API server) has exited by now
	// more often than not.
	return c.Err()
}

// startStorage creates the default StorageClass and n PersistentVolumes and starts recycling
// them.
func (c *Cluster) startStorage(ctx context.Context, n int) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	c.logf("creating StorageClass %s (default) with %d PersistentVolumes of %s...", DefaultStorageClass, n, PersistentVolumeCapacity)
	if err := c.createStorage(ctx, cs, n); err != nil {
		return err
	}
	stop, err := recycleVolumes(ctx, cs, c.logf)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.stopRecycler = stop
	c.mu.Unlock()
	return nil
}

// startKwok creates the simulated Nodes, starts kwok with the profile's stages and waits for
// the Nodes to be Ready.
func (c *Cluster) startKwok(ctx context.Context, opts Options) error {
	start := time.Now()
	stages, err := kwokStages(opts.Profile, opts.PodStartup)
	if err != nil {
		return err
	}
	stagesPath := filepath.Join(c.Dir, "kwok-stages-"+string(opts.Profile)+".yaml")
	if err := os.WriteFile(stagesPath, stages, 0o600); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	kubeconfig, err := c.userKubeconfig("kwok")
	if err != nil {
		return err
	}
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	c.logf("creating %d nodes and starting kwok (profile %s)...", len(c.NodeNames), DescribeProfile(opts.Profile, opts.PodStartup))
	if err := createNodes(ctx, cs, c.NodeNames); err != nil {
		return err
	}
	kwok, err := c.startChild("kwok",
		"--kubeconfig="+kubeconfig,
		"--config="+stagesPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+FakeNodeAnnotation+"=fake",
		"--cidr="+cmp.Or(opts.PodCIDR, DefaultPodCIDR),
		"--node-ip="+kwokNodeIP,
		"--node-lease-duration-seconds="+strconv.Itoa(40),
		"--server-address=127.0.0.1:0",
	)
	if err != nil {
		return err
	}
	if err := waitForNodesReady(ctx, cs, c.NodeNames, kwok); err != nil {
		return err
	}
	c.logf("%d nodes Ready after %s", len(c.NodeNames), time.Since(start).Round(time.Millisecond))
	return nil
}
