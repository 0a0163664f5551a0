// Package report holds the result of one load run — the fields the load generator's --json
// writes — and renders results as the human table printed on stdout and as the tables of
// docs/performance.md.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// Parameters are what a run was asked to do.
type Parameters struct {
	// Commit is the sandgate commit measured (Machine.Commit when the scenario ran): a report
	// rewritten after one scenario ran again holds results of several.
	Commit       string  `json:"commit,omitempty"`
	BurstSize    int     `json:"burstSize"`
	QPS          float64 `json:"qps"`
	TotalBursts  int     `json:"totalBursts"`
	WarmPoolSize int32   `json:"warmPoolSize"`
	Namespace    string  `json:"namespace"`
	Template     string  `json:"template"`
	Cluster      string  `json:"cluster"`
	Profile      string  `json:"profile,omitempty"`
	// PodStartup is the start-up time distribution of the realistic profile (nil with
	// another): the figures of a run depend on it.
	PodStartup      *PodStartup `json:"podStartup,omitempty"`
	Nodes           int         `json:"nodes,omitempty"`
	OperatorCommand string      `json:"operatorCommand,omitempty"`
	TimeoutSeconds  float64     `json:"timeoutSeconds"`
	// Floor marks a run of the API server's floor: no operator and no webhooks during the
	// claims; the load generator made each claim's writes itself (see load.Config.Floor).
	Floor bool `json:"floor,omitempty"`
	// LightFloor marks a floor run on minimal members the load generator made: no pods, the
	// CRD's required fields, the pool label and owner, a Ready status (--light-floor).
	LightFloor bool `json:"lightFloor,omitempty"`
	// FloorRoute marks a floor run that also made sandgate's route write of each warm claim
	// (load.Config.FloorRoute); with FloorAdmission, the contract floor.
	FloorRoute bool `json:"floorRoute,omitempty"`
	// FloorAdmission marks a floor run whose admission webhooks stayed, answered at once by
	// the load generator (sandgate-bench --floor-admission).
	FloorAdmission bool `json:"floorAdmission,omitempty"`
	// StandInInProcess marks a floor run whose webhooks the load generator answered from its
	// own process (--stand-in-in-process), as every floor did before issue 37; otherwise a
	// process of their own answered them.
	StandInInProcess bool `json:"standInInProcess,omitempty"`
	// Autoscaler describes the WarmPoolAutoscaler that sized the pool ("min 10, max 600,
	// targetSpare 10"); empty for a pool of WarmPoolSize.
	Autoscaler string `json:"autoscaler,omitempty"`
}

// PodStartup is the realistic profile's distribution of pod start-up times
// (controlplane.PodStartup).
type PodStartup struct {
	MedianSeconds float64 `json:"medianSeconds"`
	P99Seconds    float64 `json:"p99Seconds"`
	Seed          int64   `json:"seed"`
}

// ProfileDescription names the pod profile of a run, with its start-up times if it has them:
// "realistic (start-up median 2s, p99 8s, seed 0)"; "" for a cluster the run did not start.
func (p Parameters) ProfileDescription() string {
	if p.PodStartup == nil {
		return p.Profile
	}
	return fmt.Sprintf("%s (start-up median %gs, p99 %gs, seed %d)", p.Profile, p.PodStartup.MedianSeconds, p.PodStartup.P99Seconds, p.PodStartup.Seed)
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
	// ClaimsCPUSeconds is kube-apiserver's CPU from just before the first claim's create call
	// to the watch event of the last claim's Ready: the claims' own window, refill after it
	// left out. -1 when it could not be read.
	ClaimsCPUSeconds float64 `json:"claimsCPUSeconds"`
}

// WebhookServer is what the process that answered the webhooks during the run saw of them:
// the operator in sandgate's run, the stand-in in a floor run.
type WebhookServer struct {
	// Process is "operator", "stand-in process" (a process of its own) or "load generator"
	// (the stand-in served from the load generator's own process).
	Process string `json:"process"`
	// CPUSeconds is the process's CPU from just before the first claim to the end of the
	// run's measurement; -1 when not measured (the load generator's is LoadGeneratorCPUSeconds).
	CPUSeconds float64 `json:"cpuSeconds"`
	// Paths are its calls by URL path, from controller-runtime's
	// controller_runtime_webhook_latency_seconds: the time from the request read to the
	// answer written, without the network and the API server's side.
	Paths []WebhookPath `json:"paths,omitempty"`
}

