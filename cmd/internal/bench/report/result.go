// Package report holds the result of one load run — the fields the load generator's --json
// writes — and renders results as the human table printed on stdout and as the tables of
// docs/performance.md.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sandgate-dev/sandgate/cmd/internal/bench/scrape"
	"github.com/sandgate-dev/sandgate/cmd/internal/bench/stats"
)

// Parameters are what a run was asked to do.
type Parameters struct {
	BurstSize       int     `json:"burstSize"`
	QPS             float64 `json:"qps"`
	TotalBursts     int     `json:"totalBursts"`
	WarmPoolSize    int32   `json:"warmPoolSize"`
	Namespace       string  `json:"namespace"`
	Template        string  `json:"template"`
	Cluster         string  `json:"cluster"`
	Profile         string  `json:"profile,omitempty"`
	Nodes           int     `json:"nodes,omitempty"`
	OperatorCommand string  `json:"operatorCommand,omitempty"`
	TimeoutSeconds  float64 `json:"timeoutSeconds"`
}

// Claims are the claims' fates.
type Claims struct {
	Created      int `json:"created"`
	CreateErrors int `json:"createErrors"`
	Ready        int `json:"ready"`
	// NeverReady are claims created but not Ready within the timeout; must be 0.
	NeverReady int `json:"neverReady"`
	WarmHits   int `json:"warmHits"`
	ColdStarts int `json:"coldStarts"`
	// UnknownLaunch are Ready claims whose Sandbox has no launch-type label.
	UnknownLaunch int `json:"unknownLaunch"`
	// Stale are Ready claims bound to a Sandbox whose template hash differs from the claim's
	// stamp; must be 0.
	Stale int `json:"stale"`
}

// Latency holds the startup latency in both views.
type Latency struct {
	// Client is from the start of the create call to the watch event showing Ready=True.
	Client stats.Summary `json:"client"`
	// Server is from the claim's webhook-first-observed-at annotation to the same event.
	Server stats.Summary `json:"server"`
	// CreateCall is how long the create call itself took.
	CreateCall stats.Summary `json:"createCall"`
}

// API is what the API server counted during the run (apiserver_request_total), all
// clients, pool refill included.
type API struct {
	Mutating         float64 `json:"mutating"`
	MutatingPerClaim float64 `json:"mutatingPerClaim"`
	Reads            float64 `json:"reads"`
	Conflicts        float64 `json:"conflicts"`
	// ByVerbResourceCode keys are "VERB resource[/subresource] code", mutating verbs only.
	ByVerbResourceCode []scrape.Count `json:"byVerbResourceCode"`
	// ReadsByVerbResource keys are "VERB resource[/subresource]", reading verbs only.
	ReadsByVerbResource []scrape.Count `json:"readsByVerbResource"`
	// ConflictsByVerbResource keys are "VERB resource[/subresource]".
	ConflictsByVerbResource []scrape.Count `json:"conflictsByVerbResource"`
	// ServerCPUSeconds is kube-apiserver's process_cpu_seconds_total during the run.
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
}

