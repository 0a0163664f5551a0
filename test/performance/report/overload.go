package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
)

// The overload scenario (issue 37): the rate the floor sustains on this machine, measured in
// the same run, then sandgate offered that rate and multiples of it, each on a fresh cluster.
// An overloaded system that serves less than its capacity makes every client wait longer;
// one that degrades gracefully keeps serving what it accepts at the sustainable rate and
// refuses or queues the rest visibly.

// Overload is the overload scenario's figures.
type Overload struct {
	// Settings says the run's shape, for the report.
	Settings string `json:"settings"`
	// SustainableRate is the floor's goodput (OverloadArm.Goodput of the floor's arm), or the
	// rate given (--overload-rate) when the floor was not measured; the arms' rates are
	// multiples of it.
	SustainableRate float64 `json:"sustainableRate"`
	// Measured says whether SustainableRate is the floor's, measured in this run.
	Measured bool `json:"measured"`
	// ContractRate is the contract floor's goodput offered the same probe rate (the floor
	// with the admission webhooks kept and answered at once, and the route write): the
	// design's own limit. 0 when not measured.
	ContractRate float64       `json:"contractRate,omitempty"`
	Arms         []OverloadArm `json:"arms"`
}

// OverloadContractFloor is the arm of the contract floor.
const OverloadContractFloor = "contract floor"

// OverloadArm is one cluster's run of the overload scenario.
type OverloadArm struct {
	// Arm is "floor" or "sandgate"; Multiplier the offered rate ÷ SustainableRate (0 for the
	// floor, offered its probe rate).
	Arm        string  `json:"arm"`
	Multiplier float64 `json:"multiplier,omitempty"`
	// Rate is the rate asked for; Offered the creates sent per second from the first to the
	// last (below Rate when the load generator fell behind).
	Rate    float64 `json:"rate"`
	Offered float64 `json:"offered"`
	// Created claims were admitted; Refused were refused with 429 (not retried: the run
	// measures what the cluster accepts), RetryAfterSeconds the longest hint they carried.
	Created           int   `json:"created"`
	Refused           int   `json:"refused"`
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
	CreateErrors      int   `json:"createErrors,omitempty"`
	// Ready claims became Ready; Lost were admitted and not Ready by the end of the drain;
	// BoundTwice are Sandboxes two Ready claims named. 0 and 0 expected.
	Ready      int `json:"ready"`
	Lost       int `json:"lost"`
	BoundTwice int `json:"boundTwice"`
	// Goodput is claims Ready per second between the end of the warm-up (a quarter of the
	// arrivals: the full pool serves the first claims at once) and the last arrival;
	// GoodputRatio is Goodput ÷ SustainableRate.
	Goodput      float64 `json:"goodput"`
	GoodputRatio float64 `json:"goodputRatio,omitempty"`
	// ContractRatio is Goodput ÷ the contract floor's goodput (Overload.ContractRate).
	ContractRatio float64 `json:"contractRatio,omitempty"`
	// OracleRatio is a sandgate arm's Goodput ÷ the contract floor's at the same multiple,
	// its stand-in shedding as an oracle would (the most an operator of the contract serves
	// there, unless OraclePastCapacity); 0 without that arm.
	OracleRatio float64 `json:"oracleRatio,omitempty"`
	// OraclePastCapacity says that the oracle at this arm's multiple served less than 0.9 of
	// what it admitted: the rate it admits at, measured without refusals, was past what the
	// cluster served under them, so OracleRatio is no share of a bound.
	OraclePastCapacity bool `json:"oraclePastCapacity,omitempty"`
	// AdmittedRate is the claims admitted per second of arrivals.
	AdmittedRate float64 `json:"admittedRate,omitempty"`
	// P50Ms and P99Ms are the served claims' latency, from their (single) create call to
	// the Ready event; P99Ratio is P99Ms ÷ the 1× arm's.
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	P99Ratio float64 `json:"p99Ratio,omitempty"`
	// WarmShare is the share of Ready claims served by a pool member.
	WarmShare float64 `json:"warmShare"`
	// Where the time went: kube-apiserver's and the operator's CPU seconds over the run, and
	// the claims' path phase by phase (the operator's sandgate_claim_phase_seconds).
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds,omitempty"`
	OperatorCPUSeconds  float64 `json:"operatorCPUSeconds,omitempty"`
	// LoadGeneratorCPUSeconds is the load generator's own CPU over the same window: on one
	// machine, the clients' cost of offering the load (and the floors' binds and refill)
	// comes out of the cluster's CPUs.
	LoadGeneratorCPUSeconds float64 `json:"loadGeneratorCPUSeconds,omitempty"`
	// EtcdCPUSeconds and KwokCPUSeconds are etcd's and kwok's CPU over the run. kwok plays
	// the kubelets: a pod waits for its status write there, and on a machine short of CPU
	// the simulated kubelets can be the cluster's bound.
	EtcdCPUSeconds float64 `json:"etcdCPUSeconds,omitempty"`
	KwokCPUSeconds float64 `json:"kwokCPUSeconds,omitempty"`
	Phases         []Phase `json:"phases,omitempty"`
	// MachineBusy is the share of the machine's CPUs busy over the claims' window (every
	// process's): near 1, the arm was bound by CPU.
	MachineBusy float64 `json:"machineBusy,omitempty"`
	// OtherWork is the share of the machine's CPUs spent outside the run's own processes
	// over the same window: the shared machine's other work.
	OtherWork float64 `json:"otherWork,omitempty"`
	// Writes are the API server's mutating requests over the run, every client's, by "VERB
	// resource[/subresource] code" (refused creates included), largest first; Reads its
	// reading ones by "VERB resource[/subresource]".
	Writes      []scrape.Count `json:"writes,omitempty"`
	Reads       []scrape.Count `json:"reads,omitempty"`
	LoadAverage float64        `json:"loadAverage"`
	Error       string         `json:"error,omitempty"`
}

