package report

import (
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The long scenarios' own figures reach the report: a sustained run beside its floor, over
// time, and the scale run's memory, restart and ratio against their targets.
func TestLongScenariosInTheReport(t *testing.T) {
	sus := func(warm float64, kept bool, p50 float64) *Result {
		return &Result{
			Scenario: "sustained-50", Claims: Claims{Created: 100, Ready: 100},
			Latency: Latency{Client: stats.Summary{Count: 100, P50: p50, P99: 4 * p50}},
			API:     API{ClaimsCPUSeconds: 10},
			Sustained: &Sustained{Rate: 50, AchievedRate: 49.5, DurationSeconds: 300, WarmShare: warm, MinReady: 3, RefillKeptUp: kept,
				Windows: []Window{{AtSeconds: 0, Claims: 100, P50Ms: p50, P99Ms: 4 * p50, WarmShare: warm}}},
		}
	}
	r := sus(0.995, true, 20)
	r.Targets = &Targets{FloorP50Ratio: 1.3, FloorP99Ratio: 1.5, FloorCPURatio: 1.3}
	r.Floor = sus(1, true, 10)
	r.ContractFloor = sus(1, true, 16)
	scale := &Result{Scenario: "scale-20k", Scale: &Scale{Sandboxes: 20000, Namespaces: 20, Pools: 200, FillSeconds: 1000, FillRate: 20,
		OperatorRSSMiB: 560, HeapInuseMiB: 480, MiBPer1000Sandboxes: 25.5, HeapInuseMiBPer1000Sandboxes: 24,
		RestartToReadySeconds: 0.5, RestartToFirstClaimSeconds: 14.9, SerialP50Ms: 12, SerialP99Ms: 30, FloorSerialP50Ms: 10, P50RatioToPool50: 1.1}}
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r, scale}, "make bench"); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"## Sustained traffic",
		"| sustained-50 | floor | 50 / 49.5 | 300 | 100 | 100.0% | 3 | 0 | yes | 10.0 | 40.0 | 10.00 |",
		"| sustained-50 | sandgate | 50 / 49.5 | 300 | 100 | 99.5% | 3 | 0 | yes | 20.0 | 80.0 | 10.00 |",
		"| sustained-50 | sandgate ÷ floor | | | | | | | | 2.00 ✗ (≤ 1.3) | 2.00 ✗ (≤ 1.5) | 1.00 ✓ (≤ 1.3) |",
		"| sustained-50 | contract floor | 50 / 49.5 | 300 | 100 | 100.0% | 3 | 0 | yes | 16.0 | 64.0 | 10.00 |",
		"| sustained-50 | sandgate ÷ contract floor | | | | | | | | 1.25 ✓ (≤ 1.3) | 1.25 ✓ (≤ 1.5) | 1.00 ✓ (≤ 1.3) |",
		"| 0 | 100 | 20.0 | 80.0 | 100% | 10.0 | 40.0 | 100% |",
		"## Scale",
		"| scale-20k | 20000 | 20 × 10 | 1000 | 20.0 | 560.0 | 480.0 | 25.5 | 24.0 |",
		"0.50 / 14.9 ✗",
		"1.10 ✓ (≤ 1.2)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
}

// A sustained scenario measured in rounds is judged by the medians of its rounds' ratios, to
// the floor and to the contract floor, and the report says whose runs and windows it shows.
func TestSustainedRoundsAreJudgedByTheirMedians(t *testing.T) {
	run := func(p50 float64) *Result {
		return &Result{
			Scenario: "sustained-10", Claims: Claims{Created: 100, Ready: 100},
			Latency: Latency{Client: stats.Summary{Count: 100, P50: p50, P99: 4 * p50}},
			API:     API{ClaimsCPUSeconds: 10},
			Sustained: &Sustained{Rate: 10, AchievedRate: 10, DurationSeconds: 100, WarmShare: 1, MinReady: 30, RefillKeptUp: true,
				Windows: []Window{{AtSeconds: 0, Claims: 100, P50Ms: p50, P99Ms: 4 * p50, WarmShare: 1}}},
		}
	}
	var rounds []Round
	// sandgate ÷ contract floor p50 per round: 2.0, 1.2, 1.1 (median 1.2); ÷ floor: 4, 2, 3.
	for _, r := range []struct{ floor, contract, sandgate float64 }{{10, 20, 40}, {30, 50, 60}, {22, 60, 66}} {
		x := run(r.sandgate)
		x.Floor, x.ContractFloor = run(r.floor), run(r.contract)
		rounds = append(rounds, RoundOf(x))
	}
	res := run(66) // the median round by the floor ratio (3.0)
	res.Floor, res.ContractFloor = run(22), run(60)
	res.Rounds = rounds
	res.Targets = &Targets{FloorP50Ratio: 1.3, FloorP99Ratio: 1.5, FloorCPURatio: 1.3}
	if got := res.ContractRatios().P50; got != 1.2 {
		t.Errorf("contract p50 ratio = %v, want the median of the rounds' 2.0, 1.2, 1.1: 1.2", got)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{res}, "make bench"); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"| sustained-10 | sandgate ÷ floor | | | | | | | | 3.00 ✗ (≤ 1.3) |",
		"| sustained-10 | sandgate ÷ contract floor | | | | | | | | 1.20 ✓ (≤ 1.3) |",
		"**sustained-10** was measured in 3 rounds; the runs above and the windows below are its median",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
}
