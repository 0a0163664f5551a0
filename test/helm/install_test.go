//go:build integration

package helmchart

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

const (
	timeout      = 60 * time.Second
	interval     = 100 * time.Millisecond
	startTimeout = 2 * time.Minute
	// releaseNamespace holds Helm's release record; the chart creates sandgate-system itself.
	releaseNamespace = "default"
)

// TestChartInstallsUpgradesAndUninstalls installs the chart with Helm's install action, as
// `helm install sandgate config/helm/sandgate` does, onto a local control plane with
// cert-manager's CRDs and controllers (hack/cert-manager, built by `make tools`), and
// checks that every object of the release exists, that cert-manager issues the serving
// certificate the chart asks for and injects its CA into every webhook configuration and CRD,
// that an upgrade turning v1alpha1 off stops serving it and keeps the injected CA, that
// uninstalling removes everything but the CRDs, and that the public chart's values.yaml then
// installs it again (installPublicValues).
//
// Staying on loopback. The chart installs admission webhook configurations and CRD conversion
// webhooks that call the webhook Service, and kube-apiserver calls a Service by dialling its
// ClusterIP: an address that leaves this machine. The control plane therefore runs with an
// egress selector that sends the API server's "cluster" traffic — every webhook call,
// admission and conversion — over HTTP CONNECT to a Unix socket this test owns, whose proxy
// refuses every tunnel and records what was asked for: whatever the installed configurations
// say, nothing is dialled. No sandgate manager runs, so the webhooks fail closed: the test
// makes one request they intercept (creating a SandboxTemplate) to prove the installed
// configuration is live and calls the chart's Service — the refused target is that Service's
// <ClusterIP>:443 — and no other; nothing else it does (Helm's own writes, cert-manager's)
// concerns a kind the webhooks match. The uninstall removes the webhook configurations before
// the control plane stops.
//
//	make tools && cd test/helm && go test -tags integration -run Install -v .
func TestChartInstallsUpgradesAndUninstalls(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(timeout)
	g.SetDefaultEventuallyPollingInterval(interval)
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmDir, err := controlplane.CertManagerDir(root)
	if err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	proxy := startRefusingProxy(t, tmp)
	egressConfig := filepath.Join(tmp, "egress-selector.yaml")
	if err := os.WriteFile(egressConfig, []byte(controlplane.EgressSelectorConfig(proxy.socket)), 0o600); err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	cluster, err := controlplane.Start(startCtx, controlplane.Options{
		// Only cert-manager's CRDs: sandgate's come with the chart.
		CRDDirectoryPaths: []string{filepath.Join(cmDir, "crds")},
		APIServerFlags:    map[string]string{"egress-selector-config-file": egressConfig},
		NoKwok:            true, NoScheduler: true, NoControllerManager: true,
		Log: t.Output(),
	})
	cancel()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	if err := cluster.StartProcess("cert-manager", filepath.Join(cmDir, "cert-manager-controllers"),
		"--kubeconfig="+cluster.KubeconfigPath); err != nil {
		t.Fatal(err)
	}
	dyn, mapper := dynamicClient(t, cluster)
	admin, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	helm := Helm{Kubeconfig: cluster.KubeconfigPath, Namespace: releaseNamespace}

	// Install: every object of the release is there, Helm's, and the release is what the
	// render tests compared with config/default.
	rel, err := helm.Install(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	installed, err := Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := RenderChart(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := keysDiff(t, rendered, installed); diff != "" {
		t.Errorf("the release holds other objects than the chart renders (-rendered +installed):\n%s", diff)
	}
	t.Logf("installed %d objects: %s", len(installed), Kinds(installed))
	for _, o := range installed {
		live := get(t, ctx, dyn, mapper, o)
		if live == nil {
			t.Errorf("%s was not created", Key(o))
			continue
		}
		if got := live.GetAnnotations()["meta.helm.sh/release-name"]; got != ReleaseName {
			t.Errorf("%s: release-name annotation %q, want %q", Key(o), got, ReleaseName)
		}
	}

	// cert-manager issues the serving certificate and injects its CA into every webhook and
	// every CRD's conversion webhook.
	ca := expectIssuedAndInjected(t, g, ctx, dyn, mapper, installed)

	// The installed webhooks are live and call the chart's Service, through the proxy, which
	// refuses: the request fails closed and nothing is dialled.
	svc := &corev1.Service{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "sandgate-system", Name: "sandgate-webhook-service"}, svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
	wantTarget := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})).To(Succeed())
	err = admin.Create(ctx, builders.MakeTemplate("web", "tenant").Obj())
	g.Expect(err).To(MatchError(ContainSubstring("failed calling webhook")), "a SandboxTemplate with no manager serving the webhooks")
	seen, refused := proxy.targets()
	g.Expect(refused).To(ContainElement(wantTarget), "the API server calls the chart's webhook Service")
	g.Expect(seen).To(HaveEach(wantTarget), "the API server asks for the webhook Service only")
	t.Logf("the API server called %s (the webhook Service): refused by the proxy, as every target", wantTarget)

	// Upgrade with v1alpha1 off: the CRDs stop serving it and keep the injected CA.
	rel, err = helm.Upgrade(ctx, root, map[string]any{"v1alpha1": map[string]any{"enabled": false}})
	if err != nil {
		t.Fatal(err)
	}
	upgraded, err := Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range ConvertedCRDs(upgraded) {
		live := get(t, ctx, dyn, mapper, crd)
		g.Expect(live).NotTo(BeNil())
		versions, _, _ := unstructured.NestedSlice(live.Object, "spec", "versions")
		for _, v := range versions {
			v := v.(map[string]any)
			if served := v["served"].(bool); served != (v["name"] != "v1alpha1") {
				t.Errorf("%s after the upgrade: version %s served %t", crd.GetName(), v["name"], served)
			}
		}
		bundle, _, _ := unstructured.NestedString(live.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		if bundle != ca {
			t.Errorf("%s after the upgrade: the conversion webhook lost the injected CA", crd.GetName())
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, cfg := range Find(upgraded, kind) {
			for _, wh := range webhooksOf(get(t, ctx, dyn, mapper, cfg)) {
				if bundle, _, _ := unstructured.NestedString(wh, "clientConfig", "caBundle"); bundle != ca {
					t.Errorf("%s after the upgrade: webhook %s lost the injected CA", Key(cfg), wh["name"])
				}
			}
		}
	}

	// Uninstall: everything goes but the CRDs (crds.keep), and the namespace, which only
	// kube-controller-manager (not running here) finishes deleting.
	kept, err := helm.Uninstall()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm uninstall: %s", kept)
	for _, o := range upgraded {
		live := get(t, ctx, dyn, mapper, o)
		switch {
		case o.GetKind() == "CustomResourceDefinition":
			if live == nil {
				t.Errorf("%s was deleted: crds.keep should keep it", Key(o))
			}
		case o.GetKind() == "Namespace":
			if live != nil && live.GetDeletionTimestamp() == nil {
				t.Errorf("%s is not being deleted", Key(o))
			}
		case live != nil:
			t.Errorf("%s is left after uninstall", Key(o))
		}
	}

	// A cluster the public chart ran has its CRDs, not these: the kept ones go before the
	// public values install the chart. (Reinstalled over in another namespace, they kept the
	// old CA in their conversion caBundle here: cert-manager's injector tried them before the
	// new Secret existed and did not come back to them within the test's minute.)
	for _, crd := range Find(upgraded, "CustomResourceDefinition") {
		deleteAndWait(t, g, ctx, dyn, mapper, crd)
	}
	installPublicValues(t, g, ctx, helm, dyn, mapper, root)
}

func deleteAndWait(t *testing.T, g Gomega, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("mapping %s: %v", gvk, err)
	}
	if err := dyn.Resource(m.Resource).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting %s: %v", Key(o), err)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(get(t, ctx, dyn, mapper, o)).To(BeNil())
	}).Should(Succeed(), "%s is deleted", Key(o))
}

