// Command cert-manager-controllers runs cert-manager's own controllers against a cluster: the
// ones that issue, approve, sign and renew Certificates from SelfSigned and CA Issuers, and the
// CA injector for webhook configurations and CRDs. sandgate's install test runs it against its
// local control plane to prove config/default the way a cluster with cert-manager runs it.
//
// cert-manager publishes its binaries' modules nowhere a Go module proxy serves them; its main
// module (github.com/cert-manager/cert-manager) is served, and its exported packages hold the
// real controllers. This program wires them as cert-manager's controller and cainjector
// binaries do, limited to what the install needs: no ACME, Vault or Venafi issuers, no
// ingress/gateway shims, no webhook (the API server's schema validation of the CRDs is enough
// for objects written by hand), no metrics or health servers (it listens on nothing), no
// leader election. It stops on SIGINT/SIGTERM.
//
// It lives in a module of its own so that sandgate's module does not depend on cert-manager's
// controller code; hack/install-cert-manager.sh builds it and caches it by version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each of these registers its controller with controllerpkg (see controllers below).
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The issuers controller sets up Issuers through the issuer types registered here.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the cert-manager controllers this program runs: Issuer readiness; approval
// and signing of CertificateRequests by SelfSigned and CA Issuers; and the Certificate
// lifecycle (trigger → key → request → issue → readiness, old requests pruned).
var controllers = []string{
	issuers.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// workers per controller, as cert-manager's controller binary runs them.
const workers = 5

// wiring identifies this program's source; install-cert-manager.sh sets it to a hash of the
// module's files, so a changed program is rebuilt even at the same cert-manager version.
var wiring = "dev"

func main() {
	var (
		clusterResource string
		showVersion     bool
	)
	// controller-runtime registers --kubeconfig on the default flag set; it is required here.
	flag.StringVar(&clusterResource, "cluster-resource-namespace", "kube-system", "Namespace of the Secrets of ClusterIssuers.")
	flag.BoolVar(&showVersion, "version", false, "Print the cert-manager version and exit.")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()

	if showVersion {
		fmt.Printf("cert-manager %s (sandgate wiring %s)\n", certManagerVersion(), wiring)
		return
	}
	kubeconfig := ""
	if f := flag.Lookup("kubeconfig"); f != nil {
		kubeconfig = f.Value.String()
	}
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		os.Exit(2)
	}
	log := klog.Background().WithName("cert-manager")
	logf.Log = log
	ctrl.SetLogger(log)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	ctx = logf.NewContext(ctx, log)
	if err := run(ctx, kubeconfig, clusterResource); err != nil {
		log.Error(err, "stopped")
		os.Exit(1)
	}
}

// certManagerVersion is the version of the cert-manager module this binary was built with.
func certManagerVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/cert-manager/cert-manager" {
				return dep.Version
			}
		}
	}
	return "(unknown)"
}

// run runs the controllers and the CA injector until ctx is done; the first of them to fail
// stops the others.
func run(ctx context.Context, kubeconfig, clusterResource string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	loops, err := buildControllers(ctx, kubeconfig, clusterResource)
	if err != nil {
		return err
	}
	injector, err := buildInjector(ctx, kubeconfig)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	for name, loop := range loops {
		wg.Go(func() {
			if err := loop.Run(workers, ctx); err != nil {
				cancel(fmt.Errorf("controller %s: %w", name, err))
			}
		})
	}
	wg.Go(func() {
		if err := injector.Start(ctx); err != nil {
			cancel(fmt.Errorf("CA injector: %w", err))
		}
	})
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// buildControllers constructs the controllers (which registers their informers) and starts
// the shared informers, as cert-manager's controller binary does before running them.
func buildControllers(ctx context.Context, kubeconfig, clusterResource string) (map[string]controllerpkg.Interface, error) {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResource},
		CertificateOptions: controllerpkg.CertificateOptions{
			// cert-manager's defaults.
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller context: %w", err)
	}
	known := controllerpkg.Known()
	loops := map[string]controllerpkg.Interface{}
	for _, name := range controllers {
		construct, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("controller %s is not registered (registered: %v)", name, names(known))
		}
		loop, err := construct(factory)
		if err != nil {
			return nil, fmt.Errorf("constructing controller %s: %w", name, err)
		}
		loops[name] = loop
	}
	shared, err := factory.Build()
	if err != nil {
		return nil, fmt.Errorf("building the controller context: %w", err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	return loops, nil
}

// names lists the keys of known, sorted.
func names(known map[string]controllerpkg.Constructor) []string {
	out := make([]string, 0, len(known))
	for name := range known {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// buildInjector returns a controller-runtime manager running cert-manager's CA injector for
// mutating and validating webhook configurations and for CRDs (their conversion webhook),
// reading CAs from Secrets and Certificates (cert-manager.io/inject-ca-from-secret and
// cert-manager.io/inject-ca-from).
func buildInjector(ctx context.Context, kubeconfig string) (ctrl.Manager, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "cert-manager-cainjector"
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// The injector watches Secrets' metadata only and reads the one it needs directly, as
		// cert-manager's cainjector does.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the CA injector manager: %w", err)
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return nil, fmt.Errorf("registering the CA injectors: %w", err)
	}
	return mgr, nil
}
