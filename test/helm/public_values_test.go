package helmchart

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A values file written for the public agent-sandbox chart installs sandgate's chart: each of
// the public chart's values is either honoured (rendered as the same flag, or into the same
// field of the same object) or accepted with a warning in NOTES.txt; none is refused by the
// schema. The public chart is read from the module the SDK suite depends on (test/sdk/go.mod),
// never copied here, so that moving the SDK suite to a newer public release checks its chart.

// publicValue says what sandgate's chart does with one value of the public chart.
type publicValue struct {
	// flag is the manager's flag the value renders as (--flag=value), the public chart's own.
	flag string
	// check asserts the value reached the objects (for values that are not flags).
	check func(t *testing.T, objs []*unstructured.Unstructured, v any)
	// warned: NOTES.txt names the value as accepted but not honoured, whenever it is set
	// (warnedIf narrows that to some values).
	warned   bool
	warnedIf func(v any) bool
	// unlisted sets the values v0.5.6's values.yaml does not list: those of the public chart's
	// v1.0, and nameOverride, which v0.5.6's templates read.
	unlisted any
}

// publicValues is every value of the public chart, v0.5.6 (values.yaml and what its templates
// read) and v1.0 (its README's table), keyed by path. A map-valued entry (podAnnotations, ...)
// covers the whole map. docs/helm.md has the same table for people.
var publicValues = map[string]publicValue{
	"namespace.create": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		if got := len(Find(objs, "Namespace")) == 1; got != v.(bool) {
			t.Errorf("namespace.create=%v renders a Namespace: %v", v, got)
		}
	}},
	"namespace.name": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		if got := only(t, objs, "Deployment").GetNamespace(); got != v {
			t.Errorf("the manager runs in namespace %q, want %q", got, v)
		}
	}},
	"image.repository": {warnedIf: isPublicImage, check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		want := v.(string) + ":"
		if isPublicImage(v) {
			want = defaultImageRepository(t) + ":"
		}
		if got := container(t, only(t, objs, "Deployment"))["image"].(string); !strings.HasPrefix(got, want) {
			t.Errorf("image %s, want %s...", got, want)
		}
	}},
	"image.tag": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		// With the public controller's repository the tag is a public release's: the image
		// is sandgate's own, at the chart's appVersion (image.repository checks and warns).
		img := container(t, only(t, objs, "Deployment"))["image"].(string)
		if !strings.HasSuffix(img, ":"+v.(string)) && !strings.HasPrefix(img, defaultImageRepository(t)+":") {
			t.Errorf("image %s, want tag %s or sandgate's own image", img, v)
		}
	}},
	"image.pullPolicy": {check: containerField("imagePullPolicy")},
	"imagePullSecrets": {check: podSpecField("imagePullSecrets")},
	"replicaCount": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		if got, _, _ := unstructured.NestedFieldNoCopy(only(t, objs, "Deployment").Object, "spec", "replicas"); !sameNumber(got, v) {
			t.Errorf("replicas %v, want %v", got, v)
		}
	}},
	"podAnnotations": {check: podTemplateField("metadata", "annotations")},
	"podLabels":      {check: podTemplateField("metadata", "labels")},
	"nameOverride":   {warned: true, unlisted: "agent-sandbox"},

	"controller.leaderElect":                                 {flag: "leader-elect"},
	"controller.extensions":                                  {flag: "extensions"},
	"controller.clusterDomain":                               {flag: "cluster-domain"},
	"controller.leaderElectionNamespace":                     {flag: "leader-election-namespace"},
	"controller.enableTracing":                               {flag: "enable-tracing"},
	"controller.enablePprof":                                 {flag: "enable-pprof"},
	"controller.enablePprofDebug":                            {flag: "enable-pprof-debug"},
	"controller.pprofBlockProfileRate":                       {flag: "pprof-block-profile-rate"},
	"controller.pprofMutexProfileFraction":                   {flag: "pprof-mutex-profile-fraction"},
	"controller.kubeApiQps":                                  {flag: "kube-api-qps"},
	"controller.kubeApiBurst":                                {flag: "kube-api-burst"},
	"controller.sandboxConcurrentWorkers":                    {flag: "sandbox-concurrent-workers"},
	"controller.sandboxClaimConcurrentWorkers":               {flag: "sandbox-claim-concurrent-workers"},
	"controller.sandboxWarmPoolConcurrentWorkers":            {flag: "sandbox-warm-pool-concurrent-workers"},
	"controller.sandboxTemplateConcurrentWorkers":            {flag: "sandbox-template-concurrent-workers"},
	"controller.sandboxWarmPoolMaxBatchSize":                 {flag: "sandbox-warm-pool-max-batch-size"},
	"controller.sandboxWarmPoolReadinessGracePeriod":         {flag: "sandbox-warm-pool-readiness-grace-period"},
	"controller.sandboxWarmPoolUnschedulableRecheckInterval": {flag: "sandbox-warm-pool-unschedulable-recheck-interval"},
	"controller.enableWarmPoolEviction":                      {flag: "enable-warm-pool-eviction"},
	"controller.extraArgs": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		args := managerArgs(t, objs)
		var want []string
		for _, a := range v.([]any) {
			want = append(want, a.(string))
		}
		if got := args[len(args)-len(want):]; !slices.Equal(got, want) {
			t.Errorf("the last args %v, want extraArgs %v", got, want)
		}
	}},
	"controller.apiConnections":                       {flag: "api-connections", unlisted: 4},
	"controller.separateWatchConnection":              {flag: "separate-watch-connection", unlisted: true},
	"controller.cacheLabelSelectors":                  {flag: "cache-label-selectors", unlisted: true},
	"controller.disableSandboxEvents":                 {flag: "disable-sandbox-events", unlisted: true},
	"controller.disableClaimEvents":                   {flag: "disable-claim-events", unlisted: true},
	"controller.sandboxWarmPoolReplenishDelay":        {flag: "sandbox-warm-pool-replenish-delay", unlisted: "2s"},
	"controller.sandboxWarmPoolMaxRefillRate":         {flag: "sandbox-warm-pool-max-refill-rate", unlisted: 2.5},
	"controller.sandboxWriteBehindWindow":             {flag: "sandbox-write-behind-window", unlisted: "50ms", warnedIf: nonZeroDuration},
	"controller.disableClaimObservabilityAnnotations": {flag: "disable-claim-observability-annotations", unlisted: true, warnedIf: isTrue},

	"resources":    {check: containerField("resources")},
	"nodeSelector": {check: podSpecField("nodeSelector")},
	"tolerations":  {check: podSpecField("tolerations")},
	"affinity":     {check: podSpecField("affinity")},
	// null, the public default, is warned about by the render of the public values.yaml as
	// it is (TestPublicChartDefaultsInstall); an object is honoured.
	"podSecurityContext":       {check: podSpecField("securityContext")},
	"containerSecurityContext": {check: containerField("securityContext")},
	"webhookServiceName": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		only(t, objs, "Service", v.(string))
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			for _, w := range webhooks(t, only(t, objs, kind)) {
				if got, _, _ := unstructured.NestedString(w, "clientConfig", "service", "name"); got != v {
					t.Errorf("%s %s calls Service %s, want %s", kind, w["name"], got, v)
				}
			}
		}
	}},
	"service.name": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		only(t, objs, "Service", v.(string))
	}},
	"metrics.serviceMonitor.enabled": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		if got := len(Find(objs, "ServiceMonitor")) == 1; got != v.(bool) {
			t.Errorf("metrics.serviceMonitor.enabled=%v renders a ServiceMonitor: %v", v, got)
		}
	}},
	"metrics.serviceMonitor.additionalLabels": {check: monitoringLabels("ServiceMonitor")},
	"metrics.serviceMonitor.interval": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		expectEndpointField(t, objs, "interval", v)
	}},
	"metrics.serviceMonitor.scrapeTimeout": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		expectEndpointField(t, objs, "scrapeTimeout", v)
	}},
	"metrics.prometheusRule.enabled": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		if got := len(Find(objs, "PrometheusRule")) == 1; got != v.(bool) {
			t.Errorf("metrics.prometheusRule.enabled=%v renders a PrometheusRule: %v", v, got)
		}
	}},
	"metrics.prometheusRule.additionalLabels": {check: monitoringLabels("PrometheusRule")},
	"metrics.prometheusRule.additionalGroups": {check: func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		groups, _, _ := unstructured.NestedSlice(only(t, objs, "PrometheusRule").Object, "spec", "groups")
		for _, g := range v.([]any) {
			if !slices.ContainsFunc(groups, func(got any) bool { return cmp.Equal(normalizeNumbers(got), normalizeNumbers(g)) }) {
				t.Errorf("PrometheusRule groups lack additional group %v", g)
			}
		}
	}},
}

