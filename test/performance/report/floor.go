package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The figures of this file set sandgate beside the floor of the same scenario: the API server
// of the same kind of cluster, started the same way in the same invocation, serving the same
// claims with the operator stopped and the webhooks removed, the load generator making each
// claim's three writes itself (create, bind patch, status patch). The ratios are what the
// targets in docs/measuring.md are written in.

// FloorRatios are sandgate ÷ floor; a ratio is 0 when either side is missing.
type FloorRatios struct {
	P50, P99, CPU float64
}

// Ratios divides r's client p50, p99 and claims-window API server CPU by its floor's; for a
// scenario measured in rounds, each is the median of the rounds' ratios.
func (r *Result) Ratios() FloorRatios {
	if len(r.Rounds) > 1 {
		return MedianRatios(r.Rounds)
	}
	f := r.Floor
	if f == nil || r.Latency.Client.Count == 0 || f.Latency.Client.Count == 0 {
		return FloorRatios{}
	}
	return FloorRatios{
		P50: ratio(r.Latency.Client.P50, f.Latency.Client.P50),
		P99: ratio(r.Latency.Client.P99, f.Latency.Client.P99),
		CPU: ratio(r.API.ClaimsCPUSeconds, f.API.ClaimsCPUSeconds),
	}
}

// ContractRatios divides r's client p50, p99 and claims-window API server CPU by its contract
// floor's; for a scenario measured in rounds, each is the median over the rounds that
// measured it. Zero where none did.
func (r *Result) ContractRatios() FloorRatios {
	if len(r.Rounds) > 1 {
		return MedianContractRatios(r.Rounds)
	}
	return RoundOf(r).ContractRatios()
}

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Resources of the claim's path, as webhook rules name them.
const (
	resourceClaims    = "sandboxclaims"
	resourceSandboxes = "sandboxes"
)

// admissionPerClaim is the webhook time per claim of the calls of the given operation by
// webhooks whose rules name resource, in milliseconds; false when no webhook matched.
func admissionPerClaim(r *Result, operation, resource string) (float64, bool) {
	if r.Claims.Created == 0 {
		return 0, false
	}
	var sum float64
	found := false
	for _, w := range r.Webhooks {
		if w.Operation == operation && slices.Contains(w.Resources, resource) {
			sum += w.SumSeconds
			found = true
		}
	}
	return sum * 1000 / float64(r.Claims.Created), found
}

// Phase names of sandgate_claim_phase_seconds.
const (
	phaseAdmissionToReconcile = "admission_to_reconcile"
	phaseBind                 = "bind"
	phaseStatus               = "status"
	phaseRoute                = "route"
	phaseReadyToStatus        = "ready_to_status"
)

// phase returns the operator's mean of the named phase in milliseconds.
func (o Operator) phase(name string) (float64, bool) {
	for _, p := range o.Phases {
		if p.Name == name && p.Count > 0 {
			return p.MeanMs, true
		}
	}
	return 0, false
}

// pathRow is one phase of a claim's path: the mean milliseconds per claim of sandgate and of
// the floor, nil where not measured, and how each was obtained.
type pathRow struct {
	name        string
	sandgate    *float64
	sandgateHow string
	floor       *float64
	floorHow    string
	// contract is the contract floor's (Result.ContractFloor), measured as the floor's.
	contract *float64
}

func val(v float64) *float64 { return &v }

// The rows of pathBreakdown, in order.
const (
	rowCreate = iota
	rowClaimWebhooks
	rowToReconcile
	rowBind
	rowBindWebhooks
	rowRoute
	rowStatus
	rowRest
	rowWatch
	rowTotal
)

