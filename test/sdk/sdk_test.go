//go:build integration

package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	"sigs.k8s.io/agent-sandbox/sandbox-router/authz"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The SDK annotations sandgate reads.
const (
	annotationClientFirstRequestedAt = "agents.x-k8s.io/client-first-requested-at"
	annotationTraceContext           = "opentelemetry.io/trace-context"
)

// TestSDKWarmAndCold: the public SDK, unchanged, gets a sandbox from a warm pool and one
// cold from a template (a pool of none), runs a command and a file round trip through the
// public router on each, and deletes them. Each reply comes from the claim's own pod. The
// claims carry what the SDK sends: its first-request time and, under a span, its trace.
func TestSDKWarmAndCold(t *testing.T) {
	operatorSpans := tracetest.NewSpanRecorder()
	registry := prometheus.NewRegistry()
	e := setupWith(t, allowAll, func(o *operator.Options) {
		o.TracerProvider = trace.NewTracerProvider(trace.WithSpanProcessor(operatorSpans))
		o.MetricsRegistry = registry
	})
	e.pool("warm", 2)
	e.create(builders.MakeTemplate("cold", e.ns).Obj())
	e.create(builders.MakePool("cold", e.ns, "cold").Replicas(0).Obj())

	spans := tracetest.NewSpanRecorder()
	tp := trace.NewTracerProvider(trace.WithSpanProcessor(spans))
	tenantCfg, err := cluster.UserConfig("tenant", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	sdk := e.newSDKTraced(tenantCfg, tp)

	for _, tc := range []struct{ pool, launch string }{{"warm", agentsv1beta1.LaunchTypeWarm}, {"cold", agentsv1beta1.LaunchTypeCold}} {
		t.Run(tc.pool, func(t *testing.T) {
			e := e.sub(t)
			ctx, span := tp.Tracer("sdk-test").Start(context.Background(), "agent-task")
			defer span.End()
			sb, err := sdk.CreateSandbox(ctx, tc.pool, e.ns)
			if err != nil {
				t.Fatalf("CreateSandbox from pool %s: %v", tc.pool, err)
			}
			podName, sandboxName := sb.PodName(), sb.SandboxName()
			// CreateSandbox waits for the Sandbox's Ready; a cold claim reports Ready right
			// after its Sandbox does.
			var claim *extv1beta1.SandboxClaim
			e.poll(10*time.Second, func() (bool, error) {
				claim = e.claimOf(sb)
				return ready(claim.Status.Conditions), nil
			})
			if at, err := time.Parse(time.RFC3339Nano, claim.Annotations[annotationClientFirstRequestedAt]); err != nil || at.After(claim.CreationTimestamp.Add(time.Second)) {
				t.Errorf("claim annotation %s = %q: want the SDK's request time", annotationClientFirstRequestedAt, claim.Annotations[annotationClientFirstRequestedAt])
			}
			if tc := claim.Annotations[annotationTraceContext]; !strings.Contains(tc, span.SpanContext().TraceID().String()) {
				t.Errorf("claim annotation %s = %q: want the SDK's trace %s", annotationTraceContext, tc, span.SpanContext().TraceID())
			}
			got := &agentsv1beta1.Sandbox{}
			if err := e.admin.Get(ctx, clientKey(e.ns, sb.SandboxName()), got); err != nil {
				t.Fatal(err)
			}
			if got.Labels[agentsv1beta1.LabelLaunchType] != tc.launch {
				t.Errorf("Sandbox %s launch type %q, want %q", got.Name, got.Labels[agentsv1beta1.LabelLaunchType], tc.launch)
			}

			if tc.pool == "warm" {
				checkTrace(t, span, spans, operatorSpans)
			}
			// Observed when the claim is reported Ready, which for a cold start may follow
			// the Sandbox's Ready that CreateSandbox waited for.
			var n uint64
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if n = clientLatencyCount(t, registry, tc.launch); n > 0 || time.Now().After(deadline) {
					break
				}
			}
			if n != 1 {
				t.Errorf("%s{launch_type=%q} counts %d claims, want 1: the SDK's client-first-requested-at was not used",
					reconcilers.MetricClientClaimStartupLatency, tc.launch, n)
			}

			reply, err := run(ctx, sb)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if reply.ClaimUID != string(claim.UID) || reply.Pod != podName || reply.Namespace != e.ns {
				t.Errorf("Run reached %+v, want pod %s of claim %s", reply, podName, claim.UID)
			}

			data := []byte("written by " + t.Name())
			if err := sb.Write(ctx, "notes.txt", data); err != nil {
				t.Fatalf("Write: %v", err)
			}
			back, err := sb.Read(ctx, "notes.txt")
			if err != nil || !bytes.Equal(back, data) {
				t.Errorf("Read = %q, %v; want %q", back, err, data)
			}
			entries, err := sb.List(ctx, ".")
			if err != nil || len(entries) != 1 || entries[0].Name != "notes.txt" || entries[0].Size != int64(len(data)) {
				t.Errorf("List = %+v, %v; want notes.txt of %d bytes", entries, err, len(data))
			}
			if ok, err := sb.Exists(ctx, "notes.txt"); err != nil || !ok {
				t.Errorf("Exists(notes.txt) = %v, %v; want true", ok, err)
			}
			if ok, err := sb.Exists(ctx, "missing.txt"); err != nil || ok {
				t.Errorf("Exists(missing.txt) = %v, %v; want false", ok, err)
			}
			for _, r := range e.runtime.Requests() {
				if r.SandboxID == sb.SandboxName() && (r.Pod != podName || r.ClaimUID != string(claim.UID)) {
					t.Errorf("a request for %s reached pod %s (claim %q)", sb.SandboxName(), r.Pod, r.ClaimUID)
				}
			}

			podUID := podUIDOf(t, e, podName)
			if err := sdk.DeleteSandbox(ctx, sb.ClaimName(), e.ns); err != nil {
				t.Fatalf("DeleteSandbox: %v", err)
			}
			// The claim is gone; its Sandbox and pod follow, and the stand-in stops serving it.
			e.poll(framework.Timeout, func() (bool, error) {
				err := e.admin.Get(ctx, clientKey(e.ns, sandboxName), &agentsv1beta1.Sandbox{})
				return client.IgnoreNotFound(err) == nil && err != nil && !e.runtime.Listening(podUID), client.IgnoreNotFound(err)
			})
		})
	}
}

