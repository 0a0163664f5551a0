package report

// The fair-share scenario's figures (issue 36): two tenants on one pool, tenant A steady,
// tenant B bursting to several times the pool, in three arms of one run: A alone, A and B
// without a ClaimPolicy, A and B with one (A a reserved warm share, B a limit on its claims).

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The arms of the fair-share scenario, in the order they run.
const (
	ArmAlone    = "alone"
	ArmNoPolicy = "no-policy"
	ArmPolicy   = "policy"
	// ArmForbidden is B's bursts refused by authorization before any admission (B holds no
	// role in the namespace): the least any refusal of them can cost A. Not run by default.
	ArmForbidden = "forbidden"
	// ArmFloorAlone and ArmFloorPolicy are A alone, and A and B under the policy, on the
	// contract floor: no operator, the load generator serving the claims, deciding B's
	// admission as the policy would and sending B's refused creates as dry runs. Their ratio
	// is what B's admitted work and refusals cost A on the API server alone. Not run by
	// default.
	ArmFloorAlone  = "floor-alone"
	ArmFloorPolicy = "floor-policy"
)

// FairShareArms are the arms the scenario runs by default, in order.
var FairShareArms = []string{ArmAlone, ArmNoPolicy, ArmPolicy}

// FairShareKnownArms are every arm the scenario knows.
var FairShareKnownArms = []string{ArmAlone, ArmNoPolicy, ArmPolicy, ArmForbidden, ArmFloorAlone, ArmFloorPolicy}

// IsFloorArm reports an arm run on the contract floor.
func IsFloorArm(arm string) bool { return arm == ArmFloorAlone || arm == ArmFloorPolicy }

// FairShare is the fair-share scenario's run: its settings and each arm's figures.
type FairShare struct {
	// Settings says the load and the policy, for a person.
	Settings string     `json:"settings"`
	Arms     []ShareArm `json:"arms"`
}

// ShareArm is one arm's figures.
type ShareArm struct {
	Arm string `json:"arm"`
	// Error is why the arm did not run to its end; the figures are empty then.
	Error string `json:"error,omitempty"`
	// A is tenant A's claims: created, Ready, served warm, and its client latency (create
	// call to the watch's Ready event) of the Ready ones.
	ACreated   int           `json:"aCreated"`
	AReady     int           `json:"aReady"`
	AWarm      int           `json:"aWarm"`
	AWarmShare float64       `json:"aWarmShare"`
	ALatency   stats.Summary `json:"aLatency"`
	// ACall is the create call of A's Ready claims (admission included), and AAfterCall the
	// rest of their latency (create returned to the Ready event): which of the two A's tail
	// is in.
	ACall      stats.Summary `json:"aCall"`
	AAfterCall stats.Summary `json:"aAfterCall"`
	// ASlowest are A's slowest Ready claims, slowest first, for reading beside the
	// operator's log.
	ASlowest []SlowClaim `json:"aSlowest,omitempty"`
	// AP99Ratio is A's p99 ÷ A's p99 in the alone arm of the same run (a floor arm's: in the
	// floor-alone arm); 0 when unknown.
	AP99Ratio float64 `json:"aP99Ratio,omitempty"`
	// B is tenant B's creates: refused with 429 (and how long the create call took to say
	// so), admitted, served (Ready), failed otherwise.
	BCreated  int           `json:"bCreated"`
	BRefused  int           `json:"bRefused"`
	BRefusal  stats.Summary `json:"bRefusal"`
	BAdmitted int           `json:"bAdmitted"`
	BServed   int           `json:"bServed"`
	BErrors   int           `json:"bErrors"`
	// WarmStarting counts the claims of both tenants the operator served warm from a member
	// still starting (their latency is the member's start-up), ColdStarts those it served
	// cold; -1 when the operator's metrics were not read.
	WarmStarting int     `json:"warmStarting"`
	ColdStarts   float64 `json:"coldStarts"`
	// Phases are the operator's claim phases over the arm (both tenants), p50 and p99
	// estimated in sandgate_claim_phase_seconds' buckets.
	Phases []PhaseQuantiles `json:"phases,omitempty"`
	// LoadAverage is the machine's 1-minute load average when the arm's load started (the
	// machine is shared: a figure is read beside it).
	LoadAverage float64 `json:"loadAverage"`
	// RefusalCost says where the time of B's refusals went; nil for an arm without a policy.
	RefusalCost *RefusalCost `json:"refusalCost,omitempty"`
}

