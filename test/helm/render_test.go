package helmchart

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// clusterScoped are the kinds of the install that have no namespace. kustomize sets the
// namespace of config/default on every kind it does not know to be cluster-scoped (it does on
// the FlowSchema and PriorityLevelConfiguration; kubectl and the API server drop it): the
// comparison drops it from these kinds on kustomize's side, and the chart must never set it.
var clusterScoped = []string{
	"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
	"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
	"FlowSchema", "PriorityLevelConfiguration",
}

// TestMain quiets Helm's chart loader, which logs each link in files/ at level INFO.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

func root(t *testing.T) string {
	t.Helper()
	r, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func renderChart(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := RenderChart(root(t), values)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != "" {
			t.Errorf("the chart gives the cluster-scoped %s a namespace", Key(o))
		}
	}
	return objs
}

func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Kustomize(root(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if slices.Contains(clusterScoped, o.GetKind()) {
			o.SetNamespace("")
		}
	}
	return objs
}

func normalize(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m, err := Normalize(objs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expectSameObjects fails unless want and got are the same objects: the same keys, and each
// object equal field by field once normalized. The names say where each came from.
func expectSameObjects(t *testing.T, want, got []*unstructured.Unstructured, wantName, gotName string) {
	t.Helper()
	w, g := normalize(t, want), normalize(t, got)
	if diff := cmp.Diff(Keys(w), Keys(g)); diff != "" {
		t.Fatalf("%s renders other objects than %s (-%s +%s):\n%s", gotName, wantName, wantName, gotName, diff)
	}
	for _, k := range Keys(w) {
		if diff := cmp.Diff(w[k].Object, g[k].Object); diff != "" {
			t.Errorf("%s differs from %s's (-%s +%s):\n%s", k, wantName, wantName, gotName, diff)
		}
	}
}

func TestChartWithDefaultValuesRendersConfigDefault(t *testing.T) {
	chart, kustomized := renderChart(t, nil), kustomize(t, "default")
	if len(kustomized) < 30 {
		t.Fatalf("config/default renders %d objects (%s): the comparison would prove little", len(kustomized), Kinds(kustomized))
	}
	expectSameObjects(t, kustomized, chart, "config/default", "chart")
}

func TestChartWithoutV1alpha1RendersConfigV1beta1Only(t *testing.T) {
	chart := renderChart(t, map[string]any{"v1alpha1": map[string]any{"enabled": false}})
	expectSameObjects(t, kustomize(t, "v1beta1-only"), chart, "config/v1beta1-only", "chart")
}

// The chart adds labels for Helm's tooling on every object's metadata, and the annotation
// that keeps the CRDs on uninstall; nothing else, and never to a selector or pod template.
func TestChartAddsHelmLabelsToMetadataOnly(t *testing.T) {
	for _, o := range renderChart(t, nil) {
		labels := o.GetLabels()
		for _, l := range helmLabels {
			if _, ok := labels[l]; !ok {
				t.Errorf("%s lacks label %s (labels %v)", Key(o), l, labels)
			}
		}
		if o.GetKind() == "CustomResourceDefinition" && o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("%s: annotations %v, want helm.sh/resource-policy: keep", Key(o), o.GetAnnotations())
		}
	}
	for _, o := range renderChart(t, map[string]any{"crds": map[string]any{"keep": false}}) {
		if _, ok := o.GetAnnotations()["helm.sh/resource-policy"]; ok {
			t.Errorf("%s keeps on uninstall with crds.keep=false", Key(o))
		}
	}
}

func TestMonitoringObjectsRenderOnlyWhenEnabled(t *testing.T) {
	base := normalize(t, renderChart(t, nil))
	for k := range base {
		if strings.HasPrefix(k, "monitoring.coreos.com/") {
			t.Errorf("default values render %s: monitoring objects need CRDs a cluster may lack", k)
		}
	}
	cases := map[string]struct {
		values    map[string]any
		wantKinds []string
	}{
		"serviceMonitor": {
			values:    map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			wantKinds: []string{"ServiceMonitor"},
		},
		"prometheusRule": {
			values:    map[string]any{"prometheusRule": map[string]any{"enabled": true}},
			wantKinds: []string{"PrometheusRule"},
		},
		"both": {
			values: map[string]any{
				"serviceMonitor": map[string]any{"enabled": true},
				"prometheusRule": map[string]any{"enabled": true},
			},
			wantKinds: []string{"PrometheusRule", "ServiceMonitor"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := normalize(t, renderChart(t, map[string]any{"metrics": tc.values}))
			var added []string
			for k, o := range got {
				if b, ok := base[k]; ok {
					if diff := cmp.Diff(b.Object, o.Object); diff != "" {
						t.Errorf("enabling %s changes %s (-default +enabled):\n%s", name, k, diff)
					}
					continue
				}
				added = append(added, o.GetKind())
			}
			slices.Sort(added)
			if diff := cmp.Diff(tc.wantKinds, added); diff != "" {
				t.Errorf("objects added (-want +got):\n%s", diff)
			}
		})
	}
}

// The monitoring objects are what the Prometheus Operator's API accepts (no unknown field, as
// its CRDs' schemas would prune or refuse them) and their expressions and durations parse as
// Prometheus parses them, in every shape the values give them.
func TestMonitoringObjectsParseAsPrometheusDoes(t *testing.T) {
	variants := map[string]struct{ controller, serviceMonitor, prometheusRule map[string]any }{
		"defaults":   {},
		"plain http": {controller: map[string]any{"metricsSecure": false}},
		"authorization and timeout": {serviceMonitor: map[string]any{
			"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "prom", "key": "token"}},
			"scrapeTimeout": "10s",
		}},
		"warm claims":    {prometheusRule: map[string]any{"claimLatencySLO": map[string]any{"launchType": "warm"}}},
		"no latency SLO": {prometheusRule: map[string]any{"claimLatencySLO": map[string]any{"enabled": false}}},
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			sm, pr := map[string]any{"enabled": true}, map[string]any{"enabled": true}
			maps.Copy(sm, v.serviceMonitor)
			maps.Copy(pr, v.prometheusRule)
			values := map[string]any{"metrics": map[string]any{"serviceMonitor": sm, "prometheusRule": pr}}
			if v.controller != nil {
				values["controller"] = v.controller
			}
			objs := renderChart(t, values)
			monitor := &monitoringv1.ServiceMonitor{}
			strictDecode(t, only(t, objs, "ServiceMonitor"), monitor)
			for _, ep := range monitor.Spec.Endpoints {
				for _, d := range []monitoringv1.Duration{ep.Interval, ep.ScrapeTimeout} {
					if d != "" {
						if _, err := model.ParseDuration(string(d)); err != nil {
							t.Errorf("ServiceMonitor endpoint duration %q: %v", d, err)
						}
					}
				}
			}
			rule := &monitoringv1.PrometheusRule{}
			strictDecode(t, only(t, objs, "PrometheusRule"), rule)
			alerts := 0
			for _, g := range rule.Spec.Groups {
				for _, r := range g.Rules {
					alerts++
					if _, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr.String()); err != nil {
						t.Errorf("alert %s: expr %q does not parse: %v", r.Alert, r.Expr.String(), err)
					}
					if r.For != nil {
						if _, err := model.ParseDuration(string(*r.For)); err != nil {
							t.Errorf("alert %s: for %q: %v", r.Alert, *r.For, err)
						}
					}
				}
			}
			if alerts < 2 {
				t.Errorf("%d alerts, want at least the webhook alerts", alerts)
			}
		})
	}
}