// Operator is what the operator reported and cost during the run.
type Operator struct {
	// Measured is false when no operator ran under the harness or it has no metrics endpoint.
	Measured bool `json:"measured"`
	// ReconcilesByController is controller_runtime_reconcile_total by controller.
	ReconcilesByController []scrape.Count `json:"reconcilesByController"`
	// SandboxReconcilesPerClaim is the Sandbox controller's reconciles divided by the claims.
	SandboxReconcilesPerClaim float64 `json:"sandboxReconcilesPerClaim"`
	// ReconcilesToReady is the mean of sandgate_sandbox_reconciles_to_ready for the Sandboxes
	// that became Ready during the run (0 when the operator does not export it).
	ReconcilesToReady    float64 `json:"reconcilesToReady"`
	SandboxesBecameReady float64 `json:"sandboxesBecameReady"`
	// Writes is sandgate_api_writes_total by "verb resource result".
	Writes         []scrape.Count `json:"writes"`
	WritesPerClaim float64        `json:"writesPerClaim"`
	// ClaimPathWritesPerClaim counts the operator's writes to claims (metadata and status)
	// and its non-status writes to Sandboxes (the binding), per claim: the writes a claim
	// waits for. Pool refill and pod metadata propagation are left out.
	ClaimPathWritesPerClaim float64 `json:"claimPathWritesPerClaim"`
	// WarmHits, ColdStarts and BindConflicts (by reason) are the operator's own claim counters
	// (sandgate_claim_*_total).
	WarmHits      float64        `json:"warmHits"`
	ColdStarts    float64        `json:"coldStarts"`
	BindConflicts []scrape.Count `json:"bindConflicts"`
	// StartupP50AtMostMs and StartupP99AtMostMs bound the median and p99 of the operator's
	// agent_sandbox_claim_startup_latency_ms (admission → its first Ready status write) by
	// the histogram's buckets; 0 when not exported, -1 beyond the largest bucket.
	// StartupMeanMs is its exact mean.
	StartupP50AtMostMs float64 `json:"startupP50AtMostMs"`
	StartupP99AtMostMs float64 `json:"startupP99AtMostMs"`
	StartupMeanMs      float64 `json:"startupMeanMs"`
	// CPUSeconds is user+system time during the run; CPUSecondsTotal since the start.
	CPUSeconds      float64 `json:"cpuSeconds"`
	CPUSecondsTotal float64 `json:"cpuSecondsTotal"`
	PeakRSSMiB      float64 `json:"peakRSSMiB"`
}

// Component is the cost of one control-plane process during the run.
type Component struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
}

// Targets are a scenario's goals from the architecture document; zero fields have none.
type Targets struct {
	P50Ms             float64 `json:"p50Ms,omitempty"`
	P90Ms             float64 `json:"p90Ms,omitempty"`
	P99Ms             float64 `json:"p99Ms,omitempty"`
	MutatingPerClaim  float64 `json:"mutatingPerClaim,omitempty"`
	Conflicts         *int    `json:"conflicts,omitempty"`
	ServerCPUSeconds  float64 `json:"serverCPUSeconds,omitempty"`
	ReconcilesToReady float64 `json:"reconcilesToReady,omitempty"`
	// Reference is what the public controller measured in the same scenario, for the reader.
	Reference string `json:"reference,omitempty"`
}

// Result is one load run.
type Result struct {
	Scenario    string     `json:"scenario,omitempty"`
	Description string     `json:"description,omitempty"`
	Targets     *Targets   `json:"targets,omitempty"`
	Parameters  Parameters `json:"parameters"`
	StartedAt   time.Time  `json:"startedAt"`
	// LoadAverage is the machine's 1-minute load average when the claims were fired: the
	// machines are shared, and a load above the CPU count slows every figure.
	LoadAverage float64 `json:"loadAverage"`
	// PoolFillSeconds is how long the pool took to become full and Ready.
	PoolFillSeconds float64 `json:"poolFillSeconds"`
	// RunSeconds is from the first create call to the last claim Ready (or the timeout).
	RunSeconds float64 `json:"runSeconds"`
	// RefillSeconds is from the last claim Ready to the pool full again; -1 if it was not
	// within the wait.
	RefillSeconds float64     `json:"refillSeconds"`
	Claims        Claims      `json:"claims"`
	Latency       Latency     `json:"latency"`
	API           API         `json:"api"`
	Operator      Operator    `json:"operator"`
	Components    []Component `json:"components,omitempty"`
	// Errors are the first problems seen (create failures, scrape failures).
	Errors []string `json:"errors,omitempty"`
}

// OK reports whether every claim became Ready on a Sandbox of its stamped template.
func (r *Result) OK() bool {
	return r.Claims.NeverReady == 0 && r.Claims.CreateErrors == 0 && r.Claims.Stale == 0 && r.Claims.Created > 0
}

// WriteJSON writes r to path, indented.
func (r *Result) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}

// ReadJSON reads a result WriteJSON wrote.
func ReadJSON(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding result %s: %w", path, err)
	}
	return &r, nil
}
