// Package harness gives the load generator and the demo a cluster with the operator running:
// by default a local control plane from test/env/controlplane (etcd, kube-apiserver, scheduler,
// garbage collector, kwok nodes) with the webhook configurations of config/webhook installed,
// and the operator as a child process serving them with a throwaway certificate whose CA the
// harness installs before the operator starts (installCABeforeOperator). The operator runs as
// a separate process, not in the harness, so that its CPU seconds and peak memory can be read
// from /proc and so that any other implementation of the API can be run in its place
// (Options.OperatorCommand).
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/proc"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// noOperator as Options.OperatorCommand runs no operator (one already runs elsewhere).
const noOperator = "none"

// Options configure Start.
type Options struct {
	// Kubeconfig selects an existing cluster; "" starts a local one.
	Kubeconfig string
	// Nodes, Profile and PodStartup size the local cluster (see controlplane.Options).
	Nodes      int
	Profile    controlplane.Profile
	PodStartup controlplane.PodStartup
	// FeatureGates is the local cluster's kube-apiserver --feature-gates ("": its defaults).
	FeatureGates string
	// OperatorCommand runs the operator: a shell command line with the placeholders
	// {{kubeconfig}}, {{webhook-host}}, {{webhook-port}}, {{webhook-cert-dir}},
	// {{metrics-port}} and {{probe-port}}. "" builds ./cmd/sandgate and runs it (local cluster
	// only); noOperator runs none.
	OperatorCommand string
	// NoWebhooks leaves config/webhook uninstalled in a local cluster: for an operator that
	// serves no webhooks, such as another implementation of the API.
	NoWebhooks bool
	// V1beta1Only serves only the storage version of the sandgate CRDs in a local cluster, as an
	// install with config/v1beta1-only does: no v1alpha1, so no conversion webhook call for
	// every write (the API server keeps a watch cache per served version and converts each
	// event into it).
	V1beta1Only bool
	// FloorAdmission keeps the webhook configurations in a floor run: DetachOperator stops the
	// operator and the harness answers every admission call at once (see DetachOperator).
	FloorAdmission bool
	// FloorClaimAdmissionRate, when positive, makes the floor's stand-in admit claim creates
	// at this rate a second and refuse the rest with 429 (answerAtOnce): with FloorAdmission,
	// the contract floor under overload, shed by an oracle that knows the sustainable rate.
	FloorClaimAdmissionRate float64
	// StandInExecutable, when set, answers a floor run's webhooks (the conversion webhook,
	// and with FloorAdmission the admission webhooks) from a process of their own: this
	// executable run with StandInArg, which must call ServeStandIn (StandInExecutable() for
	// a command that does). "" answers them from the harness's own process, which the load
	// generator's goroutines share.
	StandInExecutable string
	// OperatorPprof serves the CPU profile on the metrics endpoint of the operator the harness
	// builds (--enable-pprof), for ProfileWebhookServer.
	OperatorPprof bool
	// Log receives progress lines.
	Log io.Writer
}

// Env is a cluster with the operator running.
type Env struct {
	// Config is an admin client configuration.
	Config *rest.Config
	// Cluster is the local cluster; nil for an existing one.
	Cluster *controlplane.Cluster
	// Webhooks reports whether the harness installed webhook configurations.
	Webhooks bool
	// Operator is the operator process; nil when none runs.
	Operator *Operator
	// dir holds the operator's kubeconfig and log (inside the cluster's directory for a
	// local cluster); Stop removes it unless it is the cluster's.
	dir string
	log io.Writer

	// webhook is where the operator serves its webhooks; v1beta1Only: the CRDs serve no
	// v1alpha1, so nothing calls the conversion webhook.
	webhook        endpoints
	v1beta1Only    bool
	floorAdmission bool
	floorClaimRate float64
	// stopWebhooks stops the webhook server the harness runs for a floor run.
	stopWebhooks context.CancelFunc
	// standInExe is Options.StandInExecutable; standIn its process once a floor run started
	// it.
	standInExe string
	standIn    *Operator

	// operatorStarted is when the harness started the operator.
	operatorStarted time.Time

	// apiserverPID caches kube-apiserver's process id for APIServerCPU.
	mu           sync.Mutex
	apiserverPID int
}

func (e *Env) logf(format string, args ...any) {
	if e.log != nil {
		_, _ = fmt.Fprintf(e.log, format+"\n", args...) // progress is best effort
	}
}

