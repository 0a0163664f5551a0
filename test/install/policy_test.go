//go:build integration

package install_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// selects reports whether sel (nil: nothing) matches the labels set.
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("invalid label selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(set))
}

// containerPort resolves port (a name or a number) against the container's ports; 0 when the
// container does not expose it.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	for _, p := range c.Ports {
		if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
			return p.ContainerPort
		}
	}
	return 0
}

// portNamed returns the number of the container port called name; the test fails without it.
func portNamed(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	n := containerPort(c, intstr.FromString(name))
	if n == 0 {
		t.Fatalf("container %s has no port %q (ports %v)", c.Name, name, c.Ports)
	}
	return n
}

// admitted lists the ingress rules of the rendered network policies that select the manager
// pods and open container port n, with the policies' names.
func (r *rendered) admitted(t *testing.T, podLabels map[string]string, c *corev1.Container, n int32) (rules []networkingv1.NetworkPolicyIngressRule, names []string) {
	t.Helper()
	for _, p := range r.policies {
		if !selects(t, &p.Spec.PodSelector, podLabels) {
			continue
		}
		for _, rule := range p.Spec.Ingress {
			opens := len(rule.Ports) == 0 // no ports: every port
			for _, rp := range rule.Ports {
				opens = opens || (rp.Port != nil && containerPort(c, *rp.Port) == n)
			}
			if opens {
				rules = append(rules, rule)
				names = append(names, p.Name)
			}
		}
	}
	return rules, names
}

// isolated reports whether some policy selecting the pods restricts their ingress: only then
// does a port no rule opens stay closed.
func (r *rendered) isolated(t *testing.T, podLabels map[string]string) bool {
	for _, p := range r.policies {
		if selects(t, &p.Spec.PodSelector, podLabels) && slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			return true
		}
	}
	return false
}

// The API server, and nothing a pod or namespace selector can name, reaches the webhook port:
// the policies open it to address blocks only (the API server's, set per cluster), open the
// metrics port to selected scraper namespaces only, and leave every other port of the manager
// closed.
func TestNetworkPoliciesAdmitOnlyTheAPIServerAndScrapers(t *testing.T) {
	r := render(t)
	d, c := r.manager(t)
	podLabels := d.Spec.Template.Labels
	if !r.isolated(t, podLabels) {
		t.Fatalf("no NetworkPolicy restricts ingress to the manager pods (labels %v)", podLabels)
	}

	webhookPort := portNamed(t, c, "webhook-server")
	rules, names := r.admitted(t, podLabels, c, webhookPort)
	if len(rules) == 0 {
		t.Errorf("no NetworkPolicy admits the API server to the webhook port %d: admission would fail closed", webhookPort)
	}
	for i, rule := range rules {
		if len(rule.From) == 0 {
			t.Errorf("NetworkPolicy %s admits every source to the webhook port", names[i])
		}
		for _, peer := range rule.From {
			if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
				t.Errorf("NetworkPolicy %s admits %+v to the webhook port; want the API server's address blocks only", names[i], peer)
			}
		}
	}

	metricsPort := portNamed(t, c, "metrics")
	rules, names = r.admitted(t, podLabels, c, metricsPort)
	if len(rules) == 0 {
		t.Errorf("no NetworkPolicy admits scrapers to the metrics port %d", metricsPort)
	}
	for i, rule := range rules {
		if len(rule.From) == 0 {
			t.Errorf("NetworkPolicy %s admits every source to the metrics port", names[i])
		}
		for _, peer := range rule.From {
			if peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) == 0 || peer.IPBlock != nil {
				t.Errorf("NetworkPolicy %s admits %+v to the metrics port; want pods of labelled namespaces only", names[i], peer)
			}
		}
	}

	for _, p := range c.Ports {
		if p.ContainerPort == webhookPort || p.ContainerPort == metricsPort {
			continue
		}
		if _, names := r.admitted(t, podLabels, c, p.ContainerPort); len(names) > 0 {
			t.Errorf("port %s (%d) is opened by %v; only the webhook and metrics ports should be", p.Name, p.ContainerPort, names)
		}
	}
}