// pathBreakdown splits the mean claim of r (and of its floors) into the phases of its path.
// The operator's phases come from its histogram, the webhooks' from the API server's, the
// client's from the load generator; what none of them measures is derived from the others
// and says so.
func pathBreakdown(r *Result) []pathRow {
	rows := []pathRow{
		{name: "create call (client: POST round trip, admission included)", sandgateHow: "load generator", floorHow: "load generator"},
		{name: "  of which admission webhooks on the claim CREATE", sandgateHow: "API server webhook histogram ÷ claims", floorHow: "no webhooks"},
		{name: "create returned → first reconcile starts (informer delivery, queue wait)", sandgateHow: "derived: (client − server view) + admission_to_reconcile − create call", floorHow: "load generator: create returned → bind call starts"},
		{name: "bind patch", sandgateHow: "operator: bind", floorHow: "load generator"},
		{name: "  of which admission webhooks on the Sandbox UPDATE", sandgateHow: "API server webhook histogram ÷ claims", floorHow: "no webhooks"},
		{name: "pod metadata patch (Ready means routable; the contract floor's, not the floor's)", sandgateHow: "operator: route", floorHow: "not made"},
		{name: "status patch", sandgateHow: "operator: status", floorHow: "load generator"},
		{name: "rest of the reconcile (reads, pick, decisions)", sandgateHow: "operator: ready_to_status − bind − route − status", floorHow: "load generator: between the patches"},
		{name: "status patch returned → client's watch shows Ready", sandgateHow: "derived: server view − admission_to_reconcile − ready_to_status", floorHow: "load generator"},
		{name: "total: create call → watch shows Ready", sandgateHow: "load generator (client view)", floorHow: "load generator"},
	}
	lat := r.Latency
	if lat.CreateCall.Count > 0 {
		rows[rowCreate].sandgate = val(lat.CreateCall.Mean)
	}
	if lat.Client.Count > 0 {
		rows[rowTotal].sandgate = val(lat.Client.Mean)
	}
	if v, ok := admissionPerClaim(r, "CREATE", resourceClaims); ok {
		rows[rowClaimWebhooks].sandgate = val(v)
	}
	if v, ok := admissionPerClaim(r, "UPDATE", resourceSandboxes); ok {
		rows[rowBindWebhooks].sandgate = val(v)
	}
	o := r.Operator
	a2r, okA2R := o.phase(phaseAdmissionToReconcile)
	r2s, okR2S := o.phase(phaseReadyToStatus)
	bind, okBind := o.phase(phaseBind)
	status, okStatus := o.phase(phaseStatus)
	if okBind {
		rows[rowBind].sandgate = val(bind)
	}
	if okStatus {
		rows[rowStatus].sandgate = val(status)
	}
	route, okRoute := o.phase(phaseRoute)
	if okRoute {
		rows[rowRoute].sandgate = val(route)
	}
	if okR2S && okBind && okStatus {
		rows[rowRest].sandgate = val(r2s - bind - route - status)
	}
	if okA2R && lat.Server.Count > 0 && lat.Client.Count > 0 && lat.CreateCall.Count > 0 {
		rows[rowToReconcile].sandgate = val(lat.Client.Mean - lat.Server.Mean + a2r - lat.CreateCall.Mean)
	}
	if okA2R && okR2S && lat.Server.Count > 0 {
		rows[rowWatch].sandgate = val(lat.Server.Mean - a2r - r2s)
	}

	if f := r.Floor; f != nil {
		floorColumn(rows, f, func(row *pathRow) **float64 { return &row.floor })
	}
	if c := r.ContractFloor; c != nil {
		floorColumn(rows, c, func(row *pathRow) **float64 { return &row.contract })
	}
	return rows
}

// floorColumn fills the cells cell picks of rows with f, a floor run: its create call and total
// from the load generator's clock, its admission round trips from the API server's histogram
// (none without webhooks), and its writes, the route write when it made one, timed by the load
// generator.
func floorColumn(rows []pathRow, f *Result, cell func(*pathRow) **float64) {
	set := func(i int, v float64) { *cell(&rows[i]) = val(v) }
	if f.Latency.CreateCall.Count > 0 {
		set(rowCreate, f.Latency.CreateCall.Mean)
	}
	if f.Latency.Client.Count > 0 {
		set(rowTotal, f.Latency.Client.Mean)
	}
	claimWebhooks, _ := admissionPerClaim(f, "CREATE", resourceClaims)
	bindWebhooks, _ := admissionPerClaim(f, "UPDATE", resourceSandboxes)
	set(rowClaimWebhooks, claimWebhooks)
	set(rowBindWebhooks, bindWebhooks)
	set(rowRoute, 0)
	if p := f.ClientPath; p != nil && p.Bind.Count > 0 {
		set(rowToReconcile, p.BeforeBind.Mean)
		set(rowBind, p.Bind.Mean)
		set(rowRoute, p.Route.Mean)
		set(rowStatus, p.Status.Mean)
		set(rowRest, p.BetweenPatches.Mean)
		set(rowWatch, p.WatchDelivery.Mean)
	}
}