// strictDecode decodes o into typed, failing on a field the type lacks.
func strictDecode(t *testing.T, o *unstructured.Unstructured, typed any) {
	t.Helper()
	raw, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		t.Errorf("%s is not a valid %T: %v", Key(o), typed, err)
	}
}

// The ServiceMonitor scrapes the metrics Service's port, over HTTPS with a token while the
// manager serves metrics securely, over HTTP otherwise.
func TestServiceMonitorScrapesTheMetricsPort(t *testing.T) {
	for _, secure := range []bool{true, false} {
		objs := renderChart(t, map[string]any{
			"controller": map[string]any{"metricsSecure": secure},
			"metrics":    map[string]any{"serviceMonitor": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "prom"}}},
		})
		sm := only(t, objs, "ServiceMonitor")
		svc := metricsService(t, objs)
		if got := sm.GetLabels()["release"]; got != "prom" {
			t.Errorf("additionalLabels: release = %q, want prom", got)
		}
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		svcSel, _, _ := unstructured.NestedStringMap(svc.Object, "metadata", "labels")
		for k, v := range sel {
			if svcSel[k] != v {
				t.Errorf("the ServiceMonitor selects %v, which the metrics Service (labels %v) lacks", sel, svcSel)
			}
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if len(endpoints) != 1 || len(ports) != 1 {
			t.Fatalf("endpoints %v, Service ports %v: want one each", endpoints, ports)
		}
		ep, port := endpoints[0].(map[string]any), ports[0].(map[string]any)
		if ep["port"] != port["name"] {
			t.Errorf("the ServiceMonitor scrapes port %v, the metrics Service's is %v", ep["port"], port["name"])
		}
		wantScheme := map[bool]string{true: "https", false: "http"}[secure]
		if ep["scheme"] != wantScheme {
			t.Errorf("metricsSecure=%t: scheme %v, want %s", secure, ep["scheme"], wantScheme)
		}
		if _, hasToken := ep["bearerTokenFile"]; hasToken != secure {
			t.Errorf("metricsSecure=%t: endpoint %v, want a bearer token only when secure", secure, ep)
		}
		args := managerArgs(t, objs)
		wantFlag := map[bool]string{true: "--metrics-secure", false: "--metrics-secure=false"}[secure]
		if !slices.Contains(args, wantFlag) {
			t.Errorf("metricsSecure=%t: args %v lack %s", secure, args, wantFlag)
		}
	}
}

