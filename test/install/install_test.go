//go:build integration

// Package install_test renders the install (`kubectl kustomize config/default`) and checks
// that the pieces fit together the way a cluster needs them to: cert-manager issues the
// serving certificate for the names the API server calls, the manager serves it from where it
// is mounted, the CA is injected into every webhook configuration, and the operator runs as
// the identity the binding guard admits.
package install_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// rendered holds the objects of the install by kind.
type rendered struct {
	crds         []apiextensionsv1.CustomResourceDefinition
	deployments  []appsv1.Deployment
	services     []corev1.Service
	mutating     []admissionregistrationv1.MutatingWebhookConfiguration
	validating   []admissionregistrationv1.ValidatingWebhookConfiguration
	certificates []certmanagerv1.Certificate
	issuers      []certmanagerv1.Issuer
	bindings     []rbacv1.ClusterRoleBinding
	clusterRoles []rbacv1.ClusterRole
	policies     []networkingv1.NetworkPolicy
	budgets      []policyv1.PodDisruptionBudget
	flowSchemas  []flowcontrolv1.FlowSchema
	levels       []flowcontrolv1.PriorityLevelConfiguration
}

func kubectl(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		root, err := controlplane.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "bin", "k8s", controlplane.KubernetesVersion)
	}
	path := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("kubectl not found (%v): run `make tools`", err)
	}
	return path
}

// render renders config/default.
func render(t *testing.T) *rendered {
	t.Helper()
	return renderDir(t, "default")
}

// renderDir renders config/<dir>.
func renderDir(t *testing.T, dir string) *rendered {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectl(t), "kustomize", filepath.Join(root, "config", dir))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v\n%s", dir, err, stderr.String())
	}
	r := &rendered{}
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("decoding a rendered object: %v\n%s", err, doc)
		}
		decode := func(into any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("decoding %s: %v\n%s", meta.Kind, err, doc)
			}
		}
		switch meta.Kind {
		case "CustomResourceDefinition":
			r.crds = append(r.crds, apiextensionsv1.CustomResourceDefinition{})
			decode(&r.crds[len(r.crds)-1])
		case "Deployment":
			r.deployments = append(r.deployments, appsv1.Deployment{})
			decode(&r.deployments[len(r.deployments)-1])
		case "Service":
			r.services = append(r.services, corev1.Service{})
			decode(&r.services[len(r.services)-1])
		case "MutatingWebhookConfiguration":
			r.mutating = append(r.mutating, admissionregistrationv1.MutatingWebhookConfiguration{})
			decode(&r.mutating[len(r.mutating)-1])
		case "ValidatingWebhookConfiguration":
			r.validating = append(r.validating, admissionregistrationv1.ValidatingWebhookConfiguration{})
			decode(&r.validating[len(r.validating)-1])
		case "Certificate":
			r.certificates = append(r.certificates, certmanagerv1.Certificate{})
			decode(&r.certificates[len(r.certificates)-1])
		case "Issuer":
			r.issuers = append(r.issuers, certmanagerv1.Issuer{})
			decode(&r.issuers[len(r.issuers)-1])
		case "ClusterRoleBinding":
			r.bindings = append(r.bindings, rbacv1.ClusterRoleBinding{})
			decode(&r.bindings[len(r.bindings)-1])
		case "ClusterRole":
			r.clusterRoles = append(r.clusterRoles, rbacv1.ClusterRole{})
			decode(&r.clusterRoles[len(r.clusterRoles)-1])
		case "NetworkPolicy":
			r.policies = append(r.policies, networkingv1.NetworkPolicy{})
			decode(&r.policies[len(r.policies)-1])
		case "PodDisruptionBudget":
			r.budgets = append(r.budgets, policyv1.PodDisruptionBudget{})
			decode(&r.budgets[len(r.budgets)-1])
		case "FlowSchema":
			r.flowSchemas = append(r.flowSchemas, flowcontrolv1.FlowSchema{})
			decode(&r.flowSchemas[len(r.flowSchemas)-1])
		case "PriorityLevelConfiguration":
			r.levels = append(r.levels, flowcontrolv1.PriorityLevelConfiguration{})
			decode(&r.levels[len(r.levels)-1])
		}
	}
	return r
}

// manager returns the manager Deployment and its container.
func (r *rendered) manager(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	if len(r.deployments) != 1 {
		t.Fatalf("want one Deployment, got %d", len(r.deployments))
	}
	d := &r.deployments[0]
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "manager" {
			return d, c
		}
	}
	t.Fatalf("Deployment %s has no container manager", d.Name)
	return nil, nil
}