// writeFloor writes the sections that compare each scenario with its floor.
func writeFloor(p func(string, ...any), results []*Result) {
	p("## Against the floor")
	p("")
	p("The floor of a scenario is the same claims against the same kind of cluster, started the")
	p("same way in the same `make bench` invocation (a fresh control plane each), with no operator")
	p("and no admission webhooks while the claims run: the pool is filled by the operator, which is then")
	p("stopped and its webhook configurations deleted, so that both runs bind the very same kind of")
	p("pool members; the load generator then makes each claim's three writes itself (POST the claim,")
	p("merge-patch a ready member to bind it with its resourceVersion as precondition, patch the")
	p("claim's status Ready). Every target is a ratio to this floor. A cold claim's floor writes what")
	p("a cold claim needs instead: the claim, its Sandbox and pod shaped as sandgate shapes them, the")
	p("Sandbox's status once the pod is Ready, and the claim's status. The **light floor** is the")
	p("lower bound beside it: the same claims and writes, bound to minimal Sandboxes the load")
	p("generator made (the required fields, the pool label and owner, a Ready status; no pods),")
	p("so the difference between the two floors is what the objects themselves cost the API server.")
	p("Where the CRDs serve v1alpha1 (burst-v1alpha1 only), a stand-in process of the load")
	p("generator's answers their conversion webhook during the floor run with sandgate's own")
	p("conversion code, as the operator's process does in sandgate's run: the API server")
	p("converts every write of any client into each served version's watch cache, so that cost")
	p("belongs to the API, controller or not. Latency is measured the same way for all runs: claim")
	p("create call → the load generator's watch shows Ready=True. API server CPU: kube-apiserver's")
	p("user + system time from just before the first claim's create call to the last claim's Ready")
	p("event, refill after it left out.")
	p("")
	p("**Reproducing it with any load generator.** (1) Start a fresh cluster, install the CRDs")
	p("(v1beta1 served only) and sandgate with its webhooks; create a template and a pool of N")
	p("members and wait for the pool's status to show N ready. (2) Stop sandgate and delete its")
	p("Mutating- and ValidatingWebhookConfigurations. (3) For each claim: start a clock, POST the")
	p("claim (warmPoolRef naming the pool); merge-patch one ready member, with its resourceVersion")
	p("as precondition, setting a controller ownerReference to the claim, the labels")
	p("`agents.x-k8s.io/claim-uid` and `agents.x-k8s.io/launch-type: warm` and removing")
	p("`agents.x-k8s.io/warm-pool-sandbox`; merge-patch the claim's status with Ready=True and")
	p("`status.sandbox.{name,podIPs}` from the member; stop the clock when a watch on the claims")
	p("shows Ready=True. (4) Start another fresh cluster the same way, leave sandgate running and")
	p("make only the POSTs, with the same clocks. Alternate (3) and (4) five times and take the")
	p("median of each ratio. For the light floor, skip sandgate in (1): create the pool with 0")
	p("replicas and N minimal Sandboxes yourself, then (3). For the contract floor, keep the webhook")
	p("configurations in (2), pointed at a server of your own that allows every call at once, and")
	p("in (3), between the bind and the status patch, merge-patch the member's pod: the label")
	p("`agents.x-k8s.io/claim-uid` set to the claim's UID (and `agents.x-k8s.io/created-by` if the")
	p("claim has it), the label `agents.x-k8s.io/warm-pool-sandbox` and the annotation")
	p("`cluster-autoscaler.kubernetes.io/safe-to-evict` removed.")
	p("")
	p("| scenario | p50 floor | p50 sandgate | ÷ | p99 floor | p99 sandgate | ÷ | API server CPU floor (s) | sandgate (s) | ÷ | other work floor / sandgate | load average floor / sandgate |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
	for _, r := range results {
		f := r.Floor
		if f == nil {
			p("| %s | not measured | %s | | | %s | | | %s | | - / %s | - / %.1f |", r.Scenario,
				ms(r.Latency.Client.Count, r.Latency.Client.P50, 0), ms(r.Latency.Client.Count, r.Latency.Client.P99, 0), cpu(r.API.ClaimsCPUSeconds),
				share(r.OtherWork), r.LoadAverage)
			continue
		}
		q := r.Ratios()
		name := r.Scenario
		if len(r.Rounds) > 1 {
			name += fmt.Sprintf(" (median of %d rounds)", len(r.Rounds))
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %.1f / %.1f |", name,
			ms(f.Latency.Client.Count, f.Latency.Client.P50, 0), ms(r.Latency.Client.Count, r.Latency.Client.P50, 0),
			ratioMark(q.P50, tgt(r, func(t *Targets) float64 { return t.FloorP50Ratio })),
			ms(f.Latency.Client.Count, f.Latency.Client.P99, 0), ms(r.Latency.Client.Count, r.Latency.Client.P99, 0),
			ratioMark(q.P99, tgt(r, func(t *Targets) float64 { return t.FloorP99Ratio })),
			cpu(f.API.ClaimsCPUSeconds), cpu(r.API.ClaimsCPUSeconds),
			ratioMark(q.CPU, tgt(r, func(t *Targets) float64 { return t.FloorCPURatio })),
			share(f.OtherWork), share(r.OtherWork), f.LoadAverage, r.LoadAverage)
	}
	p("")
	writeContractFloor(p, results)
	for _, r := range results {
		writeRounds(p, r)
		writeAdmissionFloor(p, r)
	}
	p("Other work: the CPU the machine spent outside the run's own processes (load generator,")
	p("operator, control plane) between the first claim and the last Ready, as a share of all its")
	p("CPUs, from /proc/stat: unlike the load average (a one-minute mean when the claims were")
	p("fired) it covers the window exactly. Other engineers share these machines; a ratio between")
	p("two runs whose other work differs much is a ratio of two machines.")
	p("")
	p("Milliseconds (nearest-rank percentiles). A ratio is marked ✓ or ✗ against issue 24's targets")
	p("for every scenario: p50 ≤ 1.3 × floor, p99 ≤ 1.5 ×, API server CPU ≤ 1.3 ×. The floor's own")
	p("figures (requests, CPU of every component) are in the per-scenario sections below.")
	p("")
}

// writeRounds writes every round of a scenario measured more than once, in run order.
func writeRounds(p func(string, ...any), r *Result) {
	if len(r.Rounds) < 2 {
		return
	}
	q := MedianRatios(r.Rounds)
	p("**%s** was measured in %d rounds, each a floor and a sandgate run on fresh clusters, one after", r.Scenario, len(r.Rounds))
	p("the other; its ratios in the table are the medians of the rounds' ratios (p50 %.2f, p99 %.2f, CPU %.2f),", q.P50, q.P99, q.CPU)
	p("its absolute figures those of the round with the median p50 ratio. Every round, in run order:")
	p("")
	p("| round | p50 floor / sandgate (ms) | ÷ | p99 floor / sandgate (ms) | ÷ | API server CPU floor / sandgate (s) | ÷ | contract floor p50 / p99 (ms), CPU (s) | light floor p50 / p99 (ms) |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, round := range r.Rounds {
		rq := round.Ratios()
		light, contract := "-", "-"
		if round.LightFloorP50Ms > 0 {
			light = fmt.Sprintf("%.1f / %.1f", round.LightFloorP50Ms, round.LightFloorP99Ms)
		}
		if round.ContractFloorP50Ms > 0 {
			contract = fmt.Sprintf("%.1f / %.1f, %s", round.ContractFloorP50Ms, round.ContractFloorP99Ms, cpu(round.ContractFloorCPUSeconds))
		}
		p("| %d | %.1f / %.1f | %s | %.1f / %.1f | %s | %s / %s | %s | %s | %s |", i+1, round.FloorP50Ms, round.P50Ms, ratioMark(rq.P50, 0),
			round.FloorP99Ms, round.P99Ms, ratioMark(rq.P99, 0), cpu(round.FloorCPUSeconds), cpu(round.CPUSeconds), ratioMark(rq.CPU, 0), contract, light)
	}
	p("")
}

// writeContractFloor writes, for the scenarios that measured it, sandgate against the contract
// floor: the medians of the rounds' ratios, the median round's figures, and what the contract's
// own writes and round trips cost over the floor.
func writeContractFloor(p func(string, ...any), results []*Result) {
	type row struct {
		r      *Result
		rounds []Round // those that measured the contract floor
	}
	var rows []row
	for _, r := range results {
		rounds := r.Rounds
		if len(rounds) < 2 {
			rounds = []Round{RoundOf(r)}
		}
		var measured []Round
		for _, round := range rounds {
			if round.ContractFloorP50Ms > 0 {
				measured = append(measured, round)
			}
		}
		if len(measured) > 0 {
			rows = append(rows, row{r: r, rounds: measured})
		}
	}
	if len(rows) == 0 {
		return
	}
	p("**Against the contract floor.** The floor makes three writes per warm claim; sandgate's API")
	p("asks for more of every warm claim, whoever serves it: the claim's create and the binding each")
	p("make an admission round trip (the stamp, the binding guard), and the claim is Ready only once")
	p("its pod is routable, which takes one more write, of the pod (issue 22: the router and users'")
	p("NetworkPolicies select on the pod's labels). The contract floor is the floor with these: the")
	p("webhook configurations kept and every call answered at once, allowing it, by a stand-in")
	p("process of its own (as the operator's process answers sandgate's), and after each bind one")
	p("merge patch of the member's pod as sandgate's route write makes it")
	p("(`sandgate-bench --floor --floor-admission --floor-route`), measured beside the floor in the")
	p("rounds the table names. What is left between it and sandgate is what sandgate itself adds: its")
	p("webhooks' decisions, the watch and queue between a claim's create and its reconcile, and the")
	p("operator's CPU beside the API server's on the same machine. A cold claim's pod is built with")
	p("its claim's labels, so cold's contract floor is its cold floor with the admission round trips")
	p("(the claim's create, the Sandbox's create). Each figure is the median over those rounds; the")
	p("ratios are medians of the rounds' ratios, marked against the same targets.")
	p("")
	p("| scenario | rounds | contract floor p50 / p99 (ms) | sandgate p50 / p99 (ms) | p50 ÷ | p99 ÷ | API server CPU contract floor / sandgate (s) | CPU ÷ | contract floor ÷ floor, p50 / CPU |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, w := range rows {
		r := w.r
		q := MedianContractRatios(w.rounds)
		of := func(f func(Round) float64) float64 {
			var vs []float64
			for _, round := range w.rounds {
				vs = append(vs, f(round))
			}
			return median(vs)
		}
		var overP50, overCPU []float64
		for _, round := range w.rounds {
			if a := ratio(round.ContractFloorP50Ms, round.FloorP50Ms); a > 0 {
				overP50 = append(overP50, a)
			}
			if a := ratio(round.ContractFloorCPUSeconds, round.FloorCPUSeconds); a > 0 {
				overCPU = append(overCPU, a)
			}
		}
		p("| %s | %d | %.1f / %.1f | %.1f / %.1f | %s | %s | %s / %s | %s | %.2f / %.2f |", r.Scenario, len(w.rounds),
			of(func(x Round) float64 { return x.ContractFloorP50Ms }), of(func(x Round) float64 { return x.ContractFloorP99Ms }),
			of(func(x Round) float64 { return x.P50Ms }), of(func(x Round) float64 { return x.P99Ms }),
			ratioMark(q.P50, tgt(r, func(t *Targets) float64 { return t.FloorP50Ratio })),
			ratioMark(q.P99, tgt(r, func(t *Targets) float64 { return t.FloorP99Ratio })),
			cpu(of(func(x Round) float64 { return x.ContractFloorCPUSeconds })), cpu(of(func(x Round) float64 { return x.CPUSeconds })),
			ratioMark(q.CPU, tgt(r, func(t *Targets) float64 { return t.FloorCPURatio })),
			median(overP50), median(overCPU))
	}
	p("")
}

// writeAdmissionFloor writes what the rounds of r measured of the admission floor: the floor
// again with the admission webhooks kept and answered at once, which tells the cost of the
// round trips a claim's writes make apart from the time sandgate's webhooks take to decide.
func writeAdmissionFloor(p func(string, ...any), r *Result) {
	var each []string
	var alone, sandgate []float64
	for _, round := range r.Rounds {
		if round.AdmissionFloorP50Ms <= 0 || round.FloorP50Ms <= 0 || round.P50Ms <= 0 {
			continue
		}
		a, s := ratio(round.AdmissionFloorP50Ms, round.FloorP50Ms), ratio(round.P50Ms, round.AdmissionFloorP50Ms)
		alone, sandgate = append(alone, a), append(sandgate, s)
		each = append(each, fmt.Sprintf("%.1f ÷ %.1f = %.2f and %.1f ÷ %.1f = %.2f",
			round.AdmissionFloorP50Ms, round.FloorP50Ms, a, round.P50Ms, round.AdmissionFloorP50Ms, s))
	}
	if len(each) == 0 {
		return
	}
	p("Each round of **%s** also measured its **admission floor**: the floor once more, on a fresh", r.Scenario)
	p("cluster, with sandgate's webhook configurations kept and every admission call answered at")
	p("once by a stand-in process, allowing it (`sandgate-bench --floor --floor-admission`). A claim's")
	p("create and its binding then make the admission round trips they make with sandgate, and nothing")
	p("is decided in them. p50 admission floor ÷ floor, and sandgate ÷ admission floor (ms), in run")
	p("order: %s. Medians: the round trips alone %.2f × the floor; sandgate %.2f × the admission floor.",
		strings.Join(each, "; "), median(alone), median(sandgate))
	p("")
}

// median of vs (the mean of the middle two for an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratioMark(v, target float64) string {
	if v == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.2f", v)
	if target == 0 {
		return s
	}
	if v <= target {
		return s + " ✓ (≤ " + trimFloat(target) + ")"
	}
	return s + " ✗ (≤ " + trimFloat(target) + ")"
}