// The alerts: the webhooks being down (no replica up; the API server failing to call any of
// the chart's webhooks by name) and the claim latency objective, on the histogram's buckets.
func TestPrometheusRuleAlertsOnWebhooksAndClaimLatency(t *testing.T) {
	objs := renderChart(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{
		"enabled":         true,
		"claimLatencySLO": map[string]any{"thresholdMs": 1000, "objective": 0.95, "launchType": "warm"},
		"additionalGroups": []any{map[string]any{"name": "mine", "rules": []any{
			map[string]any{"alert": "Mine", "expr": "vector(1)"},
		}}},
	}}})
	rule := only(t, objs, "PrometheusRule")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if len(groups) != 2 || groups[1].(map[string]any)["name"] != "mine" {
		t.Fatalf("groups %v: want the chart's, then additionalGroups", groups)
	}
	exprs := map[string]string{}
	for _, r := range groups[0].(map[string]any)["rules"].([]any) {
		r := r.(map[string]any)
		exprs[r["alert"].(string)] = r["expr"].(string)
	}
	svc := metricsService(t, objs)
	target := `namespace="` + svc.GetNamespace() + `", service="` + svc.GetName() + `"`

	if got := exprs["SandgateWebhookDown"]; !strings.Contains(got, "absent(up{"+target+"} == 1)") {
		t.Errorf("SandgateWebhookDown: expr %q, want absent(up{%s} == 1)", got, target)
	}

	var names []string
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, wh := range webhooks(t, only(t, objs, kind)) {
			names = append(names, wh["name"].(string))
		}
	}
	m := regexp.MustCompile("name=~`([^`]*)`").FindStringSubmatch(exprs["SandgateWebhookCallsFailing"])
	if m == nil {
		t.Fatalf("SandgateWebhookCallsFailing: expr %q matches no webhook names", exprs["SandgateWebhookCallsFailing"])
	}
	re := regexp.MustCompile("^(?:" + m[1] + ")$")
	for _, n := range names {
		if !re.MatchString(n) {
			t.Errorf("SandgateWebhookCallsFailing misses webhook %s", n)
		}
	}
	for _, other := range []string{"default.sandboxes.agents.x-k8s.io.evil", "defaultXsandboxes.agents.x-k8s.io"} {
		if re.MatchString(other) {
			t.Errorf("SandgateWebhookCallsFailing matches %s, no webhook of the chart", other)
		}
	}

	slo := exprs["SandgateClaimLatencySLO"]
	for _, want := range []string{
		`agent_sandbox_claim_startup_latency_ms_bucket{` + target + `, launch_type="warm", le=~"1000(\\.0)?"}`,
		`agent_sandbox_claim_startup_latency_ms_count{` + target + `, launch_type="warm"}`,
		`) < 0.95`,
	} {
		if !strings.Contains(slo, want) {
			t.Errorf("SandgateClaimLatencySLO: expr %q lacks %q", slo, want)
		}
	}

	_, err := RenderChart(root(t), map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "claimLatencySLO": map[string]any{"thresholdMs": 1234},
	}}})
	if err == nil || !strings.Contains(err.Error(), "not a bucket") {
		t.Errorf("thresholdMs 1234: err %v, want a refusal (no such bucket: the alert would never fire)", err)
	}
}

