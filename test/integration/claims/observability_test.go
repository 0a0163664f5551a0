//go:build integration

package claims_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// publicSeries is what a scraper sees of one of the public controller's series.
type publicSeries struct {
	Type    dto.MetricType
	Labels  []string
	Buckets []float64
}

var claimLatencyBuckets = []float64{100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000, 10000, 30000, 60000, 120000, 240000}

// publicMetricDefinitions are the seven series of the public controller, as defined in
// sigs.k8s.io/agent-sandbox v0.5.6 internal/metrics/metrics.go and sandbox_collector.go
// (label names sorted, as the exposition format orders them).
var publicMetricDefinitions = map[string]publicSeries{
	"agent_sandbox_claim_startup_latency_ms":            {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimLatencyBuckets},
	"agent_sandbox_claim_controller_startup_latency_ms": {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimLatencyBuckets},
	"agent_sandbox_client_claim_startup_latency_ms":     {dto.MetricType_HISTOGRAM, []string{"launch_type", "sandbox_template"}, claimLatencyBuckets},
	"agent_sandbox_creation_latency_ms": {dto.MetricType_HISTOGRAM, []string{"launch_type", "namespace", "sandbox_template"},
		[]float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 240000, 300000, 600000}},
	"agent_sandbox_claim_creation_total": {dto.MetricType_COUNTER, []string{"created_by", "launch_type", "namespace", "pod_condition", "sandbox_template", "warmpool_name"}, nil},
	"agent_sandboxes":                    {dto.MetricType_GAUGE, []string{"created_by", "expired", "launch_type", "namespace", "owned_by", "ready_condition", "sandbox_template"}, nil},
	"agent_sandbox_build_info":           {dto.MetricType_GAUGE, []string{"build_date", "compiler", "git_commit", "git_version", "go_version", "platform"}, nil},
}

// scrape reads the metrics endpoint at addr.
func scrape(g Gomega, addr string) map[string]*dto.MetricFamily {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// sample finds the series of fam with exactly these label values (nil when none).
func sample(fam *dto.MetricFamily, labels map[string]string) *dto.Metric {
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if cmp.Equal(got, labels) {
			return m
		}
	}
	return nil
}

// listenAddr is an address on 127.0.0.1 reserved (controlplane.ReservePort) for the test to listen on.
func listenAddr(t *testing.T) string {
	t.Helper()
	port, err := controlplane.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// TestPublicMetricsScraped: after a warm and a cold claim, the metrics endpoint serves every
// series of the public controller with its name, type, label names and buckets, fed with
// the label values the public controller gives them.
func TestPublicMetricsScraped(t *testing.T) {
	addr := listenAddr(t)
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) {
		// The endpoint serves controller-runtime's registry: this is the one manager of the
		// process that registers there.
		o.MetricsRegistry = nil
		o.MetricsBindAddress = addr
	}
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.create(builders.MakePool("empty", e.ns, "tmpl").Replicas(0).Obj())
	e.waitPoolReady("pool", 1)

	requested := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	e.create(builders.MakeClaim("warm", e.ns, "pool").Label(agentsv1beta1.LabelCreatedBy, "go-client").
		Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, requested).Obj())
	_, warm := e.waitClaimReady("warm")
	e.g.Expect(warm.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm))
	e.create(builders.MakeClaim("cold", e.ns, "empty").Label(agentsv1beta1.LabelCreatedBy, "my-script").
		Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, requested).Obj())
	_, cold := e.waitClaimReady("cold")
	e.g.Expect(cold.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeCold))

	var families map[string]*dto.MetricFamily
	e.eventually(func(g Gomega) {
		families = scrape(g, addr)
		for name := range publicMetricDefinitions {
			g.Expect(families).To(HaveKey(name))
		}
		g.Expect(families["agent_sandbox_claim_startup_latency_ms"].GetMetric()).To(HaveLen(2))
	})
	for name, want := range publicMetricDefinitions {
		fam := families[name]
		for _, m := range fam.GetMetric() {
			got := publicSeries{Type: fam.GetType()}
			for _, l := range m.GetLabel() {
				got.Labels = append(got.Labels, l.GetName())
			}
			sort.Strings(got.Labels)
			for _, b := range m.GetHistogram().GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) { // the text format writes +Inf out; definitions leave it implied
					got.Buckets = append(got.Buckets, b.GetUpperBound())
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (-public +scraped):\n%s", name, diff)
			}
		}
	}

	ns := e.ns
	counter := func(labels map[string]string) float64 {
		m := sample(families["agent_sandbox_claim_creation_total"], labels)
		if m == nil {
			return 0
		}
		return m.GetCounter().GetValue()
	}
	e.g.Expect(counter(map[string]string{"namespace": ns, "sandbox_template": "tmpl", "launch_type": "warm",
		"warmpool_name": "pool", "pod_condition": "ready", "created_by": "go-client"})).To(Equal(1.0), "warm claim counted")
	e.g.Expect(counter(map[string]string{"namespace": ns, "sandbox_template": "tmpl", "launch_type": "cold",
		"warmpool_name": "empty", "pod_condition": "not_ready", "created_by": "unknown"})).To(Equal(1.0), "cold claim counted")

	for _, name := range []string{"agent_sandbox_claim_startup_latency_ms", "agent_sandbox_claim_controller_startup_latency_ms", "agent_sandbox_client_claim_startup_latency_ms"} {
		for _, launch := range []string{"warm", "cold"} {
			m := sample(families[name], map[string]string{"launch_type": launch, "sandbox_template": "tmpl"})
			e.g.Expect(m).NotTo(BeNil(), "%s{launch_type=%s}", name, launch)
			e.g.Expect(m.GetHistogram().GetSampleCount()).To(Equal(uint64(1)), "%s{launch_type=%s}", name, launch)
		}
	}
	client := sample(families["agent_sandbox_client_claim_startup_latency_ms"], map[string]string{"launch_type": "warm", "sandbox_template": "tmpl"})
	e.g.Expect(client.GetHistogram().GetSampleSum()).To(BeNumerically(">=", 1000), "from the client's stamp a second before")
	for _, launch := range []string{"warm", "cold"} {
		m := sample(families["agent_sandbox_creation_latency_ms"], map[string]string{"namespace": ns, "launch_type": launch, "sandbox_template": "tmpl"})
		e.g.Expect(m).NotTo(BeNil(), "creation latency of the %s sandbox", launch)
		e.g.Expect(m.GetHistogram().GetSampleCount()).To(Equal(uint64(1)))
	}
	gauge := func(labels map[string]string) float64 {
		m := sample(families["agent_sandboxes"], labels)
		if m == nil {
			return 0
		}
		return m.GetGauge().GetValue()
	}
	e.g.Expect(gauge(map[string]string{"namespace": ns, "ready_condition": "true", "expired": "false", "launch_type": "warm",
		"sandbox_template": "tmpl", "owned_by": "SandboxClaim", "created_by": "go-client"})).To(Equal(1.0), "the warm claim's sandbox")
	e.g.Expect(gauge(map[string]string{"namespace": ns, "ready_condition": "true", "expired": "false", "launch_type": "cold",
		"sandbox_template": "tmpl", "owned_by": "SandboxClaim", "created_by": "unknown"})).To(Equal(1.0), "the cold claim's sandbox")
	bi := families["agent_sandbox_build_info"].GetMetric()
	e.g.Expect(bi).To(HaveLen(1))
	e.g.Expect(bi[0].GetGauge().GetValue()).To(Equal(1.0))
	checkInvariants(e.g, e)
}