func trimFloat(v float64) string { return fmt.Sprintf("%g", v) }

// share renders the other work's share of the machine.
func share(o *OtherWork) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*o.Share())
}

func cpu(v float64) string {
	if v < 0 {
		return "not read"
	}
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// writeAdmission writes the cost of each webhook per scenario.
func writeAdmission(p func(string, ...any), results []*Result) {
	p("## Admission cost per webhook")
	p("")
	p("From the API server's `apiserver_admission_webhook_admission_duration_seconds` (by webhook,")
	p("type and operation; the API server's view of a call, its network round trip included) and")
	p("`apiserver_admission_match_condition_exclusions_total`, between just before the first claim")
	p("and the pool being full again (refill included, as in the API server table). The mean is")
	p("exact; p50 and p99 are interpolated in the histogram's buckets (5 ms, 25 ms, 100 ms, ...),")
	p("so below 5 ms they only say how the calls would spread if even. Floor runs call no webhook.")
	p("")
	p("| scenario | webhook | type | operation | calls | per claim | mean (ms) | p50 ≈ (ms) | p99 ≈ (ms) | rejected | skipped by matchConditions |")
	p("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if len(r.Webhooks) == 0 {
			p("| %s | none called | | | | | | | | | |", r.Scenario)
			continue
		}
		for _, w := range r.Webhooks {
			mean, p50, p99 := "-", "-", "-"
			if w.Calls > 0 {
				mean, p50, p99 = fmt.Sprintf("%.2f", w.MeanMs), fmt.Sprintf("%.2f", w.P50Ms), fmt.Sprintf("%.2f", w.P99Ms)
			}
			p("| %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %.0f | %.0f |", r.Scenario, w.Name, w.Type, w.Operation,
				w.Calls, perClaim(w.Calls, r.Claims.Created), mean, p50, p99, w.Rejected, w.Excluded)
		}
	}
	p("")
}

