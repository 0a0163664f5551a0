//go:build integration

package load_test

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// TestRunMeasuresTheOperator runs a small load against a local cluster with the operator
// built from this repository, as `make bench` does, and checks that every figure the report
// rests on was measured: claims Ready and stamped at admission (the harness wired the
// webhooks with the operator's own certificate), launch types found, API requests counted
// by the API server, the operator's metrics and /proc usage read.
func TestRunMeasuresTheOperator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startHarness(ctx, t, harness.Options{})
	if !env.Webhooks || env.Operator == nil || env.Operator.MetricsURL == "" {
		t.Fatalf("harness without webhooks (%v) or a scrapeable operator (%+v)", env.Webhooks, env.Operator)
	}

	res, err := load.Run(ctx, env.Config, smallLoad("bench-test"), load.Probes{
		OperatorMetrics: env.Operator.Metrics,
		OperatorUsage:   env.Operator.Usage,
		ComponentUsage:  env.ComponentUsage,
		Healthy:         env.Err,
	})
	if err != nil {
		t.Fatalf("running the load: %v", err)
	}
	if !res.OK() {
		t.Errorf("run not OK: claims %+v, errors %v", res.Claims, res.Errors)
	}
	if len(res.Errors) > 0 {
		t.Errorf("run reported problems: %v", res.Errors)
	}
	if got := res.Claims.WarmHits + res.Claims.ColdStarts; got != claims {
		t.Errorf("warm hits + cold starts = %d, want %d (launch types of every claim's Sandbox)", got, claims)
	}
	if res.Latency.Client.Count != claims || res.Latency.Server.Count != claims {
		t.Errorf("latency samples: client %d, server %d; want %d each (server view needs the admission stamp)",
			res.Latency.Client.Count, res.Latency.Server.Count, claims)
	}
	if res.API.Mutating < claims {
		t.Errorf("API server counted %v mutating requests, want at least one per claim", res.API.Mutating)
	}
	if !res.Operator.Measured || len(res.Operator.ReconcilesByController) == 0 {
		t.Errorf("operator metrics not measured: %+v", res.Operator)
	}
	if res.Operator.PeakRSSMiB <= 0 || res.Operator.CPUSecondsTotal <= 0 {
		t.Errorf("operator usage not read: CPU %v s, peak %v MiB", res.Operator.CPUSecondsTotal, res.Operator.PeakRSSMiB)
	}
	found := false
	for _, c := range res.Components {
		found = found || c.Name == "kube-apiserver"
	}
	if !found {
		t.Errorf("no kube-apiserver among the components measured: %+v", res.Components)
	}
	if res.API.ClaimsCPUSeconds < 0 {
		t.Errorf("kube-apiserver CPU between the first claim and the last Ready not read")
	}
	if res.OtherWork == nil {
		t.Errorf("the machine's other work during the claims not measured")
	}
	stamps := 0.0
	for _, w := range res.Webhooks {
		if w.Operation == "CREATE" && slices.Contains(w.Resources, "sandboxclaims") && w.Type == "mutating" {
			stamps += w.Calls
		}
	}
	if stamps != claims {
		t.Errorf("mutating webhook calls on claim CREATE = %v, want one per claim; webhooks: %+v", stamps, res.Webhooks)
	}
}