// WebhookPath is what a webhook server saw of the calls of one path.
type WebhookPath struct {
	Path   string  `json:"path"`
	Calls  float64 `json:"calls"`
	MeanMs float64 `json:"meanMs"`
	// P50Ms and P99Ms are interpolated in the histogram's buckets, which controller-runtime
	// spaces tenfold (1 ms, 10 ms, 100 ms, ...): a rough estimate; the mean is exact.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// Webhook is what one admission webhook cost the API server during the run for one
// operation, from apiserver_admission_webhook_admission_duration_seconds (the API server's
// view: the call including its network round trip) and
// apiserver_admission_match_condition_exclusions_total.
type Webhook struct {
	Name string `json:"name"`
	// Type is mutating or validating.
	Type      string  `json:"type"`
	Operation string  `json:"operation"`
	Calls     float64 `json:"calls"`
	Rejected  float64 `json:"rejected"`
	// SumSeconds is the time of every call added up; MeanMs is the exact mean of a call.
	SumSeconds float64 `json:"sumSeconds"`
	MeanMs     float64 `json:"meanMs"`
	// P50Ms and P99Ms are interpolated in the histogram's buckets (5 ms, 25 ms, 100 ms, ...):
	// an estimate, see scrape.Snapshot.Quantile.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	// Excluded counts the requests the webhook's matchConditions let through without a call.
	Excluded float64 `json:"excluded"`
	// Resources are the resources the webhook's rules name, from its configuration when the
	// claims were fired; empty when the configuration was not found.
	Resources []string `json:"resources,omitempty"`
}

// OtherWork is the CPU a shared machine spent outside a run's processes (the load
// generator, the operator, the local control plane) during the run's claims.
type OtherWork struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	// BusyCPUSeconds is the whole machine's busy CPU over the window, the run's own included.
	BusyCPUSeconds float64 `json:"busyCPUSeconds,omitempty"`
	WindowSeconds  float64 `json:"windowSeconds"`
	CPUs           int     `json:"cpus"`
}

// BusyShare is the machine's busy part of its capacity during the window: near 1, the run
// was bound by CPU.
func (o *OtherWork) BusyShare() float64 {
	if o == nil || o.WindowSeconds <= 0 || o.CPUs <= 0 {
		return 0
	}
	return o.BusyCPUSeconds / (o.WindowSeconds * float64(o.CPUs))
}

// Share is the other work's part of the machine's capacity during the window.
func (o *OtherWork) Share() float64 {
	if o == nil || o.WindowSeconds <= 0 || o.CPUs <= 0 {
		return 0
	}
	return o.CPUSeconds / (o.WindowSeconds * float64(o.CPUs))
}

// Phase is the operator's own timing of one phase of a claim's path
// (sandgate_claim_phase_seconds).
type Phase struct {
	Name   string  `json:"name"`
	Count  float64 `json:"count"`
	MeanMs float64 `json:"meanMs"`
}

// ClientPath is how long each step of a floor claim took, as the load generator that made
// the writes timed them.
type ClientPath struct {
	// BeforeBind is from the create call's return to the bind patch's start (picking a
	// member, encoding).
	BeforeBind stats.Summary `json:"beforeBind"`
	// Bind and Status are the two patch calls.
	Bind   stats.Summary `json:"bind"`
	Status stats.Summary `json:"status"`
	// Route is the contract floor's pod patch (load.Config.FloorRoute); no samples otherwise.
	Route stats.Summary `json:"route,omitzero"`
	// BetweenPatches is from the last write's return (the bind's, or the route's) to the
	// status patch's start.
	BetweenPatches stats.Summary `json:"betweenPatches"`
	// WatchDelivery is from the status patch's return to the watch event showing Ready.
	WatchDelivery stats.Summary `json:"watchDelivery"`
}

// ColdPath is how long each step of a cold floor claim took, as the load generator that made
// the writes timed them.
type ColdPath struct {
	// Sandbox and Pod are the two create calls; PodReady from the pod's create returning to
	// the watch showing it Ready; SandboxStatus and Status the two status patches.
	Sandbox       stats.Summary `json:"sandbox"`
	Pod           stats.Summary `json:"pod"`
	PodReady      stats.Summary `json:"podReady"`
	SandboxStatus stats.Summary `json:"sandboxStatus"`
	Status        stats.Summary `json:"status"`
	// WatchDelivery is from the claim's status patch returning to the watch showing it Ready.
	WatchDelivery stats.Summary `json:"watchDelivery"`
}