// writePath writes the phase-by-phase breakdown of each scenario's mean claim.
func writePath(p func(string, ...any), results []*Result) {
	p("## A claim's path, phase by phase")
	p("")
	p("The mean claim of each scenario, in milliseconds, split at the points each side can time.")
	p("sandgate's phases come from the operator's `sandgate_claim_phase_seconds` (admission_to_reconcile:")
	p("the webhook's `webhook-first-observed-at` stamp → the claim controller's first reconcile of the")
	p("claim; bind, route and status: the patch requests; ready_to_status: first reconcile → status patch")
	p("returned), the webhooks' from the API server's histogram, the client's from the load")
	p("generator. Rows measured by *derived* are what is left of a measured total once the")
	p("measured phases are taken out, so they carry the error of every term (clock reads in two")
	p("processes, means over slightly different sets of claims) and can come out slightly negative.")
	p("\"of which\" rows are part of the row above; validating webhooks of one request run in")
	p("parallel, so their sum can exceed the wall time they took.")
	p("In bursts the means are dominated by queueing and say where claims wait, not what a step")
	p("costs.")
	p("")
	for _, r := range results {
		p("### %s", r.Scenario)
		p("")
		p("| phase | sandgate | contract floor | floor | sandgate measured by | floors measured by |")
		p("|---|---:|---:|---:|---|---|")
		for _, row := range pathBreakdown(r) {
			contract := "-" // measured in the serial scenarios' rounds and the bursts' first
			if row.contract != nil {
				contract = msOrNot(row.contract)
			}
			p("| %s | %s | %s | %s | %s | %s |", row.name, msOrNot(row.sandgate), contract, msOrNot(row.floor), row.sandgateHow, row.floorHow)
		}
		if !r.Operator.Measured || len(r.Operator.Phases) == 0 {
			p("")
			p("The operator of this run exports no `sandgate_claim_phase_seconds`: its phases are not measured.")
		}
		p("")
		if f := r.Floor; f != nil && f.ColdPath != nil {
			writeColdPath(p, r, f.ColdPath)
		}
	}
}

