package load

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

func parse(t *testing.T, text string) scrape.Snapshot {
	t.Helper()
	s, err := scrape.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	return s
}

func TestAPIRequests(t *testing.T) {
	before := parse(t, `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="sandboxclaims",subresource="",verb="POST"} 5
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="GET"} 100
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 100
`)
	after := parse(t, `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="sandboxclaims",subresource="",verb="POST"} 15
apiserver_request_total{code="200",resource="sandboxclaims",subresource="status",verb="PATCH"} 10
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="PATCH"} 10
apiserver_request_total{code="409",resource="sandboxes",subresource="",verb="PATCH"} 1
apiserver_request_total{code="201",resource="sandboxes",subresource="",verb="POST"} 10
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="GET"} 104
apiserver_request_total{code="409",resource="sandboxes",subresource="",verb="GET"} 0
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 103.5
`)
	want := report.API{
		Mutating:         41,
		MutatingPerClaim: 4.1,
		Reads:            4,
		Conflicts:        1,
		ByVerbResourceCode: []scrape.Count{
			{Key: "PATCH sandboxclaims/status 200", Count: 10},
			{Key: "PATCH sandboxes 200", Count: 10},
			{Key: "POST sandboxclaims 201", Count: 10},
			{Key: "POST sandboxes 201", Count: 10},
			{Key: "PATCH sandboxes 409", Count: 1},
		},
		ConflictsByVerbResource: []scrape.Count{{Key: "PATCH sandboxes", Count: 1}},
		ReadsByVerbResource:     []scrape.Count{{Key: "GET sandboxes", Count: 4}},
		ServerCPUSeconds:        3.5,
	}
	got := apiRequests(scrape.Delta(before, after), 10)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("apiRequests mismatch (-want +got):\n%s", diff)
	}
}

func TestOperatorFigures(t *testing.T) {
	before := parse(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="sandbox",result="success"} 100
controller_runtime_reconcile_total{controller="sandboxclaim",result="success"} 0
# TYPE sandgate_api_writes_total counter
sandgate_api_writes_total{resource="sandboxes",result="success",verb="patch"} 50
# TYPE sandgate_sandbox_reconciles_to_ready histogram
sandgate_sandbox_reconciles_to_ready_bucket{le="+Inf"} 60
sandgate_sandbox_reconciles_to_ready_sum 120
sandgate_sandbox_reconciles_to_ready_count 60
`)
	after := parse(t, `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="sandbox",result="success"} 118
controller_runtime_reconcile_total{controller="sandbox",result="error"} 2
controller_runtime_reconcile_total{controller="sandboxclaim",result="success"} 20
controller_runtime_reconcile_total{controller="sandboxwarmpool",result="success"} 0
# TYPE sandgate_api_writes_total counter
sandgate_api_writes_total{resource="sandboxes",result="success",verb="patch"} 60
sandgate_api_writes_total{resource="sandboxclaims/status",result="success",verb="patch"} 10
sandgate_api_writes_total{resource="sandboxes",result="conflict",verb="patch"} 1
sandgate_api_writes_total{resource="sandboxclaims",result="success",verb="patch"} 10
# TYPE sandgate_claim_bookkeeping_writes_total counter
sandgate_claim_bookkeeping_writes_total 10
# TYPE sandgate_sandbox_reconciles_to_ready histogram
sandgate_sandbox_reconciles_to_ready_bucket{le="+Inf"} 70
sandgate_sandbox_reconciles_to_ready_sum 135
sandgate_sandbox_reconciles_to_ready_count 70
# TYPE sandgate_claim_warm_hits_total counter
sandgate_claim_warm_hits_total 9
# TYPE sandgate_claim_cold_starts_total counter
sandgate_claim_cold_starts_total 1
# TYPE sandgate_claim_bind_conflicts_total counter
sandgate_claim_bind_conflicts_total{reason="conflict"} 1
sandgate_claim_bind_conflicts_total{reason="denied"} 0
# TYPE sandgate_sandbox_child_creates_in_flight_total counter
sandgate_sandbox_child_creates_in_flight_total{kind="Pod"} 2
# TYPE agent_sandbox_claim_startup_latency_ms histogram
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="warm",sandbox_template="t",le="100"} 6
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="warm",sandbox_template="t",le="250"} 9
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="warm",sandbox_template="t",le="+Inf"} 9
agent_sandbox_claim_startup_latency_ms_sum{launch_type="warm",sandbox_template="t"} 700
agent_sandbox_claim_startup_latency_ms_count{launch_type="warm",sandbox_template="t"} 9
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="cold",sandbox_template="t",le="100"} 0
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="cold",sandbox_template="t",le="250"} 0
agent_sandbox_claim_startup_latency_ms_bucket{launch_type="cold",sandbox_template="t",le="+Inf"} 1
agent_sandbox_claim_startup_latency_ms_sum{launch_type="cold",sandbox_template="t"} 800
agent_sandbox_claim_startup_latency_ms_count{launch_type="cold",sandbox_template="t"} 1
# TYPE sandgate_claim_phase_seconds histogram
sandgate_claim_phase_seconds_bucket{phase="bind",le="+Inf"} 10
sandgate_claim_phase_seconds_sum{phase="bind"} 0.05
sandgate_claim_phase_seconds_count{phase="bind"} 10
sandgate_claim_phase_seconds_bucket{phase="status",le="+Inf"} 10
sandgate_claim_phase_seconds_sum{phase="status"} 0.04
sandgate_claim_phase_seconds_count{phase="status"} 10
sandgate_claim_phase_seconds_bucket{phase="admission_to_reconcile",le="+Inf"} 0
sandgate_claim_phase_seconds_sum{phase="admission_to_reconcile"} 0
sandgate_claim_phase_seconds_count{phase="admission_to_reconcile"} 0
`)
	want := report.Operator{
		Measured: true,
		ReconcilesByController: []scrape.Count{
			{Key: "sandbox", Count: 20},
			{Key: "sandboxclaim", Count: 20},
		},
		SandboxReconcilesPerClaim: 2,
		ReconcilesToReady:         1.5,
		SandboxesBecameReady:      10,
		Writes: []scrape.Count{
			{Key: "patch sandboxclaims success", Count: 10},
			{Key: "patch sandboxclaims/status success", Count: 10},
			{Key: "patch sandboxes success", Count: 10},
			{Key: "patch sandboxes conflict", Count: 1},
		},
		WritesPerClaim: 3.1,
		// The claim metadata patches are the sandbox-name annotations, written after Ready.
		ClaimPathWritesPerClaim:        2.1,
		ClaimBookkeepingWritesPerClaim: 1,
		WarmHits:                       9,
		ColdStarts:                     1,
		BindConflicts:                  []scrape.Count{{Key: "conflict", Count: 1}},
		CreatesInFlight:                []scrape.Count{{Key: "Pod", Count: 2}},
		StartupMeanMs:                  150,
		StartupP50AtMostMs:             100,
		StartupP99AtMostMs:             -1,
		// Phases that saw no claim are left out, as a run without them shows nothing.
		Phases: []report.Phase{{Name: "bind", Count: 10, MeanMs: 5}, {Name: "status", Count: 10, MeanMs: 4}},
	}
	got := operatorFigures(scrape.Delta(before, after), 10)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operatorFigures mismatch (-want +got):\n%s", diff)
	}
}