// publicOverrides are set over the public values.yaml in every render: what a user of the
// public chart must set (its image.tag is required), and what makes the monitoring values
// show (their objects render only when enabled) and the scheduling values tell (empty maps
// would prove nothing).
var publicOverrides = map[string]any{
	"image": map[string]any{"tag": "v0.5.6"},
	"controller": map[string]any{
		"extraArgs": []any{"--zap-log-level=debug"},
	},
	"nodeSelector": map[string]any{"pool": "system"},
	"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}},
	"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}}}}},
	}}},
	"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kube-prometheus-stack"}, "scrapeTimeout": "10s"},
		"prometheusRule": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kube-prometheus-stack"}, "additionalGroups": []any{
			map[string]any{"name": "extra", "rules": []any{map[string]any{"alert": "Extra", "expr": "vector(1) > 2"}}},
		}},
	},
}

// The public chart's values.yaml with every commented option set, its v1.0 values added,
// installs sandgate's chart: every value lands as the same flag or field, and exactly the
// values sandgate does not honour are warned about in NOTES.txt.
func TestPublicChartValuesInstall(t *testing.T) {
	chart := publicChart(t)
	values := uncommentOptions(t, readFile(t, filepath.Join(chart, "values.yaml")))
	for path, pv := range publicValues {
		if pv.unlisted != nil {
			if _, ok := lookup(values, path); ok {
				t.Errorf("%s is in the public values.yaml: give it no unlisted value", path)
			}
			set(values, path, pv.unlisted)
		}
	}
	merge(values, publicOverrides)
	objs, notes := renderWithNotes(t, values)

	paths := valuePaths(values, "")
	for _, path := range paths {
		if _, ok := publicValues[path]; !ok {
			t.Errorf("public value %s has no entry in publicValues (and in docs/helm.md): map it, warn about it or refuse it", path)
		}
	}
	publicFlags := publicChartFlags(t, chart)
	documented := string(readFile(t, filepath.Join(root(t), "docs", "flags.md")))
	args := managerArgs(t, objs)
	var wantWarned []string
	for path, pv := range publicValues {
		v, ok := lookup(values, path)
		if !ok {
			t.Errorf("%s is not set: uncommenting the public values.yaml missed it", path)
			continue
		}
		if pv.warned || (pv.warnedIf != nil && pv.warnedIf(v)) {
			wantWarned = append(wantWarned, path)
		}
		if pv.check != nil {
			pv.check(t, objs, v)
		}
		if pv.flag == "" {
			continue
		}
		name := strings.TrimPrefix(path, "controller.")
		if f, ok := publicFlags[name]; ok && f != pv.flag {
			t.Errorf("the public chart renders %s as --%s, publicValues says --%s", path, f, pv.flag)
		}
		if !strings.Contains(documented, "`--"+pv.flag+"`") {
			t.Errorf("--%s (%s) is not in docs/flags.md", pv.flag, path)
		}
		want := "--" + pv.flag + "=" + flagValue(v)
		n := count(args, want)
		if v == true { // leaderElect and extensions as config/manager writes them
			n += count(args, "--"+pv.flag)
		}
		if n != 1 {
			t.Errorf("%s: %q appears %d times in the manager's args %v, want once", path, want, n, args)
		}
	}
	for name := range publicFlags {
		if _, ok := publicValues["controller."+name]; !ok {
			t.Errorf("the public chart renders controller.%s as a flag; publicValues lacks it", name)
		}
	}
	expectWarnings(t, notes, wantWarned)
}

