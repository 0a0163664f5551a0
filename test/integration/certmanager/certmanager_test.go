//go:build integration

// Package certmanager_test proves the install for real: on a local control plane it runs
// cert-manager's own controllers and CA injector (hack/cert-manager, built by `make
// tools`), applies config/default with `kubectl apply -k` as a user does, and runs the real
// sandgate binary the way the installed Deployment runs it — its command line, its service
// account's permissions, the serving certificate's Secret projected into its certificate
// directory the way the kubelet keeps a Secret volume current. The API server calls the
// webhooks through their Service, as in a cluster: its "cluster" egress goes to a proxy on a
// Unix socket the test owns, which tunnels exactly the webhook Service's <ClusterIP>:443 to
// the manager on 127.0.0.1 and refuses everything else. Nothing dials beyond loopback.
//
//	make tools && go test -tags integration ./test/integration/certmanager/ -v
package certmanager_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// injectCAFrom is the annotation that tells cert-manager's CA injector which Certificate's CA
// goes into a webhook configuration.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// install is what the test reads back from the cluster after `kubectl apply -k config/default`.
type install struct {
	mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	validating *admissionregistrationv1.ValidatingWebhookConfiguration
	service    *corev1.Service // the webhooks' Service
	cert       *certmanagerv1.Certificate
	deployment *appsv1.Deployment
}