// writeColdPath writes the steps of a cold claim as the cold floor's load generator timed
// them, beside sandgate's operator phases of the same scenario.
func writeColdPath(p func(string, ...any), r *Result, cp *ColdPath) {
	p("Its cold floor, step by step (the load generator's clock; mean / p99 ms):")
	p("")
	p("| step | mean | p99 |")
	p("|---|---:|---:|")
	for _, row := range []struct {
		name string
		s    stats.Summary
	}{
		{"create call (claim)", r.Floor.Latency.CreateCall},
		{"Sandbox create", cp.Sandbox},
		{"pod create", cp.Pod},
		{"pod create returned → watch shows the pod Ready (scheduler, kwok)", cp.PodReady},
		{"Sandbox status patch", cp.SandboxStatus},
		{"claim status patch", cp.Status},
		{"status patch returned → watch shows the claim Ready", cp.WatchDelivery},
		{"total: create call → watch shows Ready", r.Floor.Latency.Client},
	} {
		p("| %s | %.2f | %.2f |", row.name, row.s.Mean, row.s.P99)
	}
	var phases []string
	for _, ph := range r.Operator.Phases {
		phases = append(phases, fmt.Sprintf("%s %.2f", ph.Name, ph.MeanMs))
	}
	if len(phases) > 0 {
		p("")
		p("sandgate's operator phases of the same scenario, mean ms: %s.", strings.Join(phases, ", "))
	}
	p("")
}

func msOrNot(v *float64) string {
	if v == nil || math.IsNaN(*v) {
		return "not measured"
	}
	return fmt.Sprintf("%.2f", *v)
}