// Start brings up the cluster and the operator. ctx bounds the start; Stop ends everything.
func Start(ctx context.Context, opts Options) (_ *Env, retErr error) {
	e := &Env{log: opts.Log}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.Stop())
		}
	}()
	var ep endpoints
	if opts.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", opts.Kubeconfig, err)
		}
		dir, err := os.MkdirTemp("", "sandgate-bench-")
		if err != nil {
			return nil, fmt.Errorf("creating a temporary directory: %w", err)
		}
		e.Config, e.dir = cfg, dir
		ep.kubeconfig = opts.Kubeconfig
		if opts.OperatorCommand == "" {
			opts.OperatorCommand = noOperator
		}
	} else {
		if err := e.startLocal(ctx, opts); err != nil {
			return nil, err
		}
		kubeconfig, err := e.operatorKubeconfig()
		if err != nil {
			return nil, err
		}
		ep.kubeconfig = kubeconfig
		wh := e.Cluster.Env.WebhookInstallOptions
		ep.webhookHost, ep.webhookPort, ep.webhookCertDir = wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
		ep.webhooksInstalled = e.Webhooks
	}
	if opts.OperatorCommand == noOperator {
		return e, nil
	}
	selfSigned := false
	if opts.OperatorCommand == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			return nil, err
		}
		build, err := buildOperator(ctx, root, e.logf)
		if err != nil {
			return nil, err
		}
		// A self-signed certificate, as a local run without cert-manager has, made by the
		// harness rather than by the operator's --self-signed-certs: its CA must be in the CRDs
		// before the operator starts (see installCABeforeOperator).
		selfSigned = e.Webhooks
		opts.OperatorCommand = build.command(false)
		if opts.OperatorPprof {
			opts.OperatorCommand += " --enable-pprof"
		}
		if selfSigned {
			ep.webhookCertDir = filepath.Join(e.dir, "webhook-certs")
		}
	}
	if ep.webhookHost == "" {
		ep.webhookHost = "127.0.0.1"
	}
	if ep.webhookPort == 0 {
		port, err := controlplane.ReservePort()
		if err != nil {
			return nil, err
		}
		ep.webhookPort = port
	}
	ports, err := controlplane.ReservePorts(2)
	if err != nil {
		return nil, err
	}
	ep.metricsPort, ep.probePort = ports[0], ports[1]
	e.webhook, e.v1beta1Only, e.floorAdmission, e.standInExe = ep, opts.V1beta1Only, opts.FloorAdmission, opts.StandInExecutable
	e.floorClaimRate = opts.FloorClaimAdmissionRate
	if selfSigned {
		if err := installCABeforeOperator(ctx, e.Config, ep, e.logf); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	e.operatorStarted = start
	op, err := startOperator(ctx, opts.OperatorCommand, ep, filepath.Join(e.dir, "operator.log"))
	if err != nil {
		return nil, err
	}
	e.Operator = op
	if e.Webhooks {
		if err := waitForAdmission(ctx, e.Config); err != nil {
			return nil, fmt.Errorf("%w; operator log %s ends:\n%s", err, op.LogPath, Tail(op.LogPath, 15))
		}
	}
	how := "envtest's certificate"
	if selfSigned {
		how = "a self-signed certificate the harness made"
	}
	if !e.Webhooks {
		how = "no webhooks"
	}
	e.logf("operator running (pid %d, %s) after %s, log %s", op.PID, how, time.Since(start).Round(100*time.Millisecond), op.LogPath)
	return e, nil
}

// selfSignedValidity is how long the harness's webhook certificate lasts: a demo may run for
// days, a bench run for minutes. The operator's --self-signed-certs uses the same.
const selfSignedValidity = 7 * 24 * time.Hour

// installCABeforeOperator writes a self-signed serving certificate for the operator into
// ep.webhookCertDir, puts its CA into the webhook configurations and the CRDs' conversion
// webhooks, and returns once the API server serves the CRDs from storage built with the new
// spec. Any change of a CRD's spec makes the API server replace the CRD's storage: a second
// later it ends every watch of the old storage ("Terminating all watchers from cacher"), and
// every informer re-lists after a backoff. Done after the operator started, that cut the
// operator's informers just as the first claim came (issue 24: the demo's first claim Ready
// after 1 s, the next ones after 20 ms). Done before, nothing of the operator watches yet.
func installCABeforeOperator(ctx context.Context, cfg *rest.Config, ep endpoints, logf func(string, ...any)) error {
	start := time.Now()
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(ep.webhookHost); ip != nil {
		ips = append(ips, ip)
	} else {
		dnsNames = append(dnsNames, ep.webhookHost)
	}
	bundle, err := certs.SelfSigned(dnsNames, ips, selfSignedValidity)
	if err != nil {
		return fmt.Errorf("making the webhook certificate: %w", err)
	}
	if err := bundle.Write(ep.webhookCertDir); err != nil {
		return fmt.Errorf("writing the webhook certificate: %w", err)
	}
	if err := InstallWebhookCA(ctx, cfg, filepath.Join(ep.webhookCertDir, certs.CAFile)); err != nil {
		return err
	}
	logf("webhook CA installed in the webhook configurations and the CRDs, their storage rebuilt, after %s",
		time.Since(start).Round(time.Millisecond))
	return nil
}