func TestInstallWithCertManagerIssuingInjectingAndRotating(t *testing.T) {
	began := time.Now()
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(framework.Timeout)
	g.SetDefaultEventuallyPollingInterval(framework.Interval)
	ctx := context.Background()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmDir, err := controlplane.CertManagerDir(root)
	if err != nil {
		t.Fatal(err)
	}
	sandgate := buildSandgate(t, root)

	tmp := t.TempDir()
	proxy := startEgressProxy(t, tmp)
	egressConfig := filepath.Join(tmp, "egress-selector.yaml")
	if err := os.WriteFile(egressConfig, []byte(controlplane.EgressSelectorConfig(proxy.socket)), 0o600); err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, framework.StartTimeout)
	cluster, err := controlplane.Start(startCtx, controlplane.Options{
		// Only cert-manager's CRDs: sandgate's come with config/default.
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
		"--kubeconfig="+kubeconfigFor(t, cluster, "cert-manager", "system:masters")); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl("apply", "-k", filepath.Join(root, "config", "default")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k config/default: %v\n%s", err, out)
	}
	scheme := api.NewScheme()
	if err := certmanagerv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	in := readInstall(t, ctx, admin)
	serverName := in.service.Name + "." + in.service.Namespace + ".svc"

	// cert-manager issues the serving certificate for the Service's names, and its CA injector
	// puts the CA into every webhook of both configurations.
	var secret *corev1.Secret
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(in.cert), in.cert)).To(Succeed())
		g.Expect(conditionTrue(in.cert, certmanagerv1.CertificateConditionReady)).To(BeTrue(), "Certificate %s not Ready: %+v", in.cert.Name, in.cert.Status.Conditions)
		secret = &corev1.Secret{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: in.cert.Namespace, Name: in.cert.Spec.SecretName}, secret)).To(Succeed())
	}).Should(Succeed(), "cert-manager issues %s/%s", in.cert.Namespace, in.cert.Name)
	ca := secret.Data["ca.crt"]
	leaf := parseLeaf(t, secret.Data["tls.crt"])
	g.Expect(leaf.DNSNames).To(ConsistOf(serverName, serverName+".cluster.local"))
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue(), "ca.crt of Secret %s holds no certificate", secret.Name)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: serverName})
	g.Expect(err).NotTo(HaveOccurred(), "the issued certificate verifies against its CA for %s", serverName)
	t.Logf("cert-manager issued Secret %s/%s: serial %s for %v", secret.Namespace, secret.Name, leaf.SerialNumber, leaf.DNSNames)
	expectCABundles(t, g, ctx, admin, in, ca)

	// The real binary, as the Deployment runs it, serving the certificate from a directory
	// kept in sync with the Secret.
	pod := podOf(t, in.deployment, "manager", filepath.Join(cluster.Dir, "pod"))
	certDir, ok := pod.Secrets[in.cert.Spec.SecretName]
	if !ok {
		t.Fatalf("the manager does not mount the serving certificate's Secret %s (mounts %v)", in.cert.Spec.SecretName, pod.Secrets)
	}
	projectSecret(t, cs, in.cert.Namespace, in.cert.Spec.SecretName, certDir)
	identity := "system:serviceaccount:" + in.deployment.Namespace + ":" + in.deployment.Spec.Template.Spec.ServiceAccountName
	args := append(pod.Args,
		// Not system:masters: the service account's groups, so config/rbac's roles are all
		// the manager may use.
		"--kubeconfig="+kubeconfigFor(t, cluster, identity, "system:serviceaccounts", "system:serviceaccounts:"+in.deployment.Namespace, "system:authenticated"),
		// What a pod reads from its service account mount.
		"--leader-election-namespace="+in.deployment.Namespace)
	t.Logf("running sandgate %s", strings.Join(args, " "))
	if err := cluster.StartProcess("sandgate", sandgate, args...); err != nil {
		t.Fatal(err)
	}
	webhookTarget, webhookAddr := serviceRoute(t, in.service, pod)
	proxy.route(t, webhookTarget, webhookAddr)
	probes := "http://127.0.0.1:" + strconv.Itoa(pod.Ports["probes"]) + "/readyz"
	g.Eventually(func(g Gomega) {
		g.Expect(cluster.Err()).To(Succeed())
		resp, err := http.Get(probes)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}).Should(Succeed(), "sandgate ready at %s", probes)
	g.Expect(servedSerial(t, webhookAddr, roots, serverName)).To(Equal(leaf.SerialNumber.String()),
		"sandgate serves the Secret's certificate, verified against the injected CA for %s", serverName)

	// Admission through the Service, with the API server verifying the serving certificate
	// against the injected CA for <service>.<namespace>.svc.
	ns := "tenant"
	g.Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	tmpl := builders.MakeTemplate("web", ns).Obj()
	g.Expect(admin.Create(ctx, tmpl)).To(Succeed())
	g.Expect(admin.Create(ctx, builders.MakePool("web", ns, "web").Obj())).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(tmpl), tmpl)).To(Succeed())
	wantStamp := policy.TemplateHash(tmpl)
	claim := expectStamped(t, g, ctx, admin, ns, "first", wantStamp)

	prebound := builders.MakeSandbox("prebound", ns).Label(agentsv1beta1.LabelSandboxTemplateHash, wantStamp).
		Label(agentsv1beta1.LabelClaimUID, string(claim.UID)).Obj()
	prebound.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim"))}
	err = admin.Create(ctx, prebound)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding a Sandbox by anyone but the operator: want 403, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("prebound"), ContainSubstring(claim.Name)))

	// The CRDs convert through the same Service and CA: cert-manager injects it into their
	// conversion webhook too, and a v1alpha1 read of the claim goes through sandgate.
	g.Eventually(func(g Gomega) {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		g.Expect(admin.List(ctx, crds)).To(Succeed())
		converted := 0
		for _, crd := range crds.Items {
			if conv := crd.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig.Service != nil &&
				conv.Webhook.ClientConfig.Service.Name == in.service.Name {
				g.Expect(conv.Webhook.ClientConfig.CABundle).To(Equal(ca), "caBundle of %s's conversion webhook", crd.Name)
				converted++
			}
		}
		g.Expect(converted).To(Equal(4), "CRDs converting through %s", in.service.Name)
	}).Should(Succeed(), "cert-manager's CA injector fills in the caBundle of every CRD's conversion webhook")
	alpha := &extv1alpha1.SandboxClaim{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(claim), alpha)).To(Succeed())
	g.Expect(alpha.Spec.WarmPool).To(HaveValue(BeEquivalentTo("web")))
	g.Expect(alpha.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, wantStamp))

	// A certificate for the same names from another CA: the API server refuses it. The proxy
	// sends the Service's traffic to an impostor and drops the open connections.
	foreign, err := certs.SelfSigned(leaf.DNSNames, nil, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	imp := startImpostor(t, foreign)
	proxy.route(t, webhookTarget, imp.addr)
	proxy.closeTunnels()
	attempt := 0
	g.Eventually(func(g Gomega) {
		attempt++
		err := admin.Create(ctx, builders.MakeClaim("refused-"+strconv.Itoa(attempt), ns, "web").Obj())
		g.Expect(err).To(MatchError(ContainSubstring("x509: certificate signed by unknown authority")))
	}).Should(Succeed(), "the API server refuses a serving certificate from another CA")
	g.Expect(imp.hellos.Load()).To(BeNumerically(">", 0), "the API server reached the impostor")
	g.Expect(imp.requests.Load()).To(BeZero(), "no admission request was sent to the impostor")
	proxy.route(t, webhookTarget, webhookAddr)
	proxy.closeTunnels()
	expectStamped(t, g, ctx, admin, ns, "after-impostor", wantStamp)

	// A forced renewal, as `cmctl renew` does it: served without a restart on new connections.
	before := leaf.SerialNumber.String()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c := &certmanagerv1.Certificate{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(in.cert), c); err != nil {
			return err
		}
		setCondition(c, certmanagerv1.CertificateCondition{
			Type: certmanagerv1.CertificateConditionIssuing, Status: cmmeta.ConditionTrue,
			Reason: "ManuallyTriggered", Message: "Certificate re-issuance manually triggered",
		})
		return admin.Status().Update(ctx, c)
	})).To(Succeed())
	var after string
	g.Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(secret), s)).To(Succeed())
		after = parseLeaf(t, s.Data["tls.crt"]).SerialNumber.String()
		g.Expect(after).NotTo(Equal(before))
		g.Expect(s.Data["ca.crt"]).To(Equal(ca), "the CA stays: the injected bundle stays valid")
	}).Should(Succeed(), "cert-manager renews the serving certificate")
	g.Eventually(func(g Gomega) {
		g.Expect(servedSerial(t, webhookAddr, roots, serverName)).To(Equal(after))
	}).Should(Succeed(), "sandgate serves the renewed certificate on a new connection")
	g.Expect(cluster.Err()).To(Succeed(), "sandgate kept running: no restart")
	expectCABundles(t, g, ctx, admin, in, ca)
	proxy.closeTunnels()
	expectStamped(t, g, ctx, admin, ns, "after-renewal", wantStamp)
	t.Logf("serving certificate serial before the renewal %s, after %s", before, after)

	// The metrics endpoint: TLS, and only for tokens allowed to get /metrics.
	metricsURL := "https://127.0.0.1:" + strconv.Itoa(pod.Ports["metrics"]) + "/metrics"
	g.Expect(scrape(t, metricsURL, "")).To(HaveField("Status", http.StatusUnauthorized), "an unauthenticated scrape")
	reader := metricsReaderRole(t, ctx, admin)
	g.Expect(scrape(t, metricsURL, serviceAccountToken(t, ctx, cs, admin, ns, "stranger", ""))).To(HaveField("Status", http.StatusForbidden),
		"a service account not bound to %s", reader)
	bound := scrape(t, metricsURL, serviceAccountToken(t, ctx, cs, admin, ns, "prometheus", reader))
	g.Expect(bound.Status).To(Equal(http.StatusOK), "a service account bound to %s", reader)
	g.Expect(bound.Body).To(ContainSubstring(`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim"}`))

	// Every tunnel the API server asked for was the webhook Service's; nothing was refused.
	seen, refused := proxy.targets()
	g.Expect(seen).NotTo(BeEmpty())
	g.Expect(seen).To(HaveEach(webhookTarget))
	g.Expect(refused).To(BeEmpty())
	g.Expect(cluster.Err()).To(Succeed())
	t.Logf("install proved in %s (including building sandgate)", time.Since(began).Round(time.Millisecond))
}