// The chart's list of the claim latency buckets is the histogram's (reconcilers'
// claimLatencyBuckets): a threshold between buckets would select no series.
func TestPrometheusRuleKnowsTheLatencyBuckets(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root(t), "reconcilers", "sandboxclaim_metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`claimLatencyBuckets = \[\]float64\{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("reconcilers/sandboxclaim_metrics.go defines no claimLatencyBuckets")
	}
	tpl, err := os.ReadFile(filepath.Join(root(t), ChartPath, "templates", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tm := regexp.MustCompile(`\$buckets := list ([^}]*)\}\}`).FindSubmatch(tpl)
	if tm == nil {
		t.Fatal("templates/prometheusrule.yaml lists no $buckets")
	}
	var want, got []string
	for _, b := range strings.Split(string(m[1]), ",") {
		want = append(want, strings.TrimSpace(b))
	}
	for _, b := range strings.Fields(string(tm[1])) {
		got = append(got, strings.Trim(b, `"`))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the chart's buckets differ from the histogram's (-histogram +chart):\n%s", diff)
	}
	// And the default threshold is one of them.
	objs := renderChart(t, map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
	if len(Find(objs, "PrometheusRule")) != 1 {
		t.Error("the default claimLatencySLO does not render")
	}
}

// Image, replicas and flags reach the Deployment; flags left unset are omitted.
func TestValuesReachTheDeployment(t *testing.T) {
	objs := renderChart(t, map[string]any{
		"image":        map[string]any{"repository": "registry.example/sandgate", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
		"replicaCount": 1, // leader election off needs a single replica
		"controller": map[string]any{
			"leaderElect":                   false,
			"extensions":                    false,
			"kubeApiQps":                    50,
			"kubeApiBurst":                  100,
			"sandboxClaimConcurrentWorkers": 8,
			"clusterDomain":                 "corp.local",
			"coldStartGrace":                "3s",
			"claimReservationTTL":           "90s",
			"platformGroups":                []any{"platform", "sre"},
			"claimAllowedAnnotationDomains": []any{"sandbox.users.io", "acme.example"},
			"restamp":                       false,
			"extraArgs":                     []any{"--zap-log-level=debug"},
		},
		"podLabels":      map[string]any{"team": "platform"},
		"podAnnotations": map[string]any{"example.com/scrape": "no"},
		"resources":      map[string]any{"requests": map[string]any{"cpu": "1"}},
		"nodeSelector":   map[string]any{"pool": "system"},
	})
	dep := only(t, objs, "Deployment")
	if got, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); got != 1 {
		t.Errorf("replicas %d, want 1", got)
	}
	c := container(t, dep)
	if c["image"] != "registry.example/sandgate:v1.2.3" || c["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("image %v (pull policy %v), want registry.example/sandgate:v1.2.3, IfNotPresent", c["image"], c["imagePullPolicy"])
	}
	wantArgs := []string{
		"--leader-elect=false",
		"--extensions=false",
		"--metrics-bind-address=:8443",
		"--metrics-secure",
		"--health-probe-bind-address=:8081",
		"--webhook-port=9443",
		"--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--operator-service-account=system:serviceaccount:$(POD_NAMESPACE):$(SERVICE_ACCOUNT)",
		"--cluster-domain=corp.local",
		"--kube-api-qps=50",
		"--kube-api-burst=100",
		"--sandbox-claim-concurrent-workers=8",
		"--cold-start-grace=3s",
		"--claim-reservation-ttl=90s",
		"--platform-groups=platform,sre",
		"--claim-allowed-annotation-domains=sandbox.users.io,acme.example",
		"--restamp=false",
		"--zap-log-level=debug",
	}
	if diff := cmp.Diff(wantArgs, managerArgs(t, objs)); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	tmpl, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "metadata")
	if diff := cmp.Diff(map[string]any{
		"labels":      map[string]any{"app.kubernetes.io/name": "sandgate", "control-plane": "controller-manager", "team": "platform"},
		"annotations": map[string]any{"kubectl.kubernetes.io/default-container": "manager", "example.com/scrape": "no"},
	}, tmpl); diff != "" {
		t.Errorf("pod template metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"requests": map[string]any{"cpu": "1", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}}, c["resources"]); diff != "" {
		t.Errorf("resources merge over the defaults (-want +got):\n%s", diff)
	}
	if got, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "spec", "nodeSelector"); got["pool"] != "system" {
		t.Errorf("nodeSelector %v, want pool=system", got)
	}
	cert := only(t, objs, "Certificate", "sandgate-serving-cert")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := "sandgate-webhook-service.sandgate-system.svc.corp.local"; !slices.Contains(dns, want) {
		t.Errorf("serving certificate names %v, want %s with clusterDomain corp.local", dns, want)
	}
}

// values.schema.json refuses what would otherwise be ignored without a word: a misspelt flag
// or toggle, a value of the wrong type.
func TestSchemaRefusesUnknownAndMistypedValues(t *testing.T) {
	cases := map[string]struct {
		values map[string]any
		want   string
	}{
		"misspelt flag":      {values: map[string]any{"controller": map[string]any{"kubeApiQPS": 50}}, want: "kubeApiQPS"},
		"misspelt toggle":    {values: map[string]any{"v1alpha1": map[string]any{"enable": false}}, want: "enable"},
		"replicas as string": {values: map[string]any{"replicaCount": "two"}, want: "replicaCount"},
		"objective over 1":   {values: map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"claimLatencySLO": map[string]any{"objective": 99}}}}, want: "objective"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := RenderChart(root(t), tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want a schema error naming %s", err, tc.want)
			}
		})
	}
}