// TestSDKBurst: 100 SDK clients at once on a ready pool of 100, each running a command the
// moment CreateSandbox returns, through the router in its default mode and in scoped-token
// mode, where the router routes by namespace and name only. Every request reaches its own
// sandbox: the reply's claim UID is the claim's, no pod answers two claims, the router
// answers no 502 and retries nothing.
func TestSDKBurst(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode routerMode
	}{{"default", allowAll}, {"scoped-token", scopedToken}} {
		t.Run(mode.name, func(t *testing.T) {
			const n = 100
			e := setup(t, mode.mode)
			e.pool("pool", n)
			time.Sleep(framework.Quiet) // the pool's own writes settle

			type result struct {
				claim   string
				sandbox string
				reply   Reply
				took    time.Duration
				err     error
			}
			results := make([]result, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			// Each goroutine is a client of its own, as 100 agents are: its own SDK client,
			// Kubernetes connection and client-side rate limit.
			tenantCfg, err := cluster.UserConfig("tenant", "system:authenticated")
			if err != nil {
				t.Fatal(err)
			}
			clients := make([]*sandbox.Client, n)
			for i := range clients {
				clients[i] = e.newSDK(tenantCfg, mode.mode)
			}
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), 2*framework.Timeout)
					defer cancel()
					t0 := time.Now()
					sb, err := clients[i].CreateSandbox(ctx, "pool", e.ns)
					if err != nil {
						results[i].err = fmt.Errorf("CreateSandbox: %w", err)
						return
					}
					results[i].claim, results[i].sandbox = sb.ClaimName(), sb.SandboxName()

					reply, err := run(ctx, sb)
					results[i].took, results[i].reply, results[i].err = time.Since(t0), reply, err
				}()
			}
			close(start)
			wg.Wait()

			var took []time.Duration
			pods := map[string]string{}
			for _, r := range results {
				if r.err != nil {
					t.Errorf("claim %s (sandbox %s): %v (%s; the pod's route as watched: %v)", r.claim, r.sandbox, r.err,
						e.podRouteNow(r.sandbox), e.runtime.RouteHistory(e.ns, r.sandbox))
					continue
				}
				claim := &extv1beta1.SandboxClaim{}
				if err := e.admin.Get(context.Background(), clientKey(e.ns, r.claim), claim); err != nil {
					t.Fatal(err)
				}
				if r.reply.ClaimUID != string(claim.UID) || r.reply.Pod != r.sandbox {
					t.Errorf("claim %s (UID %s, sandbox %s) reached pod %s carrying claim %q", r.claim, claim.UID, r.sandbox, r.reply.Pod, r.reply.ClaimUID)
				}
				if other, dup := pods[r.reply.Pod]; dup {
					t.Errorf("pod %s answered claims %s and %s", r.reply.Pod, other, r.claim)
				}
				pods[r.reply.Pod] = r.claim
				took = append(took, r.took)
			}
			sum := stats.Summarize(took)
			t.Logf("%s: %d of %d SDK clients reached their own sandbox; CreateSandbox → first reply p50 %.0f ms, p99 %.0f ms, max %.0f ms",
				mode.name, sum.Count, n, sum.P50, sum.P99, sum.Max)
			// No SDK retry either: the stand-in saw exactly one execute per claim.
			executes := 0
			for _, r := range e.runtime.Requests() {
				if r.Path == "/execute" {
					executes++
				}
			}
			if executes != n {
				t.Errorf("the sandboxes served %d execute requests, want %d: one per client, none retried", executes, n)
			}
			for _, m := range []struct{ name, label string }{
				{"sandbox_router_requests_total", "code=502"},
				{"sandbox_router_upstream_retries_total", ""},
				{"sandbox_router_upstream_errors_total", ""},
			} {
				var match []string
				if m.label != "" {
					match = append(match, m.label)
				}
				v, err := e.router.Metric(m.name, match...)
				if err != nil {
					t.Fatal(err)
				}
				if v != 0 {
					t.Errorf("router %s{%s} = %v, want 0", m.name, m.label, v)
				}
			}
		})
	}
}