// installPublicValues installs the chart again with the public chart's values.yaml as shipped
// (docs/helm.md, "A values file of the public chart"): every object is created in the public chart's namespace and under its Service names, the
// serving certificate is issued for the public webhook Service and its CA injected, and the
// release's notes list the values sandgate does not honour. It uninstalls the release again.
func installPublicValues(t *testing.T, g Gomega, ctx context.Context, helm Helm, dyn dynamic.Interface, mapper meta.RESTMapper, root string) {
	t.Helper()
	rel, err := helm.Install(ctx, root, publicValuesAsShipped(t))
	if err != nil {
		t.Fatalf("installing with the public chart's values: %v", err)
	}
	installed, err := Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range installed {
		live := get(t, ctx, dyn, mapper, o)
		if live == nil {
			t.Errorf("with the public values: %s was not created", Key(o))
			continue
		}
		if got := live.GetAnnotations()["meta.helm.sh/release-name"]; got != ReleaseName {
			t.Errorf("with the public values: %s release-name annotation %q, want %q", Key(o), got, ReleaseName)
		}
	}
	if svc := only(t, installed, "Service", "agent-sandbox-webhook-service"); svc.GetNamespace() != "agent-sandbox-system" {
		t.Errorf("the webhook Service is in %s, want the public values' agent-sandbox-system", svc.GetNamespace())
	}
	expectIssuedAndInjected(t, g, ctx, dyn, mapper, installed)
	expectWarnings(t, rel.Info.Notes, []string{"containerSecurityContext", "image.repository", "podSecurityContext"})
	if _, err := helm.Uninstall(); err != nil {
		t.Fatal(err)
	}
}