// A budget of one with one replica would block every drain of its node forever.
func TestNoDisruptionBudgetForASingleReplica(t *testing.T) {
	if got := Find(renderChart(t, map[string]any{"replicaCount": 1}), "PodDisruptionBudget"); len(got) != 0 {
		t.Errorf("replicaCount 1 renders %d PodDisruptionBudgets, want none", len(got))
	}
	if got := Find(renderChart(t, nil), "PodDisruptionBudget"); len(got) != 1 {
		t.Errorf("the default two replicas render %d PodDisruptionBudgets, want one", len(got))
	}
}

// With another prefix and namespace every reference still meets its object: the webhooks and
// the conversion call the webhook Service, the certificate is for its names and its CA is
// injected everywhere, the bindings and the flow schema name the service account the pods run
// as, and nothing is left in sandgate-system or named sandgate-.
func TestReferencesFollowTheNameAndNamespace(t *testing.T) {
	objs := renderChart(t, map[string]any{
		"fullnameOverride": "gate",
		"namespace":        map[string]any{"create": false, "name": ""},
	})
	const ns = "default" // the release's namespace, namespace.name being empty
	if got := Find(objs, "Namespace"); len(got) != 0 {
		t.Errorf("namespace.create=false renders %d Namespaces", len(got))
	}
	for _, o := range objs {
		if strings.HasPrefix(o.GetName(), "sandgate-") || o.GetNamespace() == "sandgate-system" {
			t.Errorf("%s keeps the default name or namespace", Key(o))
		}
		if !slices.Contains(clusterScoped, o.GetKind()) && o.GetNamespace() != ns {
			t.Errorf("%s is not in namespace %s", Key(o), ns)
		}
	}
	svc := only(t, objs, "Service", "gate-webhook-service")
	cert := only(t, objs, "Certificate", "gate-serving-cert")
	injectFrom := ns + "/gate-serving-cert"
	wantRef := map[string]any{"name": svc.GetName(), "namespace": ns}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		cfg := only(t, objs, kind)
		if got := cfg.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != injectFrom {
			t.Errorf("%s: inject-ca-from %q, want %q", Key(cfg), got, injectFrom)
		}
		for _, wh := range webhooks(t, cfg) {
			ref := wh["clientConfig"].(map[string]any)["service"].(map[string]any)
			if ref["name"] != wantRef["name"] || ref["namespace"] != wantRef["namespace"] {
				t.Errorf("%s webhook %s calls %v, want %v", Key(cfg), wh["name"], ref, wantRef)
			}
		}
	}
	for _, crd := range ConvertedCRDs(objs) {
		ref, _, _ := unstructured.NestedStringMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
		if ref["name"] != svc.GetName() || ref["namespace"] != ns || ref["path"] != "/convert" {
			t.Errorf("%s converts through %v", Key(crd), ref)
		}
		if got := crd.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != injectFrom {
			t.Errorf("%s: inject-ca-from %q, want %q", Key(crd), got, injectFrom)
		}
	}
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if diff := cmp.Diff([]string{"gate-webhook-service." + ns + ".svc", "gate-webhook-service." + ns + ".svc.cluster.local"}, dns); diff != "" {
		t.Errorf("serving certificate names (-want +got):\n%s", diff)
	}
	dep := only(t, objs, "Deployment")
	sa, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "serviceAccountName")
	only(t, objs, "ServiceAccount", sa)
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range Find(objs, kind) {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			s := subjects[0].(map[string]any)
			if s["name"] != sa || s["namespace"] != ns {
				t.Errorf("%s binds %v, want service account %s/%s", Key(b), s, ns, sa)
			}
			role, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
			roleKind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
			only(t, objs, roleKind, role)
		}
	}
	fs := only(t, objs, "FlowSchema")
	rules, _, _ := unstructured.NestedSlice(fs.Object, "spec", "rules")
	subject := rules[0].(map[string]any)["subjects"].([]any)[0].(map[string]any)["serviceAccount"].(map[string]any)
	if subject["name"] != sa || subject["namespace"] != ns {
		t.Errorf("the FlowSchema matches %v, want %s/%s", subject, ns, sa)
	}
	level, _, _ := unstructured.NestedString(fs.Object, "spec", "priorityLevelConfiguration", "name")
	only(t, objs, "PriorityLevelConfiguration", level)
}