// The public values.yaml as it is (its required image.tag set) installs too: its null
// security contexts keep the restricted ones the namespace enforces, and its image is replaced
// by sandgate's; NOTES.txt says both.
func TestPublicChartDefaultsInstall(t *testing.T) {
	objs, notes := renderWithNotes(t, publicValuesAsShipped(t))
	defaults := renderChart(t, nil)

	dep, want := only(t, objs, "Deployment"), only(t, defaults, "Deployment")
	podSecurityContext := []string{"spec", "template", "spec", "securityContext"}
	got, _, _ := unstructured.NestedFieldNoCopy(dep.Object, podSecurityContext...)
	w, _, _ := unstructured.NestedFieldNoCopy(want.Object, podSecurityContext...)
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("pod securityContext with the public null (-default +got):\n%s", diff)
	}
	if diff := cmp.Diff(container(t, want)["securityContext"], container(t, dep)["securityContext"]); diff != "" {
		t.Errorf("container securityContext with the public null (-default +got):\n%s", diff)
	}
	if got, w := container(t, dep)["image"], container(t, want)["image"]; got != w {
		t.Errorf("image %v with the public controller's, want sandgate's %v", got, w)
	}
	expectWarnings(t, notes, []string{"containerSecurityContext", "image.repository", "podSecurityContext"})
	if !strings.Contains(notes, "image.tag v0.5.6 is ignored") {
		t.Errorf("NOTES does not say the public image's tag is ignored:\n%s", notes)
	}
}

// sandgate's own values warn about nothing.
func TestDefaultValuesWarnAboutNothing(t *testing.T) {
	_, notes := renderWithNotes(t, nil)
	expectWarnings(t, notes, nil)
	_, notes = renderWithNotes(t, map[string]any{"controller": map[string]any{
		"sandboxWriteBehindWindow": "0s", "disableClaimObservabilityAnnotations": false,
	}})
	expectWarnings(t, notes, nil)
}