// flag returns the value of --name=value in args, "" when absent.
func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// servingCertificate is the Certificate the webhook configurations take their CA from.
func (r *rendered) servingCertificate(t *testing.T) *certmanagerv1.Certificate {
	t.Helper()
	var found *certmanagerv1.Certificate
	for i := range r.certificates {
		if !r.certificates[i].Spec.IsCA {
			if found != nil {
				t.Fatalf("more than one serving Certificate: %s, %s", found.Name, r.certificates[i].Name)
			}
			found = &r.certificates[i]
		}
	}
	if found == nil {
		t.Fatal("no serving Certificate rendered")
	}
	return found
}

func TestInstallRendersEveryPiece(t *testing.T) {
	r := render(t)
	var crds []string
	for _, crd := range r.crds {
		crds = append(crds, crd.Name)
	}
	want := []string{"claimledgers.policy.sandgate.dev", "claimpolicies.policy.sandgate.dev",
		"sandboxclaims.extensions.agents.x-k8s.io", "sandboxes.agents.x-k8s.io",
		"sandboxtemplates.extensions.agents.x-k8s.io", "sandboxwarmpools.extensions.agents.x-k8s.io",
		"warmpoolautoscalers.autoscaling.sandgate.dev"}
	if diff := cmp.Diff(want, crds); diff != "" {
		t.Errorf("CRDs (-want +got):\n%s", diff)
	}
	if len(r.mutating) != 1 || len(r.validating) != 1 {
		t.Fatalf("want one mutating and one validating webhook configuration, got %d and %d", len(r.mutating), len(r.validating))
	}
	if len(r.issuers) == 0 {
		t.Errorf("no Issuer rendered")
	}
}

// Every webhook configuration gets its CA bundle from the serving certificate's Secret.
func TestWebhookConfigurationsInjectServingCA(t *testing.T) {
	r := render(t)
	cert := r.servingCertificate(t)
	want := cert.Namespace + "/" + cert.Name
	for _, m := range r.mutating {
		if got := m.Annotations["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("MutatingWebhookConfiguration %s: inject-ca-from = %q, want %q", m.Name, got, want)
		}
	}
	for _, v := range r.validating {
		if got := v.Annotations["cert-manager.io/inject-ca-from"]; got != want {
			t.Errorf("ValidatingWebhookConfiguration %s: inject-ca-from = %q, want %q", v.Name, got, want)
		}
	}
}

// The certificate is valid for the names the API server calls: the webhook Service's, as
// every webhook's clientConfig names it.
func TestServingCertificateMatchesWebhookService(t *testing.T) {
	r := render(t)
	cert := r.servingCertificate(t)
	var clientConfigs []admissionregistrationv1.WebhookClientConfig
	for _, m := range r.mutating {
		for _, w := range m.Webhooks {
			clientConfigs = append(clientConfigs, w.ClientConfig)
		}
	}
	for _, v := range r.validating {
		for _, w := range v.Webhooks {
			clientConfigs = append(clientConfigs, w.ClientConfig)
		}
	}
	if len(clientConfigs) == 0 {
		t.Fatal("no webhooks rendered")
	}
	for _, cc := range clientConfigs {
		if cc.Service == nil {
			t.Fatalf("webhook at %v is not called through a Service", cc.URL)
		}
		wantNames := []string{
			cc.Service.Name + "." + cc.Service.Namespace + ".svc",
			cc.Service.Name + "." + cc.Service.Namespace + ".svc.cluster.local",
		}
		if diff := cmp.Diff(wantNames, cert.Spec.DNSNames); diff != "" {
			t.Errorf("Certificate %s dnsNames for webhook path %s (-want +got):\n%s", cert.Name, *cc.Service.Path, diff)
		}
		found := false
		for _, svc := range r.services {
			found = found || (svc.Name == cc.Service.Name && svc.Namespace == cc.Service.Namespace)
		}
		if !found {
			t.Errorf("webhook Service %s/%s is not rendered", cc.Service.Namespace, cc.Service.Name)
		}
	}
	// The certificate's issuer chain is rendered: the serving Issuer and, for a CA Issuer, the
	// Certificate that fills its Secret.
	issuers := map[string]*certmanagerv1.Issuer{}
	for i := range r.issuers {
		issuers[r.issuers[i].Name] = &r.issuers[i]
	}
	issuer := issuers[cert.Spec.IssuerRef.Name]
	if issuer == nil {
		t.Fatalf("Certificate %s is issued by %q, which is not rendered", cert.Name, cert.Spec.IssuerRef.Name)
	}
	if issuer.Spec.CA != nil {
		found := false
		for _, c := range r.certificates {
			found = found || (c.Spec.IsCA && c.Spec.SecretName == issuer.Spec.CA.SecretName && issuers[c.Spec.IssuerRef.Name] != nil)
		}
		if !found {
			t.Errorf("CA Issuer %s reads Secret %s, which no rendered CA Certificate fills", issuer.Name, issuer.Spec.CA.SecretName)
		}
	}
}