// OverloadArmOf is the arm of a sustained run's result r, its goodput counted from warmUp
// seconds after the first create to the end of the arrivals (arrivals seconds).
func OverloadArmOf(arm string, multiplier float64, r *Result, warmUp, arrivals float64) OverloadArm {
	a := OverloadArm{Arm: arm, Multiplier: multiplier, Created: r.Claims.Created, CreateErrors: r.Claims.CreateErrors,
		Ready: r.Claims.Ready, Lost: r.Claims.NeverReady, P50Ms: r.Latency.Client.P50, P99Ms: r.Latency.Client.P99,
		LoadAverage: r.LoadAverage, APIServerCPUSeconds: r.API.ClaimsCPUSeconds, OperatorCPUSeconds: r.Operator.CPUSeconds,
		LoadGeneratorCPUSeconds: r.LoadGeneratorCPUSeconds,
		Phases:                  r.Operator.Phases, Writes: r.API.ByVerbResourceCode, Reads: r.API.ReadsByVerbResource,
		MachineBusy: round2(r.OtherWork.BusyShare()), OtherWork: round2(r.OtherWork.Share())}
	for _, c := range r.Components {
		switch c.Name {
		case "etcd":
			a.EtcdCPUSeconds = c.CPUSeconds
		case "kwok":
			a.KwokCPUSeconds = c.CPUSeconds
		}
	}
	if s := r.Sustained; s != nil {
		a.Rate, a.Offered, a.WarmShare = s.Rate, s.AchievedRate, s.WarmShare
		a.Refused, a.RetryAfterSeconds, a.BoundTwice = s.Refused, s.RetryAfterSeconds, s.BoundTwice
		if s.StoppedBehindSeconds > 0 {
			arrivals = s.StoppedBehindSeconds
		}
	}
	a.Goodput = Goodput(r.Samples, warmUp, arrivals)
	if arrivals > 0 {
		a.AdmittedRate = round2(float64(a.Created) / arrivals)
	}
	return a
}

// Goodput is the claims of samples Ready per second within [from, to) seconds after the
// run's first create; 0 for an empty window.
func Goodput(samples []Sample, from, to float64) float64 {
	if to <= from {
		return 0
	}
	n := 0
	for _, s := range samples {
		if at := s.AtSeconds + s.Ms/1000; at >= from && at < to {
			n++
		}
	}
	return round2(float64(n) / (to - from))
}