// readInstall finds the installed webhook configurations (the ones cert-manager injects), the
// Service their webhooks call, the Certificate whose CA they take, and the manager Deployment.
func readInstall(t *testing.T, ctx context.Context, c client.Client) *install {
	t.Helper()
	in := &install{}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &validating); err != nil {
		t.Fatal(err)
	}
	for i := range mutating.Items {
		if mutating.Items[i].Annotations[injectCAFrom] != "" {
			in.mutating = &mutating.Items[i]
		}
	}
	for i := range validating.Items {
		if validating.Items[i].Annotations[injectCAFrom] != "" {
			in.validating = &validating.Items[i]
		}
	}
	if in.mutating == nil || in.validating == nil {
		t.Fatalf("want a mutating and a validating webhook configuration annotated %s, got %v and %v", injectCAFrom, in.mutating, in.validating)
	}
	from := in.mutating.Annotations[injectCAFrom]
	if got := in.validating.Annotations[injectCAFrom]; got != from {
		t.Fatalf("the configurations take their CA from different Certificates: %s and %s", from, got)
	}
	certNS, certName, _ := strings.Cut(from, "/")
	in.cert = &certmanagerv1.Certificate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: certNS, Name: certName}, in.cert); err != nil {
		t.Fatalf("Certificate %s: %v", from, err)
	}
	var ref *admissionregistrationv1.ServiceReference
	for _, cc := range clientConfigs(in) {
		if cc.Service == nil {
			t.Fatalf("a webhook is called at URL %v, not through a Service", cc.URL)
		}
		if ref != nil && (cc.Service.Name != ref.Name || cc.Service.Namespace != ref.Namespace) {
			t.Fatalf("webhooks call different Services: %s/%s and %s/%s", ref.Namespace, ref.Name, cc.Service.Namespace, cc.Service.Name)
		}
		ref = cc.Service
	}
	in.service = &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, in.service); err != nil {
		t.Fatalf("webhook Service: %v", err)
	}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments, client.InNamespace(in.service.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 {
		t.Fatalf("want one Deployment in %s, got %d", in.service.Namespace, len(deployments.Items))
	}
	in.deployment = &deployments.Items[0]
	return in
}