// TestRunMeasuresTheFloor runs the floor of a small load: the operator fills the pool and is
// stopped, and the load generator makes each claim's three writes itself. Every claim is bound
// to one of the operator's members and the API server sees exactly those writes. Without
// admission the webhook configurations are removed and no webhook is called; with
// FloorAdmission they stay and the harness answers each call at once, so that every claim's
// create and binding makes its admission round trip, and the claim carries the admission time.
func TestRunMeasuresTheFloor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		admission bool
		route     bool
		standIn   bool
	}{
		{name: "no admission webhooks"},
		{name: "admission webhooks answered at once", admission: true},
		{name: "the contract floor: admission answered at once and the route write", admission: true, route: true},
		{name: "the contract floor answered by a stand-in process of its own", admission: true, route: true, standIn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			opts := harness.Options{FloorAdmission: tc.admission}
			if tc.standIn {
				exe, err := harness.StandInExecutable()
				if err != nil {
					t.Fatal(err)
				}
				opts.StandInExecutable = exe // this test binary: TestMain serves the stand-in
			}
			env := startHarness(ctx, t, opts)

			cfg := smallLoad("bench-floor")
			cfg.Floor, cfg.FloorRoute = true, tc.route
			probes := load.Probes{
				ComponentUsage: env.ComponentUsage,
				Healthy:        env.Err,
				DetachOperator: env.DetachOperator,
				APIServerCPU:   env.APIServerCPU,
				StandInMetrics: env.StandInMetrics,
			}
			if tc.standIn {
				probes.StandInUsage = env.StandInUsage
			}
			res, err := load.Run(ctx, env.Config, cfg, probes)
			if err != nil {
				t.Fatalf("running the floor: %v", err)
			}
			if !res.OK() || len(res.Errors) > 0 {
				t.Errorf("floor run not OK: claims %+v, errors %v", res.Claims, res.Errors)
			}
			if env.Operator != nil || env.Webhooks != tc.admission {
				t.Errorf("after the detach: operator %v, webhook configurations installed %v; want no operator and webhooks %v", env.Operator, env.Webhooks, tc.admission)
			}
			if res.Claims.WarmHits != claims {
				t.Errorf("claims bound to warm members = %d, want %d", res.Claims.WarmHits, claims)
			}
			writes := map[string]float64{}
			for _, row := range res.API.ByVerbResourceCode {
				writes[row.Key] = row.Count
			}
			for _, key := range []string{"POST sandboxclaims 201", "PATCH sandboxes 200", "PATCH sandboxclaims/status 200"} {
				if writes[key] != claims {
					t.Errorf("%s: %v, want one per claim (all writes: %v)", key, writes[key], res.API.ByVerbResourceCode)
				}
			}
			routes := 0.0
			if tc.route {
				routes = claims
			}
			if writes["PATCH pods 200"] != routes {
				t.Errorf("PATCH pods 200: %v, want %v: one route write per claim in the contract floor only (all writes: %v)", writes["PATCH pods 200"], routes, res.API.ByVerbResourceCode)
			}
			if p := res.ClientPath; p != nil && p.Route.Count != int(routes) {
				t.Errorf("route writes timed: %d, want %v", p.Route.Count, routes)
			}
			if tc.route {
				checkRoutedPods(ctx, t, env, cfg.Namespace)
			}
			for _, key := range []string{"POST sandboxes 201", "POST pods 201", "POST events 201"} {
				if writes[key] != 0 {
					t.Errorf("%s: %v during the floor, want none: nothing refills or reports", key, writes[key])
				}
			}
			calls := map[string]float64{}
			for _, w := range res.Webhooks {
				calls[w.Type+" "+w.Operation+" "+strings.Join(w.Resources, ",")] += w.Calls
				if w.Rejected > 0 {
					t.Errorf("webhook %s rejected %v calls, want none", w.Name, w.Rejected)
				}
			}
			want := map[string]float64{}
			if tc.admission {
				want["mutating CREATE sandboxclaims"] = claims // the stamp, on each create
				want["validating UPDATE sandboxes"] = claims   // the binding guard, on each bind
				want["validating UPDATE sandboxclaims"] = 0    // skipped by matchConditions
				if res.Latency.Server.Count != claims {
					t.Errorf("claims with an admission time: %d, want %d", res.Latency.Server.Count, claims)
				}
			}
			for key, n := range calls {
				if n != want[key] {
					t.Errorf("webhook calls %s: %v, want %v (all: %v)", key, n, want[key], calls)
				}
			}
			if p := res.ClientPath; p == nil || p.Bind.Count != claims || p.Status.Count != claims || p.WatchDelivery.Count != claims {
				t.Errorf("client path not timed for every claim: %+v", p)
			}
			if res.API.ClaimsCPUSeconds < 0 {
				t.Errorf("kube-apiserver CPU between the first claim and the last Ready not read")
			}
			if res.OtherWork == nil {
				t.Errorf("the machine's other work during the claims not measured")
			}
			checkStandIn(t, res.WebhookServer, tc.admission, tc.standIn)
		})
	}
}

