package report

import (
	"strings"
	"testing"
	"time"
)

// An arm's figures: A's warm share and percentiles count its Ready claims only; B's refusals
// are timed, its admitted claims split into served and not.
func TestShareFigures(t *testing.T) {
	ms := time.Millisecond
	var a []AClaim
	for i := 1; i <= 100; i++ {
		a = append(a, AClaim{Ready: true, Latency: time.Duration(i) * ms, Warm: i != 100})
	}
	a = append(a, AClaim{}) // never Ready
	b := []BCreate{
		{Call: 4 * ms, Refused: true}, {Call: 2 * ms, Refused: true}, {Call: 30 * ms, Refused: true},
		{Call: 50 * ms, Served: true}, {Call: 60 * ms}, {Call: 9 * ms, Err: true},
	}
	f := ShareFigures(ArmPolicy, a, b)
	if f.ACreated != 101 || f.AReady != 100 || f.AWarm != 99 || f.AWarmShare != 0.99 {
		t.Errorf("A: %d created, %d Ready, %d warm, share %g; want 101, 100, 99, 0.99", f.ACreated, f.AReady, f.AWarm, f.AWarmShare)
	}
	if f.ALatency.P50 != 50 || f.ALatency.P99 != 99 {
		t.Errorf("A: p50 %g, p99 %g; want 50, 99 (nearest rank of the Ready claims)", f.ALatency.P50, f.ALatency.P99)
	}
	if f.BCreated != 6 || f.BRefused != 3 || f.BAdmitted != 2 || f.BServed != 1 || f.BErrors != 1 {
		t.Errorf("B: %+v; want 6 creates, 3 refused, 2 admitted, 1 served, 1 error", f)
	}
	if f.BRefusal.P50 != 4 || f.BRefusal.P99 != 30 {
		t.Errorf("B's refusals: p50 %g, p99 %g; want 4, 30", f.BRefusal.P50, f.BRefusal.P99)
	}
	if empty := ShareFigures(ArmAlone, nil, nil); empty.AWarmShare != 0 || empty.BRefusal.Count != 0 {
		t.Errorf("no claims: %+v, want zero figures", empty)
	}
}

// A's p99 is compared with the alone arm's of the same run; without one, or for an arm that
// failed, there is no ratio.
func TestSetRatios(t *testing.T) {
	arm := func(name string, p99 float64, failed bool) ShareArm {
		a := ShareArm{Arm: name}
		a.ALatency.P99, a.ALatency.Count = p99, 10
		if failed {
			a.Error = "boom"
		}
		return a
	}
	f := &FairShare{Arms: []ShareArm{arm(ArmAlone, 40, false), arm(ArmNoPolicy, 4000, false), arm(ArmPolicy, 50, false)}}
	f.SetRatios()
	for i, want := range []float64{1, 100, 1.25} {
		if got := f.Arms[i].AP99Ratio; got != want {
			t.Errorf("%s: ratio %g, want %g", f.Arms[i].Arm, got, want)
		}
	}
	f = &FairShare{Arms: []ShareArm{arm(ArmAlone, 40, true), arm(ArmPolicy, 50, false)}}
	f.SetRatios()
	if f.Arms[1].AP99Ratio != 0 {
		t.Errorf("ratio %g without an alone arm that ran, want none", f.Arms[1].AP99Ratio)
	}
}

// The table has a column per header, and dashes where an arm has nothing to say.
func TestShareRows(t *testing.T) {
	alone := ShareArm{Arm: ArmAlone, ACreated: 2, AReady: 2, AWarm: 2, AWarmShare: 1, AP99Ratio: 1}
	if row := shareRow(alone); len(row) != len(shareHeader) || row[6] != "-" {
		t.Errorf("alone row %q: want %d columns, B's as dashes", row, len(shareHeader))
	}
	noRefusal := ShareArm{Arm: ArmNoPolicy, ACreated: 2, AReady: 2, BCreated: 3, BAdmitted: 3, BServed: 3}
	if row := shareRow(noRefusal); len(row) != len(shareHeader) || row[8] != "-" || row[7] != "0" {
		t.Errorf("no-policy row %q: want no refusal latency", row)
	}
	var b strings.Builder
	res := &Result{Scenario: "fair-share", FairShare: &FairShare{Settings: "s", Arms: []ShareArm{alone, noRefusal, {Arm: ArmPolicy, Error: "no cluster"}}}}
	if err := WriteFairShareText(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "policy | failed: no cluster") {
		t.Errorf("text %q lacks the failed arm", b.String())
	}
	var md []string
	writeFairShares(func(f string, a ...any) { md = append(md, f) }, []*Result{res})
	if len(md) == 0 {
		t.Error("no markdown section")
	}
}

// An arm that measured its refusals' cost gets a row in the cost table, with a column per
// header and its notes; an arm without one, or that failed, gets none.
func TestCostRows(t *testing.T) {
	policy := ShareArm{Arm: ArmPolicy, BCreated: 3, BRefused: 2, RefusalCost: &RefusalCost{
		Sandgate: Histogram{Count: 2, P50Ms: 0.5, P99Ms: 0.9}, Webhook: Histogram{Count: 2, P50Ms: 2, P99Ms: 4, MeanMs: 2.5},
		ControlOther: 1, Errors: []string{"scraping: boom"}, LedgerWrites: map[string]float64{"leader success": 2, "admission conflict": 1}}}
	policy.BRefusal.Count, policy.BRefusal.P50, policy.BRefusal.P99 = 2, 3, 9
	row := costRow(policy)
	if len(row) != len(costHeader) || row[1] != "3.0" || row[3] != "0.5 (2)" || row[8] != "- (0)" {
		t.Errorf("cost row %q: want %d columns, the refusal's and sandgate's figures, no control", row, len(costHeader))
	}
	f := &FairShare{Arms: []ShareArm{{Arm: ArmNoPolicy}, {Arm: ArmPolicy, Error: "boom", RefusalCost: &RefusalCost{}}, policy}}
	if got := costs(f); len(got) != 1 || got[0].Arm != ArmPolicy || got[0].Error != "" {
		t.Errorf("costs = %+v, want the policy arm that ran only", got)
	}
	var b strings.Builder
	if err := WriteFairShareText(&b, &Result{Scenario: "fair-share", FairShare: f}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"where B's refusals' time went", "1 control creates were not refused with 403", "scraping: boom",
		"ClaimLedger writes by writer and result: admission conflict 1, leader success 2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text %q lacks %q", b.String(), want)
		}
	}
}