// `helm package` follows the links in files/ into config/: the packaged chart renders the
// same objects as the chart's directory.
func TestPackagedChartRendersTheSame(t *testing.T) {
	pkg := action.NewPackage()
	pkg.Destination = t.TempDir()
	archive, err := pkg.Run(filepath.Join(root(t), ChartPath), nil)
	if err != nil {
		t.Fatalf("helm package: %v", err)
	}
	packaged, err := RenderChartAt(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectSameObjects(t, renderChart(t, nil), packaged, "the chart's directory", "the packaged chart")
}

// Helm's own linter, strict, finds nothing to warn about.
func TestChartLints(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{filepath.Join(root(t), ChartPath)}, nil)
	for _, e := range res.Errors {
		t.Errorf("helm lint: %v", e)
	}
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// only returns the one object of kind (and name, if given) among objs.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string, name ...string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range Find(objs, kind) {
		if len(name) == 0 || o.GetName() == name[0] {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %v, got %d", kind, name, len(found))
	}
	return found[0]
}

func metricsService(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return only(t, objs, "Service", "sandgate-controller-manager-metrics")
}

func container(t *testing.T, dep *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", Key(dep), len(cs))
	}
	return cs[0].(map[string]any)
}

func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var args []string
	for _, a := range container(t, only(t, objs, "Deployment"))["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

func webhooks(t *testing.T, cfg *unstructured.Unstructured) []map[string]any {
	t.Helper()
	list, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	if len(list) == 0 {
		t.Fatalf("%s has no webhooks", Key(cfg))
	}
	out := make([]map[string]any, 0, len(list))
	for _, w := range list {
		out = append(out, w.(map[string]any))
	}
	return out
}