// Without leader election every replica reconciles: the public chart's one replica makes
// leaderElect=false harmless, this chart's two would write at once, so the chart refuses it.
func TestLeaderElectionOffNeedsOneReplica(t *testing.T) {
	_, err := RenderChart(root(t), map[string]any{"controller": map[string]any{"leaderElect": false}})
	if err == nil || !strings.Contains(err.Error(), "controller.leaderElect=false with replicaCount=2") {
		t.Errorf("err %v, want the chart to refuse leaderElect=false with two replicas", err)
	}
	if _, err := RenderChart(root(t), map[string]any{"replicaCount": 1, "controller": map[string]any{"leaderElect": false}}); err != nil {
		t.Errorf("leaderElect=false with one replica: %v", err)
	}
}

func renderWithNotes(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, string) {
	t.Helper()
	objs, notes, err := RenderChartWithNotes(filepath.Join(root(t), ChartPath), values)
	if err != nil {
		t.Fatal(err)
	}
	return objs, notes
}

// warningLine is how NOTES.txt lists a public value it does not honour.
var warningLine = regexp.MustCompile(`(?m)^- ([A-Za-z][A-Za-z0-9.]*): `)

func expectWarnings(t *testing.T, notes string, want []string) {
	t.Helper()
	var got []string
	for _, m := range warningLine.FindAllStringSubmatch(notes, -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values NOTES warns about (-want +got):\n%s\nNOTES:\n%s", diff, notes)
	}
}

// flagValue prints a value as the flag's argument: integers as integers (values files give
// every number as a float64).
func flagValue(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func isPublicImage(v any) bool {
	s, _ := v.(string)
	return s == "agent-sandbox-controller" || strings.HasSuffix(s, "/agent-sandbox-controller")
}

func isTrue(v any) bool { b, _ := v.(bool); return b }

func nonZeroDuration(v any) bool {
	return !regexp.MustCompile(`^(0+(\.0*)?(ns|us|µs|ms|s|m|h)?)+$`).MatchString(fmt.Sprint(v))
}

func defaultImageRepository(t *testing.T) string {
	t.Helper()
	var values struct {
		Image struct{ Repository string }
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(root(t), ChartPath, "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	return values.Image.Repository
}

// normalizeNumbers makes numbers comparable across a values file (float64) and a decoded
// object (int64).
func normalizeNumbers(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func sameNumber(a, b any) bool { return cmp.Equal(normalizeNumbers(a), normalizeNumbers(b)) }

// contains says whether every leaf of want is in got at the same path (lists compared whole;
// both normalized): the chart merges values maps over its defaults, as Helm does.
func contains(got, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return cmp.Equal(got, want)
	}
	gm, _ := got.(map[string]any)
	for k, w := range wm {
		if !contains(gm[k], w) {
			return false
		}
	}
	return true
}

func expectContains(t *testing.T, what string, got, want any) {
	t.Helper()
	if want == nil || (isEmpty(want) && got == nil) {
		return
	}
	if !contains(normalizeNumbers(got), normalizeNumbers(want)) {
		t.Errorf("%s is %v, want it to hold %v", what, got, want)
	}
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	case string:
		return v == ""
	}
	return false
}

func containerField(field string) func(*testing.T, []*unstructured.Unstructured, any) {
	return func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		t.Helper()
		expectContains(t, "the manager container's "+field, container(t, only(t, objs, "Deployment"))[field], v)
	}
}

func podSpecField(field string) func(*testing.T, []*unstructured.Unstructured, any) {
	return podTemplateField("spec", field)
}

func podTemplateField(fields ...string) func(*testing.T, []*unstructured.Unstructured, any) {
	return func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		t.Helper()
		got, _, _ := unstructured.NestedFieldNoCopy(only(t, objs, "Deployment").Object, append([]string{"spec", "template"}, fields...)...)
		expectContains(t, "the pod template's "+strings.Join(fields, "."), got, v)
	}
}

func monitoringLabels(kind string) func(*testing.T, []*unstructured.Unstructured, any) {
	return func(t *testing.T, objs []*unstructured.Unstructured, v any) {
		t.Helper()
		expectContains(t, kind+" labels", only(t, objs, kind).GetLabels(), v)
	}
}

func expectEndpointField(t *testing.T, objs []*unstructured.Unstructured, field string, v any) {
	t.Helper()
	eps, _, _ := unstructured.NestedSlice(only(t, objs, "ServiceMonitor").Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(eps))
	}
	got, ok := eps[0].(map[string]any)[field]
	if v == "" {
		if ok {
			t.Errorf("ServiceMonitor endpoint %s %v, want it omitted", field, got)
		}
		return
	}
	if got != v {
		t.Errorf("ServiceMonitor endpoint %s %v, want %v", field, got, v)
	}
}