// TestRouterView: as the router sees the pods. A claimed pod is routable by its Sandbox's
// name the moment its claim reports Ready (checked for claims made in a burst, by a client
// that watches the claim, not the SDK); a warm member nobody claimed is not routable by
// name at all, even with a valid token for that name.
func TestRouterView(t *testing.T) {
	e := setup(t, scopedToken)
	const claims, spare = 20, 3
	e.pool("pool", claims+spare)
	time.Sleep(framework.Quiet)

	var wg sync.WaitGroup
	errs := make(chan error, claims)
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.claimAndRouteAtReady(fmt.Sprintf("c%d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	var list agentsv1beta1.SandboxList
	if err := e.admin.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	idle := 0
	for _, sb := range list.Items {
		if sb.Labels[agentsv1beta1.LabelClaimUID] != "" || sb.Labels[agentsv1beta1.LabelWarmPoolSandbox] == "" {
			continue
		}
		idle++
		code, body, err := e.routeByName(sb.Name)
		if err != nil {
			t.Fatal(err)
		}
		if code/100 == 2 {
			t.Errorf("unclaimed member %s answered by name through the router: %d %s", sb.Name, code, body)
		}
		for _, r := range e.runtime.Requests() {
			if r.Pod == sb.Name {
				t.Errorf("a request reached unclaimed member %s: %+v", sb.Name, r)
			}
		}
	}
	if idle == 0 {
		t.Fatal("no unclaimed member left to check")
	}
}

// claimAndRouteAtReady creates a claim as the tenant, watches it until Ready, and at once sends
// a request by the Sandbox's name through the router: it must reach that claim's pod.
func (e *env) claimAndRouteAtReady(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), framework.Timeout)
	defer cancel()
	claim := builders.MakeClaim(name, e.ns, "pool").Obj()
	if err := e.tenant.Create(ctx, claim); err != nil {
		return err
	}
	w, err := e.tenant.Watch(ctx, &extv1beta1.SandboxClaimList{}, client.InNamespace(e.ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		c, ok := ev.Object.(*extv1beta1.SandboxClaim)
		if !ok || !ready(c.Status.Conditions) {
			continue
		}
		readyAt := time.Now()
		code, body, err := e.routeByName(c.Status.Sandbox.Name)
		if err != nil {
			return err
		}
		var res sandbox.ExecutionResult
		var reply Reply
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil || json.Unmarshal([]byte(res.Stdout), &reply) != nil {
			return fmt.Errorf("claim %s Ready (rv %s, seen %s), its Sandbox %s not routable by name: %d %s (%s; the pod's route as watched: %v)",
				name, c.ResourceVersion, readyAt.Format("15:04:05.000"), c.Status.Sandbox.Name, code, body,
				e.podRouteNow(c.Status.Sandbox.Name), e.runtime.RouteHistory(e.ns, c.Status.Sandbox.Name))
		}
		if reply.ClaimUID != string(c.UID) {
			return fmt.Errorf("claim %s (UID %s) reached pod %s carrying claim %q", name, c.UID, reply.Pod, reply.ClaimUID)
		}
		return nil
	}
	return fmt.Errorf("claim %s: watch ended before it was Ready", name)
}

// routeByName sends an execute request for the Sandbox name through the router as a client
// holding a valid scoped token for that name, with no pod IP: name routing only.
func (e *env) routeByName(name string) (int, []byte, error) {
	token, err := authz.MintScopedToken(e.secret, e.ns, name, time.Minute)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, e.router.URL+"/execute", strings.NewReader(`{"command":"hostname"}`))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sandbox-Id", name)
	req.Header.Set("X-Sandbox-Namespace", e.ns)
	req.Header.Set("X-Sandbox-Port", fmt.Sprint(runtimePort))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// podRouteNow says what the API server holds of the pod's route right now, so that a failed
// request tells a route the operator never wrote or undid from one the router has not seen yet.
func (e *env) podRouteNow(name string) string {
	pod := &corev1.Pod{}
	if err := e.admin.Get(context.Background(), clientKey(e.ns, name), pod); err != nil {
		return fmt.Sprintf("reading the pod: %v", err)
	}
	claimUID, hasClaim := pod.Labels[agentsv1beta1.LabelClaimUID]
	_, warm := pod.Labels[agentsv1beta1.LabelWarmPoolSandbox]
	return fmt.Sprintf("the API server's pod now: claim-uid %q (set %v), warm-pool label %v, resourceVersion %s",
		claimUID, hasClaim, warm, pod.ResourceVersion)
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func podUIDOf(t *testing.T, e *env, name string) string {
	t.Helper()
	cs, err := cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pod.UID)
}

// checkTrace: the operator continued the SDK's trace. Its spans for the claim's admission,
// bind and Ready are in the SDK's trace, each parented to a span of that trace (the SDK's or
// the operator's own), and the claim's admission hangs off the SDK's span that created the
// claim. The tree is logged, as the note shows it.
func checkTrace(t *testing.T, root oteltrace.Span, sdkSpans, opSpans *tracetest.SpanRecorder) {
	t.Helper()
	traceID := root.SpanContext().TraceID().String()
	// span ID → "service/name"; root is the test's own span, under which the SDK is called
	names := map[string]string{root.SpanContext().SpanID().String(): "test/agent-task"}
	var all []trace.ReadOnlySpan
	for _, s := range sdkSpans.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			names[s.SpanContext().SpanID().String()] = "sdk/" + s.Name()
			all = append(all, s)
		}
	}
	// The Ready span ends with the status write, which CreateSandbox waited for; the
	// operator's spans are recorded when they end.
	deadline := time.Now().Add(5 * time.Second)
	var mine []trace.ReadOnlySpan
	for {
		mine = mine[:0]
		for _, s := range opSpans.Ended() {
			if s.SpanContext().TraceID().String() == traceID {
				mine = append(mine, s)
			}
		}
		if len(mine) >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range mine {
		names[s.SpanContext().SpanID().String()] = "sandgate/" + s.Name()
		all = append(all, s)
	}
	seen := map[string]bool{}
	var tree []string
	for _, s := range all {
		parent := "(root)"
		if s.Parent().IsValid() {
			parent = names[s.Parent().SpanID().String()]
			if parent == "" {
				parent = "(open " + s.Parent().SpanID().String() + ")" // the SDK's lifecycle span, open while the sandbox is
			}
		}
		name := names[s.SpanContext().SpanID().String()]
		tree = append(tree, fmt.Sprintf("%s ← %s", name, parent))
		if strings.HasPrefix(name, "sandgate/") {
			seen[s.Name()] = true
			if strings.HasPrefix(parent, "(") {
				t.Errorf("operator span %s has no parent in the SDK's trace (%s)", name, parent)
			}
			if s.Name() == "sandgate.admission.claim" && parent != "sdk/sandbox-client.create_claim" {
				t.Errorf("the claim's admission span is a child of %s, want the SDK's create_claim span", parent)
			}
		}
	}
	slices.Sort(tree)
	t.Logf("trace %s, span ← parent:\n  %s", traceID, strings.Join(tree, "\n  "))
	for _, want := range []string{"sandgate.admission.claim", "sandgate.claim.bind", "sandgate.claim.ready"} {
		if !seen[want] {
			t.Errorf("no %s span in the SDK's trace", want)
		}
	}
}

// clientLatencyCount is how many claims of launch type the operator's client-side startup
// histogram (fed by the SDK's client-first-requested-at annotation) has observed.
func clientLatencyCount(t *testing.T, g prometheus.Gatherer, launch string) uint64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != reconcilers.MetricClientClaimStartupLatency {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "launch_type" && l.GetValue() == launch {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}