// The metrics endpoint is served over TLS to authenticated, authorized scrapers only, on the
// port its Service and the scrapers' policy name; the manager may review tokens and access,
// and a metrics-reader role exists to grant scrapers get on /metrics.
func TestMetricsAreServedToAuthorizedScrapersOnly(t *testing.T) {
	r := render(t)
	d, c := r.manager(t)
	if !slices.Contains(c.Args, "--metrics-secure") && flag(c.Args, "metrics-secure") != "true" {
		t.Errorf("manager args %v lack --metrics-secure", c.Args)
	}
	bind := flag(c.Args, "metrics-bind-address")
	port := portNamed(t, c, "metrics")
	if !strings.HasSuffix(bind, ":"+strconv.Itoa(int(port))) {
		t.Errorf("--metrics-bind-address=%q does not serve the container port metrics (%d)", bind, port)
	}
	var svc *corev1.Service
	for i := range r.services {
		if strings.HasSuffix(r.services[i].Name, "metrics") {
			svc = &r.services[i]
		}
	}
	if svc == nil || len(svc.Spec.Ports) != 1 {
		t.Fatalf("want a metrics Service with one port, got %+v", svc)
	}
	if got := containerPort(c, svc.Spec.Ports[0].TargetPort); got != port {
		t.Errorf("metrics Service targets %s (container port %d), want the metrics port %d", svc.Spec.Ports[0].TargetPort.String(), got, port)
	}
	if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d.Spec.Template.Labels) {
		t.Errorf("metrics Service selects %v, which the manager pods (%v) do not carry", svc.Spec.Selector, d.Spec.Template.Labels)
	}

	roles := map[string]*rbacv1.ClusterRole{}
	for i := range r.clusterRoles {
		roles[r.clusterRoles[i].Name] = &r.clusterRoles[i]
	}
	grants := func(role *rbacv1.ClusterRole, group, resource, verb string) bool {
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
				return true
			}
		}
		return false
	}
	var tokenReviews, accessReviews bool
	for _, b := range r.bindings {
		role := roles[b.RoleRef.Name]
		if role == nil {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == d.Spec.Template.Spec.ServiceAccountName && s.Namespace == d.Namespace {
				tokenReviews = tokenReviews || grants(role, "authentication.k8s.io", "tokenreviews", "create")
				accessReviews = accessReviews || grants(role, "authorization.k8s.io", "subjectaccessreviews", "create")
			}
		}
	}
	if !tokenReviews || !accessReviews {
		t.Errorf("the manager's service account may create tokenreviews: %v, subjectaccessreviews: %v; the metrics endpoint needs both", tokenReviews, accessReviews)
	}

	reader := roles["sandgate-metrics-reader"]
	if reader == nil {
		t.Fatal("ClusterRole sandgate-metrics-reader is not rendered")
	}
	found := false
	for _, rule := range reader.Rules {
		found = found || (slices.Contains(rule.NonResourceURLs, "/metrics") && slices.Contains(rule.Verbs, "get"))
	}
	if !found {
		t.Errorf("ClusterRole %s does not grant get on /metrics: %+v", reader.Name, reader.Rules)
	}
}

// With fail-closed webhooks, voluntary disruptions never take the last replica: a budget keeps
// one of at least two replicas, and the replicas prefer different nodes.
func TestManagerSurvivesVoluntaryDisruptions(t *testing.T) {
	r := render(t)
	d, _ := r.manager(t)
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas < 2 {
		t.Errorf("Deployment %s runs %d replica(s), want at least 2", d.Name, replicas)
	}
	podLabels := d.Spec.Template.Labels

	var budgets []string
	for _, b := range r.budgets {
		if b.Namespace != d.Namespace || !selects(t, b.Spec.Selector, podLabels) {
			continue
		}
		budgets = append(budgets, b.Name)
		switch {
		case b.Spec.MinAvailable != nil:
			minAvailable, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(replicas), true)
			if err != nil || minAvailable < 1 || minAvailable >= int(replicas) {
				t.Errorf("PodDisruptionBudget %s minAvailable %s of %d replicas: want at least 1 kept and 1 evictable", b.Name, b.Spec.MinAvailable.String(), replicas)
			}
		case b.Spec.MaxUnavailable != nil:
			maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(replicas), true)
			if err != nil || maxUnavailable < 1 || maxUnavailable >= int(replicas) {
				t.Errorf("PodDisruptionBudget %s maxUnavailable %s of %d replicas: want at least 1 kept and 1 evictable", b.Name, b.Spec.MaxUnavailable.String(), replicas)
			}
		default:
			t.Errorf("PodDisruptionBudget %s sets neither minAvailable nor maxUnavailable", b.Name)
		}
	}
	if len(budgets) != 1 {
		t.Errorf("want one PodDisruptionBudget selecting the manager pods (%v), got %v", podLabels, budgets)
	}

	spread := false
	if a := d.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		for _, term := range terms {
			spread = spread || (term.TopologyKey == corev1.LabelHostname && selects(t, term.LabelSelector, podLabels))
		}
	}
	if !spread {
		t.Errorf("the manager pods have no anti-affinity to each other across %s", corev1.LabelHostname)
	}
}