// RefusalCost splits the latency of B's refusals (BRefusal, measured by the client) into what
// each party spent on them, measured in the same arm: the operator's own time on a refused
// claim's ClaimPolicies, the API server's call of the stamping webhook that refused it, and a
// control: a create by B at the same moment that the API server refuses without calling any
// webhook. The control is the API server's own floor for a refused create at that moment
// (authentication, impersonation, API Priority and Fairness, authorization, the connection,
// the client, and the CPU they wait for while A's and B's claims are served); a refusal's
// time beyond it is decoding, the admission chain, and the webhook call.
type RefusalCost struct {
	// Sandgate is sandgate_claimpolicy_admission_seconds{result="refused"} over the arm:
	// the operator's time from reading a claim's policies to its refusal.
	Sandgate Histogram `json:"sandgate"`
	// Webhook is apiserver_admission_webhook_admission_duration_seconds of the claim
	// stamping webhook's calls that refused a create (rejected="true"): the API server's
	// round trip to the operator, its TLS and encoding included.
	Webhook Histogram `json:"webhook"`
	// Control is the control creates refused with 403 Forbidden, timed as B's are (call to
	// answer); ControlOther counts those answered otherwise (the control did not hold).
	Control      stats.Summary `json:"control"`
	ControlOther int           `json:"controlOther,omitempty"`
	// LedgerWrites counts the operator's writes of ClaimLedgers over the arm by writer and
	// result ("admission success", "leader conflict", ...): a refusal its batch decides
	// waits for the write in flight, and each conflict adds a read and a write.
	LedgerWrites map[string]float64 `json:"ledgerWrites,omitempty"`
	// Errors are the measurements that failed (a scrape), so that a figure left empty says why.
	Errors []string `json:"errors,omitempty"`
}