// TestClaimTraceContinuesTheClients: a claim created with the SDK's trace context gets its
// admission, bind, the binding guard's admission of the bind, and its Ready recorded as
// spans of the client's trace.
func TestClaimTraceContinuesTheClients(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) {
		o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	}
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.waitPoolReady("pool", 1)

	// The client: the SDK starts a span and writes its context on the claim it creates.
	clientTP := sdktrace.NewTracerProvider()
	ctx, clientSpan := clientTP.Tracer("client").Start(context.Background(), "create_claim")
	annotation := tracing.New(clientTP).Inject(ctx)
	clientSpan.End()
	e.create(builders.MakeClaim("traced", e.ns, "pool").Annotation(tracing.Annotation, annotation).Obj())
	_, sb := e.waitClaimReady("traced")

	client := clientSpan.SpanContext()
	names := map[trace.SpanID]string{client.SpanID(): "client:create_claim"}
	var spans []sdktrace.ReadOnlySpan
	e.eventually(func(g Gomega) {
		spans = nil
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == client.TraceID() {
				spans = append(spans, s)
			}
		}
		var got []string
		for _, s := range spans {
			got = append(got, s.Name())
		}
		g.Expect(got).To(ContainElements(tracing.SpanClaimAdmission, tracing.SpanBind, tracing.SpanSandboxAdmission, tracing.SpanReady))
	})
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		names[s.SpanContext().SpanID()] = s.Name()
		byName[s.Name()] = s
	}
	var lines []string
	for _, s := range spans {
		lines = append(lines, fmt.Sprintf("%s (span %s) <- parent %s", s.Name(), s.SpanContext().SpanID(), names[s.Parent().SpanID()]))
	}
	slices.Sort(lines)
	t.Logf("trace %s:\n  %s", client.TraceID(), strings.Join(lines, "\n  "))

	wantParent := map[string]string{
		tracing.SpanClaimAdmission:   "client:create_claim",
		tracing.SpanBind:             "client:create_claim",
		tracing.SpanSandboxAdmission: tracing.SpanBind,
		tracing.SpanReady:            "client:create_claim",
	}
	for child, parent := range wantParent {
		e.g.Expect(names[byName[child].Parent().SpanID()]).To(Equal(parent), "parent of %s", child)
	}
	e.g.Expect(byName[tracing.SpanBind].Attributes()).To(ContainElement(HaveField("Value.AsString()", sb.Name)))
	// The Sandbox carries the trace on, as the public controller's do.
	e.g.Expect(sb.Annotations).To(HaveKey(tracing.Annotation))
	checkInvariants(e.g, e)
}