// SetRatios sets each arm's goodput ratio to SustainableRate, p99 ratio to the 1× arm's, and
// a sandgate arm's goodput ratio to the contract floor's at its multiple.
func (o *Overload) SetRatios() {
	var ref float64
	oracle := map[float64]OverloadArm{}
	for _, a := range o.Arms {
		switch {
		case a.Error != "":
		case a.Arm == "sandgate" && a.Multiplier == 1:
			ref = a.P99Ms
		case a.Arm == OverloadContractFloor && a.Multiplier > 1:
			oracle[a.Multiplier] = a
		}
	}
	for i := range o.Arms {
		a := &o.Arms[i]
		if a.Error != "" {
			continue
		}
		if o.SustainableRate > 0 {
			a.GoodputRatio = round2(a.Goodput / o.SustainableRate)
		}
		if o.ContractRate > 0 {
			a.ContractRatio = round2(a.Goodput / o.ContractRate)
		}
		if ref > 0 && a.Arm == "sandgate" {
			a.P99Ratio = round2(a.P99Ms / ref)
		}
		if or := oracle[a.Multiplier]; or.Goodput > 0 && a.Arm == "sandgate" {
			a.OracleRatio = round2(a.Goodput / or.Goodput)
			a.OraclePastCapacity = or.Goodput < 0.9*or.AdmittedRate
		}
	}
}

// Met says whether the arm meets issue 37's goals: goodput ≥ 90% of the sustainable rate,
// p99 within 2 × the 1× arm's, nothing lost, nothing bound twice. Only sandgate's arms past
// the sustainable rate are judged.
func (a OverloadArm) Met() (met, judged bool) {
	if a.Arm != "sandgate" || a.Multiplier <= 1 || a.Error != "" {
		return false, false
	}
	return a.GoodputRatio >= 0.9 && a.P99Ratio > 0 && a.P99Ratio <= 2 && a.Lost == 0 && a.BoundTwice == 0, true
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// overloadHeader and overloadRow are the table of the arms, in text and in markdown.
var overloadHeader = []string{"arm", "offered (claims/s)", "admitted", "refused (429)", "Ready", "lost", "bound twice",
	"goodput (claims/s)", "goodput ÷ sustainable", "goodput ÷ contract floor", "goodput ÷ contract floor at this multiple", "p50 (ms)", "p99 (ms)", "p99 ÷ 1×", "warm", "goals", "load average"}

// name is the arm's name in the tables: "floor", "sandgate 2×".
func (a OverloadArm) name() string {
	if a.Multiplier > 0 {
		return fmt.Sprintf("%s %g×", a.Arm, a.Multiplier)
	}
	return a.Arm
}

func overloadRow(a OverloadArm) []string {
	name := a.name()
	if a.Error != "" {
		return []string{name, "failed: " + a.Error}
	}
	ratio := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	refused := fmt.Sprintf("%d", a.Refused)
	if a.RetryAfterSeconds > 0 {
		refused += fmt.Sprintf(" (retry after %d s)", a.RetryAfterSeconds)
	}
	goals := "-"
	if met, judged := a.Met(); judged {
		goals = map[bool]string{true: "✓", false: "✗"}[met]
	}
	return []string{name, fmt.Sprintf("%g / %.1f", a.Rate, a.Offered), fmt.Sprintf("%d", a.Created), refused,
		fmt.Sprintf("%d", a.Ready), fmt.Sprintf("%d", a.Lost), fmt.Sprintf("%d", a.BoundTwice),
		fmt.Sprintf("%.1f", a.Goodput), ratio(a.GoodputRatio), ratio(a.ContractRatio), oracleRatio(a), fmt.Sprintf("%.1f", a.P50Ms), fmt.Sprintf("%.1f", a.P99Ms),
		ratio(a.P99Ratio), fmt.Sprintf("%.1f%%", 100*a.WarmShare), goals, fmt.Sprintf("%.1f", a.LoadAverage)}
}

// oracleRatio is the arm's goodput ÷ the oracle's, marked † when the oracle admitted past what
// the cluster served (pastCapacityNote).
func oracleRatio(a OverloadArm) string {
	switch {
	case a.OracleRatio == 0:
		return "-"
	case a.OraclePastCapacity:
		return fmt.Sprintf("%.2f †", a.OracleRatio)
	}
	return fmt.Sprintf("%.2f", a.OracleRatio)
}

// oraclePastCapacity says whether an arm's ratio to its oracle is marked †.
func (o *Overload) oraclePastCapacity() bool {
	return slices.ContainsFunc(o.Arms, func(a OverloadArm) bool { return a.OraclePastCapacity })
}

// pastCapacityNote explains the † of oracleRatio.
const pastCapacityNote = "† the oracle at that multiple served under 0.9 of the rate it admitted claims at: that rate, the contract floor's measured without refusals, was past what the cluster served under them, so it bounds nothing there."

// costRows are the rows of where each arm's time went: CPU, and the claim phases' means.
func overloadCostRows(o *Overload) [][]string {
	var rows [][]string
	for _, a := range o.Arms {
		if a.Error != "" || (a.APIServerCPUSeconds == 0 && len(a.Phases) == 0) {
			continue
		}
		var phases []string
		for _, ph := range a.Phases {
			phases = append(phases, fmt.Sprintf("%s %.1f", ph.Name, ph.MeanMs))
		}
		rows = append(rows, []string{a.name(), fmt.Sprintf("%.1f", a.APIServerCPUSeconds), fmt.Sprintf("%.1f", a.OperatorCPUSeconds),
			fmt.Sprintf("%.1f", a.LoadGeneratorCPUSeconds), cpu(a.EtcdCPUSeconds), cpu(a.KwokCPUSeconds),
			perReady(a, a.APIServerCPUSeconds*1000, "%.1f"), perReady(a, sumCounts(a.Writes), "%.1f"), busy(a.MachineBusy), busy(a.OtherWork),
			orDash(strings.Join(phases, ", "))})
	}
	return rows
}

var overloadCostHeader = []string{"arm", "kube-apiserver CPU (s)", "operator CPU (s)", "load generator CPU (s)", "etcd CPU (s)",
	"kwok CPU (s)", "kube-apiserver CPU per Ready claim (ms)",
	"writes per Ready claim", "machine CPU busy", "of which other work", "claim phases, mean ms"}

func busy(share float64) string {
	if share == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*share)
}