// Histogram is what a Prometheus histogram observed over an arm: how many, their exact mean,
// and its p50 and p99 interpolated in its buckets (an estimate: see scrape.Snapshot.Quantile;
// the API server's webhook buckets are 5, 25, 100 ms and up, the operator's 1, 2.5, 5, 10,
// 25, 50, 100 ms and up).
type Histogram struct {
	Count  float64 `json:"count"`
	MeanMs float64 `json:"meanMs"`
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	// Buckets are its cumulative buckets, the finite ones (Count is the +Inf one): how many
	// observations took at most LeMs, for a reader who wants more than two quantiles.
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is a histogram's count of observations of at most LeMs.
type Bucket struct {
	LeMs  float64 `json:"leMs"`
	Count float64 `json:"count"`
}

// AClaim is what the run saw of one of tenant A's claims.
type AClaim struct {
	// Ready says the claim became Ready; Latency is from its create call to the Ready event.
	Ready   bool
	Latency time.Duration
	// Name is the claim's; Sent is when its create call started, Call how long it took.
	Name string
	Sent time.Time
	Call time.Duration
	// Warm says its Sandbox carries launch-type warm.
	Warm bool
}

// PhaseQuantiles is one phase of the operator's claim path over an arm.
type PhaseQuantiles struct {
	Name  string  `json:"name"`
	Count float64 `json:"count"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// SlowClaim is one slow claim of A's: its name, when its create call started (ms since the
// arm's first claim), how long the call took and its latency to Ready.
type SlowClaim struct {
	Name      string  `json:"name"`
	AtMs      float64 `json:"atMs"`
	CallMs    float64 `json:"callMs"`
	LatencyMs float64 `json:"latencyMs"`
	Warm      bool    `json:"warm"`
}

// millis is d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// slowestShown is how many of A's slowest claims an arm keeps.
const slowestShown = 8

// BCreate is what the run saw of one of tenant B's creates.
type BCreate struct {
	// Call is how long the create call took.
	Call time.Duration
	// Refused says it was refused with 429 Too Many Requests; Err that it failed otherwise.
	Refused, Err bool
	// Served says the admitted claim became Ready.
	Served bool
}

// ShareFigures are an arm's figures from its claims.
func ShareFigures(arm string, a []AClaim, b []BCreate) ShareArm {
	out := ShareArm{Arm: arm, ACreated: len(a), BCreated: len(b)}
	var lat, call, after []time.Duration
	var ready []AClaim
	var first time.Time
	for _, c := range a {
		if !c.Sent.IsZero() && (first.IsZero() || c.Sent.Before(first)) {
			first = c.Sent
		}
		if !c.Ready {
			continue
		}
		out.AReady++
		ready = append(ready, c)
		lat = append(lat, c.Latency)
		call = append(call, c.Call)
		after = append(after, c.Latency-c.Call)
		if c.Warm {
			out.AWarm++
		}
	}
	if out.AReady > 0 {
		out.AWarmShare = float64(out.AWarm) / float64(out.AReady)
	}
	out.ALatency = stats.Summarize(lat)
	out.ACall = stats.Summarize(call)
	out.AAfterCall = stats.Summarize(after)
	slices.SortStableFunc(ready, func(x, y AClaim) int { return int(y.Latency - x.Latency) })
	for _, c := range ready[:min(slowestShown, len(ready))] {
		out.ASlowest = append(out.ASlowest, SlowClaim{Name: c.Name, AtMs: millis(c.Sent.Sub(first)), CallMs: millis(c.Call),
			LatencyMs: millis(c.Latency), Warm: c.Warm})
	}
	var refusals []time.Duration
	for _, c := range b {
		switch {
		case c.Refused:
			out.BRefused++
			refusals = append(refusals, c.Call)
		case c.Err:
			out.BErrors++
		default:
			out.BAdmitted++
			if c.Served {
				out.BServed++
			}
		}
	}
	out.BRefusal = stats.Summarize(refusals)
	return out
}

// SetRatios sets each arm's AP99Ratio against the p99 of its alone arm (the floor arms': the
// floor-alone arm), when there is one.
func (f *FairShare) SetRatios() {
	var alone, floorAlone float64
	for _, a := range f.Arms {
		switch {
		case a.Error != "":
		case a.Arm == ArmAlone:
			alone = a.ALatency.P99
		case a.Arm == ArmFloorAlone:
			floorAlone = a.ALatency.P99
		}
	}
	for i := range f.Arms {
		a := &f.Arms[i]
		base := alone
		if IsFloorArm(a.Arm) {
			base = floorAlone
		}
		a.AP99Ratio = 0
		if base > 0 && a.Error == "" && a.ALatency.Count > 0 {
			a.AP99Ratio = a.ALatency.P99 / base
		}
	}
}

// shareHeader and shareRow are the table of the arms, in text and in markdown.
var shareHeader = []string{"arm", "A Ready", "A warm", "A p50 (ms)", "A p99 (ms)", "A p99 ÷ alone",
	"B creates", "B refused (429)", "refusal p50 (ms)", "refusal p99 (ms)", "B admitted", "B served", "B errors", "load average"}

func shareRow(a ShareArm) []string {
	if a.Error != "" {
		return []string{a.Arm, "failed: " + a.Error}
	}
	ratio := "-"
	if a.AP99Ratio > 0 {
		ratio = fmt.Sprintf("%.2f", a.AP99Ratio)
	}
	row := []string{a.Arm, fmt.Sprintf("%d of %d", a.AReady, a.ACreated), fmt.Sprintf("%.2f%%", 100*a.AWarmShare),
		fmt.Sprintf("%.1f", a.ALatency.P50), fmt.Sprintf("%.1f", a.ALatency.P99), ratio}
	load := fmt.Sprintf("%.1f", a.LoadAverage)
	if a.BCreated == 0 {
		return append(row, "-", "-", "-", "-", "-", "-", "-", load)
	}
	refusal := func(v float64) string {
		if a.BRefused == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	return append(row, fmt.Sprint(a.BCreated), fmt.Sprint(a.BRefused), refusal(a.BRefusal.P50), refusal(a.BRefusal.P99),
		fmt.Sprint(a.BAdmitted), fmt.Sprint(a.BServed), fmt.Sprint(a.BErrors), load)
}

// costHeader and costRow are the table of where B's refusals' time went, per arm with a
// policy.
var costHeader = []string{"arm", "refusal p50 (ms)", "refusal p99 (ms)", "sandgate p50 (ms)", "sandgate p99 (ms)",
	"webhook call p50 (ms)", "webhook call p99 (ms)", "webhook mean (ms)", "control (403) p50 (ms)", "control (403) p99 (ms)"}

func costRow(a ShareArm) []string {
	c := a.RefusalCost
	f := func(v float64, n float64) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	refused, control := float64(a.BRefusal.Count), float64(c.Control.Count)
	return []string{a.Arm, f(a.BRefusal.P50, refused), f(a.BRefusal.P99, refused),
		f(c.Sandgate.P50Ms, c.Sandgate.Count) + fmt.Sprintf(" (%.0f)", c.Sandgate.Count), f(c.Sandgate.P99Ms, c.Sandgate.Count),
		f(c.Webhook.P50Ms, c.Webhook.Count) + fmt.Sprintf(" (%.0f)", c.Webhook.Count), f(c.Webhook.P99Ms, c.Webhook.Count), f(c.Webhook.MeanMs, c.Webhook.Count),
		f(c.Control.P50, control) + fmt.Sprintf(" (%d)", c.Control.Count), f(c.Control.P99, control)}
}

// costs are the arms that say where their refusals' time went.
func costs(f *FairShare) []ShareArm {
	var out []ShareArm
	for _, a := range f.Arms {
		if a.Error == "" && a.RefusalCost != nil {
			out = append(out, a)
		}
	}
	return out
}

// costNotes are what a cost row's figures leave unsaid: the control creates answered otherwise
// than 403, and failed measurements.
func costNotes(a ShareArm) []string {
	var out []string
	if w := a.RefusalCost.LedgerWrites; len(w) > 0 {
		keys := slices.Sorted(maps.Keys(w))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %.0f", k, w[k])
		}
		out = append(out, fmt.Sprintf("%s: ClaimLedger writes by writer and result: %s", a.Arm, strings.Join(parts, ", ")))
	}
	if n := a.RefusalCost.ControlOther; n > 0 {
		out = append(out, fmt.Sprintf("%s: %d control creates were not refused with 403 (not counted)", a.Arm, n))
	}
	for _, e := range a.RefusalCost.Errors {
		out = append(out, fmt.Sprintf("%s: %s", a.Arm, e))
	}
	return out
}

// WriteFairShareText prints the fair-share scenario's table.
func WriteFairShareText(w io.Writer, r *Result) error {
	f := r.FairShare
	if f == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== scenario %s: %s\n", r.Scenario, f.Settings)
	fmt.Fprintf(&b, "  %s\n", strings.Join(shareHeader, " | "))
	for _, a := range f.Arms {
		fmt.Fprintf(&b, "  %s\n", strings.Join(shareRow(a), " | "))
	}
	for _, a := range f.Arms {
		if a.Error != "" || a.ALatency.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %s: A's create call p50/p99 %.1f/%.1f ms, create returned to Ready p50/p99 %.1f/%.1f ms; slowest:",
			a.Arm, a.ACall.P50, a.ACall.P99, a.AAfterCall.P50, a.AAfterCall.P99)
		for _, c := range a.ASlowest {
			fmt.Fprintf(&b, " %s at %.1fs call %.0f total %.0f ms;", c.Name, c.AtMs/1000, c.CallMs, c.LatencyMs)
		}
		b.WriteString("\n")
		if a.WarmStarting < 0 {
			continue // no operator's metrics read (a floor arm, or its scrape failed)
		}
		fmt.Fprintf(&b, "  %s: served warm from starting members %d, cold %.0f; operator phases p50/p99 (ms):", a.Arm, a.WarmStarting, a.ColdStarts)
		for _, ph := range a.Phases {
			fmt.Fprintf(&b, " %s %.1f/%.1f (%.0f);", ph.Name, ph.P50Ms, ph.P99Ms, ph.Count)
		}
		b.WriteString("\n")
	}
	if arms := costs(f); len(arms) > 0 {
		fmt.Fprintf(&b, "  where B's refusals' time went (sample counts in parentheses):\n  %s\n", strings.Join(costHeader, " | "))
		for _, a := range arms {
			fmt.Fprintf(&b, "  %s\n", strings.Join(costRow(a), " | "))
			for _, n := range costNotes(a) {
				fmt.Fprintf(&b, "  note: %s\n", n)
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("printing the fair-share figures: %w", err)
	}
	return nil
}

// fairShares are the fair-share scenario's results among all.
func fairShares(all []*Result) []*Result {
	var out []*Result
	for _, r := range all {
		if r.FairShare != nil {
			out = append(out, r)
		}
	}
	return out
}

// writeFairShares writes the section of the fair-share scenario's results.
func writeFairShares(p func(string, ...any), results []*Result) {
	if len(results) == 0 {
		return
	}
	p(sectionFairShare)
	p("")
	p("Tenant A creates claims at a steady rate, each held a while once Ready and then deleted;")
	p("tenant B creates bursts of several times the pool. Each tenant is an identity of its own")
	p("(impersonated users). Three arms, each on a fresh cluster: A alone; A and B without a")
	p("ClaimPolicy; A and B with one, reserving A a warm share of the pool and limiting B's claims.")
	p("A's latency: from its create call to the watch's Ready event; warm: its Sandbox carries")
	p("launch-type warm. A refusal's latency: B's create call, from its start to the 429.")
	p("The floor arms, where run, are A alone and A and B under the policy on the contract floor:")
	p("the operator stopped once the pool is full (one member per claim to serve), a stand-in")
	p("answering its webhooks at once, the load generator binding, routing and reporting each claim")
	p("Ready itself and replacing the member it took (Sandbox, pod, Ready status), admitting B's")
	p("claims as the policy would and sending the others as dry-run creates (decoded, admitted and")
	p("validated, then dropped); their ratio is against floor-alone: what B's work costs A with no")
	p("operator.")
	p("")
	for _, r := range results {
		f := r.FairShare
		p("**%s** (pod profile %s; %s): %s", r.Scenario, orDash(r.Parameters.Profile), measuredAt(r), f.Settings)
		p("")
		tableHead(p, shareHeader)
		for _, a := range f.Arms {
			row := shareRow(a)
			for len(row) < len(shareHeader) {
				row = append(row, "")
			}
			p("| %s |", strings.Join(row, " | "))
		}
		p("")
		writeSplits(p, f)
		writeCosts(p, f)
	}
}

// splitHeader and splitRow are the table of where A's latency went, per arm.
var splitHeader = []string{"arm", "A create call p50 (ms)", "A create call p99 (ms)", "A create returned → Ready p50 (ms)",
	"A create returned → Ready p99 (ms)", "claims served from starting members", "cold starts", "queue wait p99 (ms)", "slowest of A (ms)"}

func splitRow(a ShareArm) []string {
	starting := "-"
	if a.WarmStarting >= 0 {
		starting = fmt.Sprint(a.WarmStarting)
	}
	wait := "-"
	for _, ph := range a.Phases {
		if ph.Name == "admission_to_reconcile" {
			wait = fmt.Sprintf("%.1f", ph.P99Ms)
		}
	}
	slowest := make([]string, 0, 3)
	for _, c := range a.ASlowest[:min(3, len(a.ASlowest))] {
		slowest = append(slowest, fmt.Sprintf("%.0f at %.1f s", c.LatencyMs, c.AtMs/1000))
	}
	return []string{a.Arm, fmt.Sprintf("%.1f", a.ACall.P50), fmt.Sprintf("%.1f", a.ACall.P99), fmt.Sprintf("%.1f", a.AAfterCall.P50),
		fmt.Sprintf("%.1f", a.AAfterCall.P99), starting, fmt.Sprintf("%.0f", a.ColdStarts), wait, strings.Join(slowest, "; ")}
}

// writeSplits writes where A's latency went in each arm that measured it.
func writeSplits(p func(string, ...any), f *FairShare) {
	var arms []ShareArm
	for _, a := range f.Arms {
		if a.Error == "" && a.ACall.Count > 0 {
			arms = append(arms, a)
		}
	}
	if len(arms) == 0 {
		return
	}
	p("Where A's latency went: its create call (admission included), and from the call's return to")
	p("the Ready event; the claims the operator served from members still starting (both tenants;")
	p("such a claim waits for its member's start-up) and cold; the claim's wait from admission to")
	p("its first reconcile (`sandgate_claim_phase_seconds{phase=\"admission_to_reconcile\"}`, both")
	p("tenants, estimated in its buckets); A's slowest claims, with when they came (s from A's")
	p("first claim).")
	p("")
	tableHead(p, splitHeader)
	for _, a := range arms {
		p("| %s |", strings.Join(splitRow(a), " | "))
	}
	p("")
}

// tableHead writes a table's header row and its separator: the first column left-aligned,
// the figures right-aligned.
func tableHead(p func(string, ...any), header []string) {
	p("| %s |", strings.Join(header, " | "))
	p("|---|%s", strings.Repeat("---:|", len(header)-1))
}

// writeCosts writes the table of where B's refusals' time went, when an arm measured it.
func writeCosts(p func(string, ...any), f *FairShare) {
	arms := costs(f)
	if len(arms) == 0 {
		return
	}
	p("Where B's refusals' time went, in the same arm: sandgate, the operator's time on a refused")
	p("claim's ClaimPolicies (`sandgate_claimpolicy_admission_seconds{result=\"refused\"}`); webhook")
	p("call, the API server's call of the stamping webhook for the creates it refused")
	p("(`apiserver_admission_webhook_admission_duration_seconds{rejected=\"true\"}`); both estimated")
	p("in their histograms' buckets, counts in parentheses. Control: a create by B beside each of")
	p("B's creates, at the same moment, in a namespace where B holds no role, refused by")
	p("authorization (403) before any admission: the API server's own floor for a refused create")
	p("at that moment.")
	p("")
	tableHead(p, costHeader)
	var notes []string
	for _, a := range arms {
		p("| %s |", strings.Join(costRow(a), " | "))
		notes = append(notes, costNotes(a)...)
	}
	p("")
	for _, n := range notes {
		p("- %s", n)
	}
	if len(notes) > 0 {
		p("")
	}
}
