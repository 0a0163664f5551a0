package reconcilers

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// PublicSeries is the definition of one of the public controller's series
// (sigs.k8s.io/agent-sandbox v0.5.6 internal/metrics): what a scraper sees.
type publicSeries struct {
	typ     dto.MetricType
	labels  []string
	buckets []float64
}

var claimBuckets = []float64{100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000, 10000, 30000, 60000, 120000, 240000}

// publicDefinitions are the seven series of the public controller.
var publicDefinitions = map[string]publicSeries{
	MetricClaimStartupLatency:           {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimBuckets},
	MetricClaimControllerStartupLatency: {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimBuckets},
	MetricClientClaimStartupLatency:     {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimBuckets},
	MetricSandboxCreationLatency: {dto.MetricType_HISTOGRAM, []string{"launch_type", "namespace", "sandbox_template"},
		[]float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 240000, 300000, 600000}},
	MetricClaimCreationTotal: {dto.MetricType_COUNTER, []string{"created_by", "launch_type", "namespace", "pod_condition", "sandbox_template", "warmpool_name"}, nil},
	MetricSandboxes:          {dto.MetricType_GAUGE, []string{"created_by", "expired", "launch_type", "namespace", "owned_by", "ready_condition", "sandbox_template"}, nil},
	MetricBuildInfo:          {dto.MetricType_GAUGE, []string{"build_date", "compiler", "git_commit", "git_version", "go_version", "platform"}, nil},
}

// seriesOf is what a scrape of families shows of the public series: their definitions.
func seriesOf(t *testing.T, families []*dto.MetricFamily) map[string]publicSeries {
	t.Helper()
	got := map[string]publicSeries{}
	for _, f := range families {
		if _, public := publicDefinitions[f.GetName()]; !public || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		s := publicSeries{typ: f.GetType()}
		for _, l := range m.GetLabel() {
			s.labels = append(s.labels, l.GetName())
		}
		for _, b := range m.GetHistogram().GetBucket() {
			s.buckets = append(s.buckets, b.GetUpperBound())
		}
		got[f.GetName()] = s
	}
	return got
}

var seriesCmp = cmp.AllowUnexported(publicSeries{})

func readySandbox(name string, created, ready time.Time) *agentsv1beta1.Sandbox {
	sb := builders.MakeSandbox(name, "ns").Annotation(agentsv1beta1.AnnotationSandboxTemplateRef, "tmpl").Obj()
	sb.CreationTimestamp = metav1.NewTime(created)
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: agentsv1beta1.ReasonDependenciesReady, LastTransitionTime: metav1.NewTime(ready)})
	return sb
}

// Every public series, once fed, has the public name, type, label names and buckets.
func TestPublicSeriesDefinitions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sb := readySandbox("sb", time.Unix(100, 0), time.Unix(101, 0))
	if err := reg.Register(NewSandboxCollector(newClientBuilder(t).WithObjects(sb).Build(), logr.Discard())); err != nil {
		t.Fatal(err)
	}
	claim := builders.MakeClaim("c", "ns", "pool").Created(time.Unix(99, 0)).
		Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, time.Unix(99, 0).Format(time.RFC3339Nano)).Obj()
	d := time.Second
	m.claimReady(agentsv1beta1.LaunchTypeWarm, "tmpl", &d, d)
	m.claimReadyPublic(claim, sb, agentsv1beta1.LaunchTypeWarm, "tmpl", time.Unix(102, 0))
	m.claimCreated(claim, "tmpl", agentsv1beta1.LaunchTypeWarm, PodConditionReady)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(publicDefinitions, seriesOf(t, families), seriesCmp); diff != "" {
		t.Errorf("public series (-want +got):\n%s", diff)
	}
}