// InstallWebhookCA puts the CA of caFile (PEM) into every webhook configuration and the CRDs'
// conversion webhooks, and returns once the API server serves the CRDs from storage built with
// the new spec (see installCABeforeOperator for why that wait matters).
func InstallWebhookCA(ctx context.Context, cfg *rest.Config, caFile string) error {
	// Watches opened before the update are served by the old storage: the API server ending
	// them is the sign that it was torn down, and that whatever watches next sees the new one.
	old, err := watchConvertedCRDs(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, w := range old {
			w.watch.Stop()
		}
	}()
	if err := installCABundle(ctx, cfg, caFile); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, crdStorageWait)
	defer cancel()
	for _, w := range old {
		if err := drainUntilClosed(waitCtx, w.watch); err != nil {
			return fmt.Errorf("waiting for the API server to replace the storage of %s after its caBundle changed: %w", w.resource, err)
		}
	}
	return nil
}

// crdStorageWait bounds the wait for the API server to tear down a CRD's old storage: it
// waits a second, then for short requests to drain, at most twice its request timeout (1 min
// by default).
const crdStorageWait = 3 * time.Minute

// crdWatch is a watch of a CRD's resource.
type crdWatch struct {
	resource schema.GroupVersionResource
	watch    watch.Interface
}

// watchConvertedCRDs opens a watch of the storage version of every CRD with a conversion
// webhook: the CRDs installCABundle updates. The API server tears a CRD's storage down with
// all its versions at once, so one version is enough.
func watchConvertedCRDs(ctx context.Context, cfg *rest.Config) ([]crdWatch, error) {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the apiextensions client: %w", err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the metadata client: %w", err)
	}
	crds, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CRDs: %w", err)
	}
	var out []crdWatch
	for _, crd := range crds.Items {
		if conv := crd.Spec.Conversion; conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Storage {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			w, err := mc.Resource(gvr).Watch(ctx, metav1.ListOptions{})
			if err != nil {
				for _, o := range out {
					o.watch.Stop()
				}
				return nil, fmt.Errorf("watching %s: %w", gvr, err)
			}
			out = append(out, crdWatch{resource: gvr, watch: w})
		}
	}
	return out, nil
}

// drainUntilClosed reads w until the API server ends it.
func drainUntilClosed(ctx context.Context, w watch.Interface) error {
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startLocal starts a local cluster, with the webhook configurations of config/webhook when
// that directory has any.
func (e *Env) startLocal(ctx context.Context, opts Options) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	fopts := controlplane.Options{
		Nodes:           opts.Nodes,
		Profile:         opts.Profile,
		PodStartup:      opts.PodStartup,
		Log:             opts.Log,
		NoSignalHandler: true, // the commands handle signals and call Stop
	}
	if opts.FeatureGates != "" {
		fopts.APIServerFlags = map[string]string{"feature-gates": opts.FeatureGates}
		e.logf("kube-apiserver --feature-gates=%s", opts.FeatureGates)
	}
	webhookDir := filepath.Join(root, "config", "webhook")
	switch {
	case opts.NoWebhooks:
		e.logf("webhooks off: the webhook configurations of %s are not installed", webhookDir)
	case hasWebhookConfigurations(webhookDir):
		fopts.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:            []string{webhookDir},
			LocalServingHost: "127.0.0.1",
		}
		e.Webhooks = true
	default:
		e.logf("warning: no webhook configurations in %s: running without admission webhooks", webhookDir)
	}
	if opts.V1beta1Only {
		dir, err := storageVersionOnlyCRDs(filepath.Join(root, "config", "crd", "bases"))
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(dir) }() // installed by the time Start returns
		fopts.CRDDirectoryPaths = []string{dir}
		e.logf("v1alpha1 not served: the CRDs serve their storage version v1beta1 only")
	}
	cluster, err := controlplane.Start(ctx, fopts)
	if err != nil {
		return fmt.Errorf("starting the local cluster: %w", err)
	}
	e.Cluster, e.Config, e.dir = cluster, cluster.Config, cluster.Dir
	return nil
}