// expectIssuedAndInjected waits for the serving certificate's Secret and for its CA in every
// webhook of the installed webhook configurations and every installed CRD's conversion
// webhook; it returns the CA, base64-encoded as the objects hold it.
func expectIssuedAndInjected(t *testing.T, g Gomega, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, installed []*unstructured.Unstructured) string {
	t.Helper()
	var cert *unstructured.Unstructured
	for _, c := range Find(installed, "Certificate") {
		if isCA, _, _ := unstructured.NestedBool(c.Object, "spec", "isCA"); !isCA {
			cert = c
		}
	}
	g.Expect(cert).NotTo(BeNil(), "the chart installs a serving Certificate")
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetNamespace(cert.GetNamespace())
	secret.SetName(secretName)
	var ca string
	g.Eventually(func(g Gomega) {
		live := get(t, ctx, dyn, mapper, secret)
		g.Expect(live).NotTo(BeNil(), "Secret %s/%s", secret.GetNamespace(), secretName)
		ca, _, _ = unstructured.NestedString(live.Object, "data", "ca.crt")
		g.Expect(ca).NotTo(BeEmpty())
	}).Should(Succeed(), "cert-manager issues %s", Key(cert))
	g.Eventually(func(g Gomega) {
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			for _, cfg := range Find(installed, kind) {
				live := get(t, ctx, dyn, mapper, cfg)
				g.Expect(live).NotTo(BeNil())
				for _, wh := range webhooksOf(live) {
					bundle, _, _ := unstructured.NestedString(wh, "clientConfig", "caBundle")
					g.Expect(bundle).To(Equal(ca), "%s webhook %s", Key(cfg), wh["name"])
				}
			}
		}
		for _, crd := range ConvertedCRDs(installed) {
			live := get(t, ctx, dyn, mapper, crd)
			g.Expect(live).NotTo(BeNil())
			bundle, _, _ := unstructured.NestedString(live.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
			g.Expect(bundle).To(Equal(ca), "%s conversion webhook", crd.GetName())
		}
	}).Should(Succeed(), "cert-manager's CA injector fills every caBundle")
	return ca
}

func webhooksOf(cfg *unstructured.Unstructured) []map[string]any {
	if cfg == nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	out := make([]map[string]any, 0, len(list))
	for _, w := range list {
		out = append(out, w.(map[string]any))
	}
	return out
}

func keysDiff(t *testing.T, a, b []*unstructured.Unstructured) string {
	t.Helper()
	ka, kb := Keys(normalize(t, a)), Keys(normalize(t, b))
	if slices.Equal(ka, kb) {
		return ""
	}
	var out strings.Builder
	for _, k := range ka {
		if !slices.Contains(kb, k) {
			fmt.Fprintf(&out, "- %s\n", k)
		}
	}
	for _, k := range kb {
		if !slices.Contains(ka, k) {
			fmt.Fprintf(&out, "+ %s\n", k)
		}
	}
	return out.String()
}

func dynamicClient(t *testing.T, c *controlplane.Cluster) (dynamic.Interface, meta.ResettableRESTMapper) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
}

// get reads the live version of o; nil when it does not exist.
func get(t *testing.T, ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		if r, ok := mapper.(meta.ResettableRESTMapper); ok {
			r.Reset() // a kind the release just installed
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
	}
	if err != nil {
		t.Fatalf("mapping %s: %v", gvk, err)
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	live, err := r.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("getting %s: %v", Key(o), err)
	}
	return live
}

// refusingProxy answers every HTTP CONNECT request on its Unix socket with 403 and records the
// target: where kube-apiserver sends its cluster traffic, so that it never dials a ClusterIP.
type refusingProxy struct {
	socket string
	ln     net.Listener

	mu      sync.Mutex
	seen    []string
	refused []string
	wg      sync.WaitGroup
}

func startRefusingProxy(t *testing.T, dir string) *refusingProxy {
	t.Helper()
	socket := filepath.Join(dir, "egress.sock")
	if len(socket) >= 108 {
		t.Fatalf("socket path %s is too long for a Unix socket: set a shorter TMPDIR", socket)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatalf("listening on %s: %v", socket, err)
	}
	p := &refusingProxy{socket: socket, ln: ln}
	p.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			p.wg.Go(func() { p.refuse(conn) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
		_ = os.Remove(socket)
	})
	return p
}

func (p *refusingProxy) refuse(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	p.mu.Lock()
	p.seen = append(p.seen, req.Host)
	if req.Method == http.MethodConnect {
		p.refused = append(p.refused, req.Host)
	}
	p.mu.Unlock()
	_, _ = io.WriteString(conn, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
}

// targets returns the CONNECT targets asked for so far, and those refused (all of them).
func (p *refusingProxy) targets() (seen, refused []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen), slices.Clone(p.refused)
}