// agent_sandbox_claim_creation_total counts warm bindings with the member's readiness and
// cold starts as not_ready, with the claim's namespace, pool and normalized creator.
func TestClaimCreationTotal(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	goClaim := builders.MakeClaim("a", "ns", "pool").Label(agentsv1beta1.LabelCreatedBy, "go-client").Obj()
	oddClaim := builders.MakeClaim("b", "ns", "pool").Label(agentsv1beta1.LabelCreatedBy, "curl").Obj()
	plain := builders.MakeClaim("c", "other", "p2").Obj()
	m.claimCreated(goClaim, "tmpl", agentsv1beta1.LaunchTypeWarm, servedPodCondition(readySandbox("m", time.Unix(1, 0), time.Unix(2, 0))))
	m.claimCreated(oddClaim, "tmpl", agentsv1beta1.LaunchTypeWarm, servedPodCondition(builders.MakeSandbox("m2", "ns").Obj()))
	m.claimCreated(plain, "t2", agentsv1beta1.LaunchTypeCold, PodConditionNotReady)
	m.claimCreated(plain, "t2", agentsv1beta1.LaunchTypeCold, PodConditionNotReady)
	for labels, want := range map[[6]string]float64{
		{"ns", "tmpl", "warm", "pool", "ready", "go-client"}:   1,
		{"ns", "tmpl", "warm", "pool", "not_ready", "unknown"}: 1,
		{"other", "t2", "cold", "p2", "not_ready", "unknown"}:  2,
	} {
		if got := testutil.ToFloat64(m.public.claimCreations.WithLabelValues(labels[:]...)); got != want {
			t.Errorf("%v = %v, want %v", labels, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.public.claimCreations); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}

// The client latency runs from the SDK's client-first-requested-at to Ready; the creation
// latency from the Sandbox's creation to its Ready transition. Unknown launch types and
// templates come from the Sandbox, as the public controller takes them. The client's
// annotation is the tenant's word: read only within MaxClaimTimestampSkew of the claim's
// creation, so that no claim adds a bogus observation to the platform's histogram.
func TestClaimReadyPublicLatencies(t *testing.T) {
	requested := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	now := requested.Add(1500 * time.Millisecond)
	sb := readySandbox("sb", requested.Add(200*time.Millisecond), requested.Add(1200*time.Millisecond))
	sb.Labels = map[string]string{agentsv1beta1.LabelLaunchType: agentsv1beta1.LaunchTypeWarm}
	for name, tc := range map[string]struct {
		annotation     string
		created        time.Time // the claim's creationTimestamp; zero is requested
		noCreation     bool
		sb             *agentsv1beta1.Sandbox
		launch, tmpl   string
		wantClient     map[[2]string]float64 // labels → sum
		wantCreation   map[[3]string]float64
		wantClientN    int
		wantCreationsN int
	}{
		"fed from the annotation and the sandbox": {
			annotation: requested.Format(time.RFC3339Nano), sb: sb, launch: agentsv1beta1.LaunchTypeCold, tmpl: "t",
			wantClient:   map[[2]string]float64{{"cold", "t"}: 1500},
			wantCreation: map[[3]string]float64{{"ns", "cold", "t"}: 1000},
			wantClientN:  1, wantCreationsN: 1,
		},
		"unknown launch and template from the sandbox": {
			annotation: requested.Format(time.RFC3339Nano), sb: sb, launch: LaunchTypeUnknown, tmpl: "",
			wantClient:   map[[2]string]float64{{"warm", "tmpl"}: 1500},
			wantCreation: map[[3]string]float64{{"ns", "warm", "tmpl"}: 1000},
			wantClientN:  1, wantCreationsN: 1,
		},
		"no sandbox in the cache": {
			annotation: requested.Format(time.RFC3339Nano), launch: LaunchTypeUnknown,
			wantClient:  map[[2]string]float64{{"unknown", "__unknown__"}: 1500},
			wantClientN: 1,
		},
		"no annotation":                  {sb: sb, launch: "warm", tmpl: "t", wantCreation: map[[3]string]float64{{"ns", "warm", "t"}: 1000}, wantCreationsN: 1},
		"unparsable annotation":          {annotation: "yesterday", launch: "warm", tmpl: "t"},
		"client clock ahead":             {annotation: now.Add(time.Second).Format(time.RFC3339Nano), launch: "warm", tmpl: "t"},
		"year 1, a 292-year observation": {annotation: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano), launch: "warm", tmpl: "t"},
		"more than the skew before the claim's creation": {
			annotation: requested.Add(-MaxClaimTimestampSkew - time.Millisecond).Format(time.RFC3339Nano), launch: "warm", tmpl: "t"},
		"within the skew before the claim's creation": {
			annotation: requested.Add(-30 * time.Second).Format(time.RFC3339Nano), launch: "warm", tmpl: "t",
			wantClient: map[[2]string]float64{{"warm", "t"}: 31500}, wantClientN: 1},
		"more than the skew after the claim's creation": {
			annotation: requested.Format(time.RFC3339Nano), created: requested.Add(-MaxClaimTimestampSkew - time.Second), launch: "warm", tmpl: "t"},
		"a claim without creationTimestamp is not measured": {annotation: requested.Format(time.RFC3339Nano), noCreation: true, launch: "warm", tmpl: "t"},
		"sandbox not ready": {
			annotation: requested.Format(time.RFC3339Nano), sb: builders.MakeSandbox("x", "ns").Obj(), launch: "cold", tmpl: "t",
			wantClient: map[[2]string]float64{{"cold", "t"}: 1500}, wantClientN: 1,
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			w := builders.MakeClaim("c", "ns", "pool")
			switch {
			case !tc.created.IsZero():
				w.Created(tc.created)
			case !tc.noCreation:
				w.Created(requested)
			}
			if tc.annotation != "" {
				w.Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, tc.annotation)
			}
			m.claimReadyPublic(w.Obj(), tc.sb, tc.launch, tc.tmpl, now)
			if n := testutil.CollectAndCount(m.public.clientStartup); n != tc.wantClientN {
				t.Errorf("client latency series = %d, want %d", n, tc.wantClientN)
			}
			if n := testutil.CollectAndCount(m.public.sandboxCreation); n != tc.wantCreationsN {
				t.Errorf("creation latency series = %d, want %d", n, tc.wantCreationsN)
			}
			for l, want := range tc.wantClient {
				if got := histSum(t, m.public.clientStartup.WithLabelValues(l[:]...)); got != want {
					t.Errorf("client latency %v = %v ms, want %v", l, got, want)
				}
			}
			for l, want := range tc.wantCreation {
				if got := histSum(t, m.public.sandboxCreation.WithLabelValues(l[:]...)); got != want {
					t.Errorf("creation latency %v = %v ms, want %v", l, got, want)
				}
			}
		})
	}
}

func histSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	pb := &dto.Metric{}
	if err := o.(prometheus.Histogram).Write(pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleSum()
}

// agent_sandboxes counts the cached Sandboxes by the public controller's labels.
func TestSandboxCollector(t *testing.T) {
	claim := builders.MakeClaim("c", "ns", "pool").UID("claim-uid").Obj()
	pool := builders.MakePool("pool", "ns", "tmpl").UID("pool-uid").Obj()
	expired := builders.MakeSandbox("expired", "ns").Obj()
	meta.SetStatusCondition(&expired.Status.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonSandboxExpired})
	ready := func(name string) *agentsv1beta1.Sandbox { return readySandbox(name, time.Unix(1, 0), time.Unix(2, 0)) }
	bound := ready("bound")
	bound.Labels = map[string]string{agentsv1beta1.LabelLaunchType: "warm", agentsv1beta1.LabelCreatedBy: "python-client"}
	bound.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind(claimKind))}
	member1, member2 := ready("m1"), ready("m2")
	for _, m := range []*agentsv1beta1.Sandbox{member1, member2} {
		m.Labels = map[string]string{agentsv1beta1.LabelCreatedBy: "someone"}
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind(warmPoolKind))}
	}
	c := newClientBuilder(t).WithObjects(expired, bound, member1, member2).Build()
	want := `
# HELP agent_sandboxes Monitor the point-in-time number of sandboxes in the cluster.
# TYPE agent_sandboxes gauge
agent_sandboxes{created_by="python-client",expired="false",launch_type="warm",namespace="ns",owned_by="SandboxClaim",ready_condition="true",sandbox_template="tmpl"} 1
agent_sandboxes{created_by="unknown",expired="false",launch_type="cold",namespace="ns",owned_by="SandboxWarmPool",ready_condition="true",sandbox_template="tmpl"} 2
agent_sandboxes{created_by="unknown",expired="true",launch_type="cold",namespace="ns",owned_by="None",ready_condition="false",sandbox_template="unknown"} 1
`
	if err := testutil.CollectAndCompare(NewSandboxCollector(c, logr.Discard()), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// agent_sandbox_build_info is 1, labelled with the build identity.
func TestBuildInfo(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.public.buildInfo); got != 1 {
		t.Errorf("agent_sandbox_build_info = %v, want 1", got)
	}
}