// storageVersionOnlyCRDs writes the CRDs of dir into a new temporary directory with every
// version but the storage version no longer served, and returns that directory.
func storageVersionOnlyCRDs(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading the CRDs: %w", err)
	}
	out, err := os.MkdirTemp("", "sandgate-crds-")
	if err != nil {
		return "", fmt.Errorf("creating a directory for the CRDs: %w", err)
	}
	for _, entry := range entries {
		if filepath.Ext(entry.Name()) != ".yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		if err != nil {
			return "", errors.Join(fmt.Errorf("reading CRD %s: %w", entry.Name(), err), os.RemoveAll(out))
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return "", errors.Join(fmt.Errorf("decoding CRD %s: %w", entry.Name(), err), os.RemoveAll(out))
		}
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Served = crd.Spec.Versions[i].Storage
		}
		if data, err = yaml.Marshal(&crd); err == nil {
			err = os.WriteFile(filepath.Join(out, entry.Name()), data, 0o600)
		}
		if err != nil {
			return "", errors.Join(fmt.Errorf("writing CRD %s: %w", entry.Name(), err), os.RemoveAll(out))
		}
	}
	return out, nil
}

// hasWebhookConfigurations reports whether dir has a manifest of a webhook configuration.
func hasWebhookConfigurations(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, entry := range entries {
		if ext := filepath.Ext(entry.Name()); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, entry.Name()))
		if err == nil && strings.Contains(string(data), "WebhookConfiguration") {
			return true
		}
	}
	return false
}

// operatorKubeconfig provisions the operator's identity in the local cluster, the service
// account the binding guard admits by default (with system:masters, as RBAC is not what is
// measured), and writes its kubeconfig.
func (e *Env) operatorKubeconfig() (string, error) {
	user, err := e.Cluster.Env.AddUser(envtest.User{Name: webhooks.DefaultOperatorUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("provisioning the operator's user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("building the operator's kubeconfig: %w", err)
	}
	path := filepath.Join(e.dir, "operator.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the operator's kubeconfig: %w", err)
	}
	return path, nil
}

// Err reports a process of the environment that died.
func (e *Env) Err() error {
	if e.Operator != nil {
		if err := e.Operator.Err(); err != nil {
			return err
		}
	}
	if e.Cluster != nil {
		return e.Cluster.Err()
	}
	return nil
}

// ComponentUsage returns the CPU seconds and peak memory of the local cluster's processes
// by binary name (kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok);
// nil for an existing cluster.
func (e *Env) ComponentUsage() map[string]proc.Usage {
	if e.Cluster == nil {
		return nil
	}
	out := map[string]proc.Usage{}
	for name, pids := range e.componentPIDs() {
		for _, pid := range pids {
			u, err := proc.Read("/proc", pid)
			if err != nil {
				continue
			}
			prev := out[name]
			out[name] = proc.Usage{CPUSeconds: prev.CPUSeconds + u.CPUSeconds, PeakRSSBytes: max(prev.PeakRSSBytes, u.PeakRSSBytes)}
		}
	}
	return out
}

// componentPIDs finds the local cluster's processes by binary name.
func (e *Env) componentPIDs() map[string][]int {
	out := map[string][]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), e.Cluster.Dir) {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Dir(argv0) != e.Cluster.BinaryDir {
			continue // the watchdog, a shell
		}
		name := filepath.Base(argv0)
		out[name] = append(out[name], pid)
	}
	return out
}

// APIServerCPU returns kube-apiserver's CPU seconds so far from its /proc stat alone (the
// process is looked up once): cheap enough to read at every claim's Ready event.
func (e *Env) APIServerCPU() (float64, error) {
	if e.Cluster == nil {
		return 0, errors.New("kube-apiserver runs elsewhere: its CPU is not readable here")
	}
	e.mu.Lock()
	pid := e.apiserverPID
	if pid == 0 {
		if pids := e.componentPIDs()["kube-apiserver"]; len(pids) == 1 {
			pid = pids[0]
			e.apiserverPID = pid
		}
	}
	e.mu.Unlock()
	if pid == 0 {
		return 0, errors.New("kube-apiserver's process not found")
	}
	return proc.CPUSeconds("/proc", pid)
}

// Stop ends the operator, then the cluster, and removes the temporary directories.
func (e *Env) Stop() error {
	var errs []error
	if e.stopWebhooks != nil {
		e.stopWebhooks()
	}
	if e.Operator != nil {
		if err := e.Operator.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Cluster != nil {
		if err := e.Cluster.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the cluster: %w", err))
		}
	} else if e.dir != "" {
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", e.dir, err))
		}
	}
	return errors.Join(errs...)
}