// perReady is v per Ready claim of the arm in format f; "-" when nothing was Ready or v is 0.
func perReady(a OverloadArm, v float64, f string) string {
	if a.Ready == 0 || v == 0 {
		return "-"
	}
	return fmt.Sprintf(f, v/float64(a.Ready))
}

func sumCounts(cs []scrape.Count) float64 {
	var n float64
	for _, c := range cs {
		n += c.Count
	}
	return n
}

// overloadRequestLines are each arm's requests per Ready claim by kind, the largest first:
// what a served claim costs the API server, refusals and the pool's refill included.
func overloadRequestLines(o *Overload) []string {
	var out []string
	for _, a := range o.Arms {
		if a.Error != "" || a.Ready == 0 || len(a.Writes) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: writes %s; reads %s", a.name(), perReadyCounts(a, a.Writes), perReadyCounts(a, a.Reads)))
	}
	return out
}

// perReadyCounts are the counts of cs per Ready claim of the arm, those of 0.05 or more, "-"
// for none.
func perReadyCounts(a OverloadArm, cs []scrape.Count) string {
	var parts []string
	for _, c := range cs {
		if per := c.Count / float64(a.Ready); per >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.2f", c.Key, per))
		}
	}
	return orDash(strings.Join(parts, ", "))
}

// WriteOverloadText prints the overload scenario's figures.
func WriteOverloadText(w io.Writer, r *Result) error {
	o := r.Overload
	if o == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== scenario %s: %s\n  sustainable rate %.1f claims/s (%s)%s\n  %s\n", r.Scenario, o.Settings,
		o.SustainableRate, sustainableFrom(o), contractRate(o), strings.Join(overloadHeader, " | "))
	for _, a := range o.Arms {
		fmt.Fprintf(&b, "  %s\n", strings.Join(overloadRow(a), " | "))
	}
	if o.oraclePastCapacity() {
		fmt.Fprintf(&b, "  %s\n", pastCapacityNote)
	}
	if rows := overloadCostRows(o); len(rows) > 0 {
		fmt.Fprintf(&b, "  where the time went:\n  %s\n", strings.Join(overloadCostHeader, " | "))
		for _, row := range rows {
			fmt.Fprintf(&b, "  %s\n", strings.Join(row, " | "))
		}
	}
	if lines := overloadRequestLines(o); len(lines) > 0 {
		fmt.Fprintf(&b, "  requests per Ready claim (every client's, refusals and refill included):\n")
		for _, l := range lines {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("printing the overload figures: %w", err)
	}
	return nil
}