// checkStandIn checks what a floor run saw of its stand-in webhook server: no admission call
// without admission webhooks (it may convert: the CRDs serve v1alpha1); else each claim's stamp
// and binding served once, by a process of its own when standIn.
func checkStandIn(t *testing.T, ws *report.WebhookServer, admission, standIn bool) {
	t.Helper()
	served := map[string]float64{}
	if ws != nil {
		for _, p := range ws.Paths {
			served[p.Path] = p.Calls
		}
	}
	want := 0.0
	if admission {
		want = claims
		process := "load generator"
		if standIn {
			process = "stand-in process"
		}
		if ws == nil || ws.Process != process {
			t.Fatalf("webhook server %+v, want one served by the %s", ws, process)
		}
		if standIn && ws.CPUSeconds < 0 {
			t.Errorf("the stand-in process's CPU not read")
		}
	}
	for _, path := range []string{"/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim", "/validate-agents-x-k8s-io-v1beta1-sandbox"} {
		if served[path] != want {
			t.Errorf("the stand-in served %v calls of %s, want %v (all: %v)", served[path], path, want, served)
		}
	}
}

// TestMain lets this test binary serve a floor's stand-in webhooks when the harness runs it
// with harness.StandInArg, as sandgate-bench does.
func TestMain(m *testing.M) {
	harness.ServeStandInIfAsked()
	os.Exit(m.Run())
}

// checkRoutedPods checks that the contract floor's route writes left each bound member's pod
// as sandgate's leave it: labelled with its claim's UID, no longer a pool member's, no longer
// marked safe to evict; and the idle members' pods untouched.
func checkRoutedPods(ctx context.Context, t *testing.T, env *harness.Env, ns string) {
	t.Helper()
	c, err := load.NewClient(env.Config, 100)
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	routed, idle := 0, 0
	for _, pod := range pods.Items {
		_, member := pod.Labels[agentsv1beta1.LabelWarmPoolSandbox]
		_, evictable := pod.Annotations[reconcilers.AnnotationSafeToEvict]
		switch uid := pod.Labels[agentsv1beta1.LabelClaimUID]; {
		case uid != "" && !member && !evictable:
			routed++
		case uid == "" && member && evictable:
			idle++
		default:
			t.Errorf("pod %s half routed: claim-uid %q, warm-pool label %v, safe-to-evict %v", pod.Name, uid, member, evictable)
		}
	}
	if routed != claims || idle != len(pods.Items)-claims {
		t.Errorf("pods routed %d, idle members' %d, of %d; want %d routed", routed, idle, len(pods.Items), claims)
	}
}

// claims is how many claims smallLoad makes.
const claims = 6

// smallLoad is the load of these tests in namespace ns: claims claims in two bursts into a
// pool with two spare members.
func smallLoad(ns string) load.Config {
	return load.Config{
		Namespace:      ns,
		PodSpec:        load.DefaultPodSpec(),
		WarmPoolSize:   claims + 2,
		BurstSize:      claims / 2,
		TotalBursts:    2,
		QPS:            20,
		PoolCreateWait: 2 * time.Minute,
		Timeout:        time.Minute,
		RefillWait:     time.Minute,
		Progress:       progress(),
	}
}

// progress is where the harness and the load report progress: stderr with -v, nowhere
// otherwise.
func progress() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// startHarness starts a local cluster with the operator built from this repository, as
// `make bench` does, and stops it when the test ends.
func startHarness(ctx context.Context, t *testing.T, opts harness.Options) *harness.Env {
	t.Helper()
	opts.Profile, opts.Log = controlplane.ProfileFast, progress()
	env, err := harness.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the harness: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the harness: %v", err)
		}
	})
	return env
}
