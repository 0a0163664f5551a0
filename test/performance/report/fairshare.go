package report

// The fair-share scenario's figures (issue 36): two tenants on one pool, tenant A steady,
// tenant B bursting to several times the pool, in three arms of one run: A alone, A and B
// without a ClaimPolicy, A and B with one (A a reserved warm share, B a limit on its claims).

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The arms of the fair-share scenario, in the order they run.
const (
	ArmAlone    = "alone"
	ArmNoPolicy = "no-policy"
	ArmPolicy   = "policy"
)

// FairShareArms are the arms the scenario knows, in order.
var FairShareArms = []string{ArmAlone, ArmNoPolicy, ArmPolicy}

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
	// AP99Ratio is A's p99 ÷ A's p99 in the alone arm of the same run; 0 when unknown.
	AP99Ratio float64 `json:"aP99Ratio,omitempty"`
	// B is tenant B's creates: refused with 429 (and how long the create call took to say
	// so), admitted, served (Ready), failed otherwise.
	BCreated  int           `json:"bCreated"`
	BRefused  int           `json:"bRefused"`
	BRefusal  stats.Summary `json:"bRefusal"`
	BAdmitted int           `json:"bAdmitted"`
	BServed   int           `json:"bServed"`
	BErrors   int           `json:"bErrors"`
}

// AClaim is what the run saw of one of tenant A's claims.
type AClaim struct {
	// Ready says the claim became Ready; Latency is from its create call to the Ready event.
	Ready   bool
	Latency time.Duration
	// Warm says its Sandbox carries launch-type warm.
	Warm bool
}

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
	var lat []time.Duration
	for _, c := range a {
		if !c.Ready {
			continue
		}
		out.AReady++
		lat = append(lat, c.Latency)
		if c.Warm {
			out.AWarm++
		}
	}
	if out.AReady > 0 {
		out.AWarmShare = float64(out.AWarm) / float64(out.AReady)
	}
	out.ALatency = stats.Summarize(lat)
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

// SetRatios sets each arm's AP99Ratio against the alone arm's p99, when there is one.
func (f *FairShare) SetRatios() {
	var alone float64
	for _, a := range f.Arms {
		if a.Arm == ArmAlone && a.Error == "" {
			alone = a.ALatency.P99
		}
	}
	for i := range f.Arms {
		a := &f.Arms[i]
		a.AP99Ratio = 0
		if alone > 0 && a.Error == "" && a.ALatency.Count > 0 {
			a.AP99Ratio = a.ALatency.P99 / alone
		}
	}
}

// shareHeader and shareRow are the table of the arms, in text and in markdown.
var shareHeader = []string{"arm", "A Ready", "A warm", "A p50 (ms)", "A p99 (ms)", "A p99 ÷ alone",
	"B creates", "B refused (429)", "refusal p50 (ms)", "refusal p99 (ms)", "B admitted", "B served", "B errors"}

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
	if a.BCreated == 0 {
		return append(row, "-", "-", "-", "-", "-", "-", "-")
	}
	refusal := func(v float64) string {
		if a.BRefused == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", v)
	}
	return append(row, fmt.Sprint(a.BCreated), fmt.Sprint(a.BRefused), refusal(a.BRefusal.P50), refusal(a.BRefusal.P99),
		fmt.Sprint(a.BAdmitted), fmt.Sprint(a.BServed), fmt.Sprint(a.BErrors))
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
	p("")
	for _, r := range results {
		f := r.FairShare
		p("**%s** (pod profile %s; %s): %s", r.Scenario, orDash(r.Parameters.Profile), measuredAt(r), f.Settings)
		p("")
		p("| %s |", strings.Join(shareHeader, " | "))
		p("|---|%s", strings.Repeat("---:|", len(shareHeader)-1))
		for _, a := range f.Arms {
			row := shareRow(a)
			for len(row) < len(shareHeader) {
				row = append(row, "")
			}
			p("| %s |", strings.Join(row, " | "))
		}
		p("")
	}
}