// contractRate says the contract floor's rate when it was measured.
func contractRate(o *Overload) string {
	if o.ContractRate <= 0 {
		return ""
	}
	return fmt.Sprintf("; the contract floor's %.1f claims/s", o.ContractRate)
}

func sustainableFrom(o *Overload) string {
	if o.Measured {
		return "the floor's goodput, measured in this run"
	}
	return "given, not measured"
}

// overloads are the overload scenario's results among all.
func overloads(all []*Result) []*Result {
	var out []*Result
	for _, r := range all {
		if r.Overload != nil {
			out = append(out, r)
		}
	}
	return out
}

// writeOverloads writes the section of the overload scenario's results.
func writeOverloads(p func(string, ...any), results []*Result) {
	if len(results) == 0 {
		return
	}
	p(sectionOverload)
	p("")
	p("The rate the floor sustains on this machine is measured first, in the same run: the floor")
	p("(no controller; the load generator binds and refills) is offered more than it can serve, and")
	p("what it serves per second is the sustainable rate. Sandgate is then offered that rate and")
	p("multiples of it, each on a fresh cluster, claims arriving at a steady rate whatever the")
	p("cluster does. Goodput: claims Ready per second after the first quarter of the arrivals (the")
	p("full pool serves the first claims at once) until the last arrival. A create refused with 429")
	p("is counted, not retried. Lost: admitted and not Ready when the run ended; bound twice: a")
	p("Sandbox two Ready claims name. Latency of the served claims: from the create call to the")
	p("Ready event. Goals (issue 37), past the sustainable rate: goodput ≥ 0.9 × sustainable, p99")
	p("≤ 2 × the 1× arm's, 0 lost, 0 bound twice. The contract floor is offered the floor's probe")
	p("rate too: the floor with sandgate's admission webhooks kept and answered at once by a")
	p("stand-in process, and the route write after each bind, which any operator of this API's")
	p("contract pays; goodput ÷ it is the share of the design's own limit sandgate serves. Past")
	p("the sustainable rate the contract floor runs again at each multiple (\"contract floor 2×\"),")
	p("right before sandgate's arm at that multiple, its stand-in admitting claims at the rate the")
	p("contract floor sustained and refusing the rest with 429: an oracle that knows the capacity")
	p("and sheds at no cost of its own, every refusal paying what any refusal costs; sandgate's")
	p("goodput is also given ÷ the oracle's at the same multiple. The capacity it knows is the one")
	p("measured without refusals: where the refusals take enough of the machine, it admits more")
	p("than the cluster then serves, and is no bound.")
	p("")
	for _, r := range results {
		o := r.Overload
		o.SetRatios() // derived: results written before a ratio was added get it too
		p("**%s** (%s): %s; sustainable rate **%.1f claims/s** (%s)%s.", r.Scenario, measuredAt(r), o.Settings,
			o.SustainableRate, sustainableFrom(o), contractRate(o))
		p("")
		tableHead(p, overloadHeader)
		for _, a := range o.Arms {
			row := overloadRow(a)
			for len(row) < len(overloadHeader) {
				row = append(row, "")
			}
			p("| %s |", strings.Join(row, " | "))
		}
		p("")
		if o.oraclePastCapacity() {
			p(pastCapacityNote)
			p("")
		}
		if rows := overloadCostRows(o); len(rows) > 0 {
			p("Where the time went (CPU over the claims' window; the operator's claim phases):")
			p("")
			tableHead(p, overloadCostHeader)
			for _, row := range rows {
				p("| %s |", strings.Join(row, " | "))
			}
			p("")
		}
		if lines := overloadRequestLines(o); len(lines) > 0 {
			p("Requests per Ready claim (every client's, refusals and the pool's refill included):")
			p("")
			for _, l := range lines {
				p("- %s", l)
			}
			p("")
		}
	}
}