// clientConfigs returns the client configurations of every webhook of the install.
func clientConfigs(in *install) []admissionregistrationv1.WebhookClientConfig {
	var out []admissionregistrationv1.WebhookClientConfig
	for _, w := range in.mutating.Webhooks {
		out = append(out, w.ClientConfig)
	}
	for _, w := range in.validating.Webhooks {
		out = append(out, w.ClientConfig)
	}
	return out
}

// expectCABundles waits until every webhook of both configurations carries ca as its CA bundle.
func expectCABundles(t *testing.T, g *WithT, ctx context.Context, c client.Client, in *install, ca []byte) {
	t.Helper()
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(in.mutating), in.mutating)).To(Succeed())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(in.validating), in.validating)).To(Succeed())
		configs := clientConfigs(in)
		g.Expect(configs).To(HaveLen(len(in.mutating.Webhooks) + len(in.validating.Webhooks)))
		for _, cc := range configs {
			g.Expect(cc.CABundle).To(Equal(ca), "caBundle of the webhook at %s", ptr.Deref(cc.Service.Path, ""))
		}
	}).Should(Succeed(), "cert-manager's CA injector fills in the caBundle of every webhook")
}

// serviceRoute returns the address the API server dials for svc's webhook port (its ClusterIP
// and port: kube-apiserver does not resolve Service names through DNS) and the loopback
// address of the container port the Service targets.
func serviceRoute(t *testing.T, svc *corev1.Service, pod *localPod) (target, local string) {
	t.Helper()
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 {
		t.Fatalf("webhook Service %s: want a ClusterIP and one port, got %+v", svc.Name, svc.Spec)
	}
	p := svc.Spec.Ports[0]
	port, ok := pod.Ports[p.TargetPort.String()]
	if !ok {
		t.Fatalf("webhook Service %s targets port %s, which the manager does not expose (ports %v)", svc.Name, p.TargetPort.String(), pod.Ports)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port))), "127.0.0.1:" + strconv.Itoa(port)
}

// expectStamped creates claim name on the pool "web" as c and expects the mutating webhook's
// stamp on it.
func expectStamped(t *testing.T, g *WithT, ctx context.Context, c client.Client, ns, name, want string) *extv1beta1.SandboxClaim {
	t.Helper()
	claim := builders.MakeClaim(name, ns, "web").Obj()
	// Right after the proxy dropped its tunnels the API server may still hold one it has not
	// seen closed: the first call can fail on it.
	g.Eventually(func() error { return c.Create(ctx, claim) }).Should(Succeed(), "creating claim %s", name)
	g.Expect(claim.Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationSandboxTemplateHash, want), "claim %s is stamped", name)
	return claim
}

// servedSerial makes a new TLS connection to addr, verifying the server's certificate against
// roots for serverName, and returns the certificate's serial.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool, serverName string) (string, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// parseLeaf returns the first certificate of a PEM bundle.
func parseLeaf(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatalf("no PEM block in %q", pemData)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func conditionTrue(c *certmanagerv1.Certificate, typ certmanagerv1.CertificateConditionType) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == typ {
			return cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == c.Generation
		}
	}
	return false
}

// setCondition sets cond on c, replacing a condition of its type.
func setCondition(c *certmanagerv1.Certificate, cond certmanagerv1.CertificateCondition) {
	now := metav1.Now()
	cond.LastTransitionTime = &now
	cond.ObservedGeneration = c.Generation
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == cond.Type {
			c.Status.Conditions[i] = cond
			return
		}
	}
	c.Status.Conditions = append(c.Status.Conditions, cond)
}
