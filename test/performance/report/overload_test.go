package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
)

// Goodput counts the claims Ready within the window, by create time plus latency.
func TestGoodput(t *testing.T) {
	samples := []Sample{
		{AtSeconds: 0, Ms: 100},      // Ready at 0.1: the warm-up
		{AtSeconds: 2, Ms: 500},      // 2.5
		{AtSeconds: 3, Ms: 6000},     // 9.0
		{AtSeconds: 9.5, Ms: 400},    // 9.9
		{AtSeconds: 9.5, Ms: 600},    // 10.1: after the window
		{AtSeconds: 1.9, Ms: 100.01}, // 2.00001: just inside
	}
	if got := Goodput(samples, 2, 10); got != 0.5 {
		t.Errorf("goodput %g, want 4 claims in 8 s = 0.5", got)
	}
	if got := Goodput(samples, 10, 10); got != 0 {
		t.Errorf("an empty window: %g, want 0", got)
	}
}

// The ratios are to the floor's rate and to the 1× arm's p99, and only sandgate's arms past
// the sustainable rate are judged against the goals.
func TestOverloadRatiosAndGoals(t *testing.T) {
	o := Overload{SustainableRate: 20, Measured: true, Arms: []OverloadArm{
		{Arm: "floor", Rate: 40, Goodput: 20, P99Ms: 900},
		{Arm: "sandgate", Multiplier: 1, Rate: 20, Goodput: 19, P99Ms: 400},
		{Arm: "sandgate", Multiplier: 2, Rate: 40, Goodput: 18.5, P99Ms: 790, Refused: 300},
		{Arm: "sandgate", Multiplier: 4, Rate: 80, Goodput: 10, P99Ms: 3000},
		{Arm: "sandgate", Multiplier: 8, Rate: 160, Error: "the cluster did not start"},
	}}
	o.SetRatios()
	var got []float64
	for _, a := range o.Arms {
		got = append(got, a.GoodputRatio, a.P99Ratio)
	}
	if diff := cmp.Diff([]float64{1, 0, 0.95, 1, 0.93, 1.98, 0.5, 7.5, 0, 0}, got); diff != "" {
		t.Errorf("goodput and p99 ratios (-want +got):\n%s", diff)
	}
	var met []string
	for _, a := range o.Arms {
		ok, judged := a.Met()
		met = append(met, map[bool]string{true: "judged", false: "-"}[judged]+"/"+map[bool]string{true: "met", false: "missed"}[ok])
	}
	if diff := cmp.Diff([]string{"-/missed", "-/missed", "judged/met", "judged/missed", "-/missed"}, met); diff != "" {
		t.Errorf("goals (-want +got):\n%s", diff)
	}
	o.ContractRate = 25
	o.SetRatios()
	if got := o.Arms[2].ContractRatio; got != 0.74 {
		t.Errorf("2×'s goodput ÷ the contract floor's rate: %g, want 18.5 ÷ 25 = 0.74", got)
	}
	if got := o.Arms[2].OracleRatio; got != 0 {
		t.Errorf("2×'s goodput ÷ the oracle's without an oracle arm: %g, want none", got)
	}
	// The oracle (the contract floor shedding at its rate) at 2× is read against sandgate's
	// 2× only; the 1× arm has none.
	o.Arms = append(o.Arms, OverloadArm{Arm: OverloadContractFloor, Multiplier: 2, Rate: 40, Goodput: 20})
	o.SetRatios()
	var oracle []float64
	for _, a := range o.Arms {
		oracle = append(oracle, a.OracleRatio)
	}
	if diff := cmp.Diff([]float64{0, 0, 0.93, 0, 0, 0}, oracle); diff != "" {
		t.Errorf("goodput ÷ the oracle's at the same multiple (-want +got):\n%s", diff)
	}
	if o.Arms[2].OraclePastCapacity {
		t.Error("an oracle that served what it admitted was taken for one past the cluster's capacity")
	}
	// An oracle that served 20 claims/s of the 25 it admitted was past the cluster's capacity:
	// no bound.
	o.Arms[len(o.Arms)-1].AdmittedRate = 25
	o.SetRatios()
	if !o.Arms[2].OraclePastCapacity || o.Arms[2].OracleRatio != 0.93 {
		t.Errorf("against an oracle serving 20 of 25 admitted a second: past capacity %v, ratio %g; want true, 0.93",
			o.Arms[2].OraclePastCapacity, o.Arms[2].OracleRatio)
	}
	lost := o.Arms[2]
	lost.Lost = 1
	if ok, _ := lost.Met(); ok {
		t.Error("an arm that lost a claim met the goals")
	}
}

// The section renders into the report and splices into one measured before.
func TestOverloadSection(t *testing.T) {
	r := &Result{Scenario: "overload", StartedAt: time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC), Overload: &Overload{
		Settings: "a pool of 50", SustainableRate: 20, Measured: true, Arms: []OverloadArm{
			{Arm: "floor", Rate: 40, Offered: 39.8, Created: 1000, Ready: 1000, Goodput: 20},
			{Arm: OverloadContractFloor, Rate: 40, Offered: 39.8, Created: 950, Ready: 950, Goodput: 19.5,
				Writes: []scrape.Count{{Key: "POST sandboxclaims 201", Count: 950}, {Key: "POST events 201", Count: 19}}},
			{Arm: OverloadContractFloor, Multiplier: 2, Rate: 40, Offered: 40, Created: 1000, Refused: 800, Ready: 1000, Goodput: 20, AdmittedRate: 25},
			{Arm: "sandgate", Multiplier: 2, Rate: 40, Offered: 40, Created: 500, Refused: 1300, RetryAfterSeconds: 5, Ready: 500, Goodput: 19,
				APIServerCPUSeconds: 25, OperatorCPUSeconds: 5, KwokCPUSeconds: 3, MachineBusy: 0.97},
		}, ContractRate: 19.5}}
	r.Overload.SetRatios()
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, Machine{}, []*Result{r}, "test"); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, want := range []string{sectionOverload, "sustainable rate **20.0 claims/s** (the floor's goodput, measured in this run); the contract floor's 19.5 claims/s.",
		"| sandgate 2× | 40 / 40.0 | 500 | 1300 (retry after 5 s) | 500 | 0 | 0 | 19.0 | 0.95 | 0.97 | 0.95 † |",
		pastCapacityNote,
		"| contract floor | 40 / 39.8 | 950 | 0 | 950 | 0 | 0 | 19.5 | 0.98 | 1.00 | - |",
		// Where a Ready claim's CPU goes, and what it asks of the API server.
		"| sandgate 2× | 25.0 | 5.0 | 0.0 | - | 3.00 | 50.0 | - | 97% | - |",
		"- contract floor: writes POST sandboxclaims 201 1.00; reads -"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| overload |") {
		t.Errorf("the overload result is in the tables of single runs:\n%s", md)
	}
	spliced, titles := SpliceSections("# Performance\n\n## Startup latency\nold\n", md)
	if !strings.Contains(spliced, sectionOverload) || len(titles) != 1 {
		t.Errorf("spliced %q into:\n%s", titles, spliced)
	}
}