// String is the path as one progress line: the mean and p99 of each step.
func (p *ColdPath) String() string {
	f := func(s stats.Summary) string { return fmt.Sprintf("%.2f/%.2f", s.Mean, s.P99) }
	return fmt.Sprintf("cold floor writes, mean/p99 ms (n=%d): sandbox create %s, pod create %s, → pod Ready %s, sandbox status %s, claim status %s, → watch Ready %s",
		p.Status.Count, f(p.Sandbox), f(p.Pod), f(p.PodReady), f(p.SandboxStatus), f(p.Status), f(p.WatchDelivery))
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
	// and its non-status writes to Sandboxes (the binding), per claim, but for the
	// bookkeeping written after a claim was reported Ready: the writes a claim waits for.
	// Pool refill and pod metadata propagation are left out.
	ClaimPathWritesPerClaim float64 `json:"claimPathWritesPerClaim"`
	// ClaimBookkeepingWritesPerClaim counts, per claim, the claim writes made after the claim
	// was reported Ready, once claims paused (sandgate_claim_bookkeeping_writes_total: the
	// sandbox-name annotation).
	ClaimBookkeepingWritesPerClaim float64 `json:"claimBookkeepingWritesPerClaim"`
	// WarmHits, ColdStarts and BindConflicts (by reason) are the operator's own claim counters
	// (sandgate_claim_*_total).
	WarmHits      float64        `json:"warmHits"`
	ColdStarts    float64        `json:"coldStarts"`
	BindConflicts []scrape.Count `json:"bindConflicts"`
	// CreatesInFlight (by kind) are the creates of a Sandbox's child the operator did not send
	// again because the cache did not show its earlier create yet
	// (sandgate_sandbox_child_creates_in_flight_total): each would have been a 409.
	CreatesInFlight []scrape.Count `json:"createsInFlight,omitempty"`
	// StartupP50AtMostMs and StartupP99AtMostMs bound the median and p99 of the operator's
	// agent_sandbox_claim_startup_latency_ms (admission → its first Ready status write) by
	// the histogram's buckets; 0 when not exported, -1 beyond the largest bucket.
	// StartupMeanMs is its exact mean.
	StartupP50AtMostMs float64 `json:"startupP50AtMostMs"`
	StartupP99AtMostMs float64 `json:"startupP99AtMostMs"`
	StartupMeanMs      float64 `json:"startupMeanMs"`
	// Phases are sandgate_claim_phase_seconds by phase; empty when the operator does not
	// export it.
	Phases []Phase `json:"phases,omitempty"`
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

// Targets are a scenario's goals (docs/measuring.md); zero fields have none.
type Targets struct {
	P50Ms             float64 `json:"p50Ms,omitempty"`
	P90Ms             float64 `json:"p90Ms,omitempty"`
	P99Ms             float64 `json:"p99Ms,omitempty"`
	MutatingPerClaim  float64 `json:"mutatingPerClaim,omitempty"`
	Conflicts         *int    `json:"conflicts,omitempty"`
	ServerCPUSeconds  float64 `json:"serverCPUSeconds,omitempty"`
	ReconcilesToReady float64 `json:"reconcilesToReady,omitempty"`
	// FloorP50Ratio, FloorP99Ratio and FloorCPURatio bound sandgate ÷ floor of the client
	// p50 and p99 and of the API server's CPU between the first claim and the last Ready.
	FloorP50Ratio float64 `json:"floorP50Ratio,omitempty"`
	FloorP99Ratio float64 `json:"floorP99Ratio,omitempty"`
	FloorCPURatio float64 `json:"floorCPURatio,omitempty"`
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
	// OtherWork is the CPU the machine spent on other work than the run's between the first
	// claim and the last Ready; nil when not measured.
	OtherWork *OtherWork `json:"otherWork,omitempty"`
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
	// Webhooks are the admission webhooks the API server called during the run, by webhook
	// and operation.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// WebhookServer is the webhook server's own view of the same calls; nil when not measured.
	WebhookServer *WebhookServer `json:"webhookServer,omitempty"`
	// LoadGeneratorCPUSeconds is the load generator's own CPU from just before the first
	// claim to the last Ready (its webhook server's included when it answered them itself);
	// 0 when not measured.
	LoadGeneratorCPUSeconds float64 `json:"loadGeneratorCPUSeconds,omitempty"`
	// ClientPath is set in a floor run: the load generator's timing of each claim's writes.
	ClientPath *ClientPath `json:"clientPath,omitempty"`
	// ColdPath is set in a cold floor run: the load generator's timing of each cold claim's
	// writes and waits.
	ColdPath *ColdPath `json:"coldPath,omitempty"`
	// Floor is the floor of the same scenario, measured in the same invocation on a fresh
	// cluster started the same way; nil when not measured.
	Floor *Result `json:"floor,omitempty"`
	// AdmissionFloor is the floor measured again with the admission webhooks kept and each call
	// answered at once by a stand-in (Parameters.FloorAdmission), in the same round;
	// nil when not measured.
	AdmissionFloor *Result `json:"admissionFloor,omitempty"`
	// ContractFloor is the contract floor of the same round: the floor with the admission
	// webhooks kept and answered at once and sandgate's route write after each bind
	// (Parameters.FloorAdmission and FloorRoute), every write and round trip sandgate's API
	// asks of a warm claim made by a client that decides nothing; nil when not measured.
	ContractFloor *Result `json:"contractFloor,omitempty"`
	// LightFloor is the light floor of the same round: the same claims bound to minimal
	// Sandboxes that have no pods, made by the load generator (load.Config.LightFloor), the
	// lower bound of what the claims alone cost; nil when not measured.
	LightFloor *Result `json:"lightFloor,omitempty"`
	// Samples are the run's claims that became Ready, in the order they were created: the
	// distributions and timelines of docs/performance.md are drawn from them.
	Samples []Sample `json:"samples,omitempty"`
	// Sustained is set by a sustained run (load.RunSustained).
	Sustained *Sustained `json:"sustained,omitempty"`
	// Scale is set by a scale run (load.RunScale).
	Scale *Scale `json:"scale,omitempty"`
	// Trace is set by the trace scenario: its policies' runs, each a Result of its own.
	Trace *Trace `json:"trace,omitempty"`
	// FairShare is set by the fair-share scenario: its arms' figures.
	FairShare *FairShare `json:"fairShare,omitempty"`
	// Overload is set by the overload scenario: its arms' figures.
	Overload *Overload `json:"overload,omitempty"`
	// Bursts is set by a run of several bursts of several claims: each burst's figures.
	Bursts *Bursts `json:"bursts,omitempty"`
	// Rounds are every (floor, sandgate) pair of a scenario measured more than once, in run
	// order; the result itself is the round with the median p50 ratio.
	Rounds []Round `json:"rounds,omitempty"`
	// Errors are the first problems seen (create failures, scrape failures).
	Errors []string `json:"errors,omitempty"`
}

// Sample is one claim that became Ready.
type Sample struct {
	// AtSeconds is when its create call started, in seconds after the run's first one.
	AtSeconds float64 `json:"at"`
	// Ms is its client latency: create call start to the watch event showing Ready.
	Ms float64 `json:"ms"`
	// Warm is whether its Sandbox was a pool member (launch-type warm).
	Warm bool `json:"warm,omitempty"`
	// Burst is the burst it was sent in, counted from 1, in a run of several bursts of
	// several claims; 0 otherwise.
	Burst int `json:"burst,omitempty"`
}

// Round is one (floor, sandgate) pair of a scenario run several times: client p50 and p99 of
// each in milliseconds, and kube-apiserver's CPU seconds over the claims' window.
type Round struct {
	FloorP50Ms      float64 `json:"floorP50Ms"`
	P50Ms           float64 `json:"p50Ms"`
	FloorP99Ms      float64 `json:"floorP99Ms,omitempty"`
	P99Ms           float64 `json:"p99Ms,omitempty"`
	FloorCPUSeconds float64 `json:"floorCPUSeconds,omitempty"`
	CPUSeconds      float64 `json:"cpuSeconds,omitempty"`
	// AdmissionFloorP50Ms is the round's admission floor (Result.AdmissionFloor); 0 when not
	// measured.
	AdmissionFloorP50Ms float64 `json:"admissionFloorP50Ms,omitempty"`
	// ContractFloorP50Ms, ContractFloorP99Ms and ContractFloorCPUSeconds are the round's
	// contract floor (Result.ContractFloor); 0 when not measured.
	ContractFloorP50Ms      float64 `json:"contractFloorP50Ms,omitempty"`
	ContractFloorP99Ms      float64 `json:"contractFloorP99Ms,omitempty"`
	ContractFloorCPUSeconds float64 `json:"contractFloorCPUSeconds,omitempty"`
	// LightFloorP50Ms and LightFloorP99Ms are the round's light floor (Result.LightFloor); 0
	// when not measured in this round.
	LightFloorP50Ms float64 `json:"lightFloorP50Ms,omitempty"`
	LightFloorP99Ms float64 `json:"lightFloorP99Ms,omitempty"`
}

// RoundOf summarises r, with its floors, as a round.
func RoundOf(r *Result) Round {
	round := Round{P50Ms: r.Latency.Client.P50, P99Ms: r.Latency.Client.P99, CPUSeconds: r.API.ClaimsCPUSeconds}
	if f := r.Floor; f != nil {
		round.FloorP50Ms, round.FloorP99Ms, round.FloorCPUSeconds = f.Latency.Client.P50, f.Latency.Client.P99, f.API.ClaimsCPUSeconds
	}
	if f := r.AdmissionFloor; f != nil {
		round.AdmissionFloorP50Ms = f.Latency.Client.P50
	}
	if f := r.ContractFloor; f != nil {
		round.ContractFloorP50Ms, round.ContractFloorP99Ms, round.ContractFloorCPUSeconds = f.Latency.Client.P50, f.Latency.Client.P99, f.API.ClaimsCPUSeconds
	}
	if f := r.LightFloor; f != nil {
		round.LightFloorP50Ms, round.LightFloorP99Ms = f.Latency.Client.P50, f.Latency.Client.P99
	}
	return round
}

// Ratio is sandgate ÷ floor of the round's p50 (0 when either is missing).
func (r Round) Ratio() float64 { return ratio(r.P50Ms, r.FloorP50Ms) }

// Ratios are sandgate ÷ floor of the round's p50, p99 and claims-window API server CPU.
func (r Round) Ratios() FloorRatios {
	return FloorRatios{P50: ratio(r.P50Ms, r.FloorP50Ms), P99: ratio(r.P99Ms, r.FloorP99Ms), CPU: ratio(r.CPUSeconds, r.FloorCPUSeconds)}
}

// ContractRatios are sandgate ÷ contract floor of the round's p50, p99 and claims-window API
// server CPU; 0 where the round did not measure it.
func (r Round) ContractRatios() FloorRatios {
	return FloorRatios{
		P50: ratio(r.P50Ms, r.ContractFloorP50Ms), P99: ratio(r.P99Ms, r.ContractFloorP99Ms),
		CPU: ratio(r.CPUSeconds, r.ContractFloorCPUSeconds),
	}
}

// MedianRatios is the median, over the rounds that have it, of each ratio: how a scenario
// measured in rounds is judged. A ratio no round has is 0.
func MedianRatios(rounds []Round) FloorRatios { return medianRatios(rounds, Round.Ratios) }

// MedianContractRatios is MedianRatios of the ratios to the contract floor.
func MedianContractRatios(rounds []Round) FloorRatios {
	return medianRatios(rounds, Round.ContractRatios)
}

// medianRatios is the median, over the rounds that have it, of each ratio of of.
func medianRatios(rounds []Round, of func(Round) FloorRatios) FloorRatios {
	var p50, p99, cpu []float64
	for _, r := range rounds {
		q := of(r)
		if q.P50 > 0 {
			p50 = append(p50, q.P50)
		}
		if q.P99 > 0 {
			p99 = append(p99, q.P99)
		}
		if q.CPU > 0 {
			cpu = append(cpu, q.CPU)
		}
	}
	return FloorRatios{P50: median(p50), P99: median(p99), CPU: median(cpu)}
}

// MedianRound returns the index of the round whose p50 ratio is the median (the lower one
// of the middle two for an even count), or -1 without rounds.
func MedianRound(rounds []Round) int {
	if len(rounds) == 0 {
		return -1
	}
	idx := make([]int, len(rounds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rounds[a].Ratio(), rounds[b].Ratio()) })
	return idx[(len(idx)-1)/2]
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