// The manager reads the certificate from --webhook-cert-dir, where the Secret cert-manager
// writes is mounted, and serves on the port the Service targets.
func TestManagerMountsServingSecretAtCertDir(t *testing.T) {
	r := render(t)
	cert := r.servingCertificate(t)
	d, c := r.manager(t)
	certDir := flag(c.Args, "webhook-cert-dir")
	if certDir == "" {
		t.Fatalf("manager args %v lack --webhook-cert-dir", c.Args)
	}
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == certDir {
			volume = m.Name
		}
	}
	if volume == "" {
		t.Fatalf("nothing is mounted at --webhook-cert-dir=%s (mounts %v)", certDir, c.VolumeMounts)
	}
	var secret string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret != cert.Spec.SecretName {
		t.Errorf("volume %s mounted at %s holds Secret %q, want the serving certificate's %q", volume, certDir, secret, cert.Spec.SecretName)
	}

	port := flag(c.Args, "webhook-port")
	var svc *corev1.Service
	for i := range r.services {
		if strings.HasSuffix(r.services[i].Name, "webhook-service") {
			svc = &r.services[i]
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 1 {
		t.Fatalf("want a webhook Service with one port, got %+v", svc)
	}
	// The Service targets the container port by name or number; either way it must be the
	// port the manager listens on.
	target := svc.Spec.Ports[0].TargetPort
	served := ""
	for _, p := range c.Ports {
		if p.Name == target.String() || (target.StrVal == "" && p.ContainerPort == target.IntVal) {
			served = strconv.Itoa(int(p.ContainerPort))
		}
	}
	if served == "" || served != port {
		t.Errorf("webhook Service targets %s (container port %q), but the manager serves --webhook-port=%q", target.String(), served, port)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("webhook Service selects %s=%s, which the manager pods do not carry", k, v)
		}
	}
}

// The manager tells the binding guard its own identity, from its pod spec: with the default
// install that is webhooks.DefaultOperatorUser, and that service account is the one bound to
// the manager's ClusterRole.
func TestOperatorIdentityIsWiredThrough(t *testing.T) {
	r := render(t)
	d, c := r.manager(t)
	arg := flag(c.Args, "operator-service-account")
	if arg == "" {
		t.Fatalf("manager args %v lack --operator-service-account", c.Args)
	}
	// Expand $(VAR) the way the kubelet does, from the env entries' downward API fields.
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		var value string
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.namespace":
			value = d.Namespace
		case "spec.serviceAccountName":
			value = d.Spec.Template.Spec.ServiceAccountName
		default:
			continue
		}
		arg = strings.ReplaceAll(arg, "$("+e.Name+")", value)
	}
	if arg != webhooks.DefaultOperatorUser {
		t.Errorf("--operator-service-account expands to %q, want %q", arg, webhooks.DefaultOperatorUser)
	}
	bound := false
	for _, b := range r.bindings {
		for _, s := range b.Subjects {
			bound = bound || (s.Kind == "ServiceAccount" && s.Name == d.Spec.Template.Spec.ServiceAccountName && s.Namespace == d.Namespace &&
				strings.HasSuffix(b.RoleRef.Name, "manager-role"))
		}
	}
	if !bound {
		t.Errorf("service account %s/%s is not bound to the manager role", d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	}
}

// Stamping and the binding guard fail closed and give up after a bound time.
func TestAdmissionFailsClosed(t *testing.T) {
	r := render(t)
	check := func(name string, policy *admissionregistrationv1.FailurePolicyType, timeout *int32) {
		if policy == nil || *policy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: failurePolicy %v, want Fail", name, policy)
		}
		if timeout == nil || *timeout <= 0 || *timeout > 30 {
			t.Errorf("webhook %s: timeoutSeconds %v, want 1-30", name, timeout)
		}
	}
	seen := map[string]bool{}
	for _, m := range r.mutating {
		for _, w := range m.Webhooks {
			check(w.Name, w.FailurePolicy, w.TimeoutSeconds)
			seen[w.Name] = true
		}
	}
	for _, v := range r.validating {
		for _, w := range v.Webhooks {
			check(w.Name, w.FailurePolicy, w.TimeoutSeconds)
			seen[w.Name] = true
		}
	}
	for _, name := range []string{"stamp.sandboxclaims.extensions.agents.x-k8s.io", "binding-guard.sandboxes.agents.x-k8s.io"} {
		if !seen[name] {
			t.Errorf("webhook %s is not rendered", name)
		}
	}
}
