package report

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// serialWithFloor is a serial scenario whose figures add up: sandgate's mean claim takes
// 30 ms, its floor's 15 ms.
func serialWithFloor() *Result {
	return &Result{
		Scenario:   "serial",
		Parameters: Parameters{BurstSize: 1, TotalBursts: 10, WarmPoolSize: 12},
		Targets:    &Targets{FloorP50Ratio: 1.5},
		Claims:     Claims{Created: 10, Ready: 10},
		Latency: Latency{
			Client:     stats.Summary{Count: 10, P50: 28, P99: 40, Mean: 30},
			Server:     stats.Summary{Count: 10, Mean: 27},
			CreateCall: stats.Summary{Count: 10, Mean: 12},
		},
		API:       API{ClaimsCPUSeconds: 0.3},
		OtherWork: &OtherWork{CPUSeconds: 0.5, WindowSeconds: 1, CPUs: 2},
		Webhooks: []Webhook{
			{Name: "stamp", Type: "mutating", Operation: "CREATE", Calls: 10, SumSeconds: 0.05, MeanMs: 5, Resources: []string{"sandboxclaims"}},
			{Name: "validate", Type: "validating", Operation: "CREATE", Calls: 10, SumSeconds: 0.01, MeanMs: 1, Resources: []string{"sandboxclaims"}},
			{Name: "guard", Type: "validating", Operation: "UPDATE", Calls: 10, SumSeconds: 0.02, MeanMs: 2, Resources: []string{"sandboxes"}},
			// Refill: not on the claim's path.
			{Name: "guard", Type: "validating", Operation: "CREATE", Calls: 10, SumSeconds: 0.07, MeanMs: 7, Resources: []string{"sandboxes"}},
		},
		Operator: Operator{Measured: true, Phases: []Phase{
			{Name: "admission_to_reconcile", Count: 10, MeanMs: 10},
			{Name: "bind", Count: 10, MeanMs: 8},
			{Name: "ready_to_status", Count: 10, MeanMs: 18},
			{Name: "route", Count: 10, MeanMs: 3},
			{Name: "status", Count: 10, MeanMs: 6},
		}},
		Floor: &Result{
			Parameters: Parameters{Floor: true},
			Claims:     Claims{Created: 10, Ready: 10},
			Latency: Latency{
				Client:     stats.Summary{Count: 10, P50: 14, P99: 16, Mean: 15},
				CreateCall: stats.Summary{Count: 10, Mean: 5},
			},
			API: API{ClaimsCPUSeconds: 0.2},
			ClientPath: &ClientPath{
				BeforeBind:     stats.Summary{Count: 10, Mean: 0.1},
				Bind:           stats.Summary{Count: 10, Mean: 5},
				BetweenPatches: stats.Summary{Count: 10, Mean: 0.1},
				Status:         stats.Summary{Count: 10, Mean: 4},
				WatchDelivery:  stats.Summary{Count: 10, Mean: 0.8},
			},
		},
	}
}

func TestRatios(t *testing.T) {
	r := serialWithFloor()
	if diff := cmp.Diff(FloorRatios{P50: 2, P99: 2.5, CPU: 1.5}, r.Ratios(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Ratios (-want +got):\n%s", diff)
	}
	r.Floor = nil
	if diff := cmp.Diff(FloorRatios{}, r.Ratios()); diff != "" {
		t.Errorf("Ratios without a floor (-want +got):\n%s", diff)
	}
	r = serialWithFloor()
	r.Floor.API.ClaimsCPUSeconds = -1 // not read
	if got := r.Ratios().CPU; got != 0 {
		t.Errorf("CPU ratio with an unread floor = %v, want 0", got)
	}
}

func TestPathBreakdown(t *testing.T) {
	rows := pathBreakdown(serialWithFloor())
	got := map[string][2]string{}
	for _, row := range rows {
		got[strings.TrimSpace(row.name)] = [2]string{msOrNot(row.sandgate), msOrNot(row.floor)}
	}
	want := map[string][2]string{
		"create call (client: POST round trip, admission included)": {"12.00", "5.00"},
		// Only CREATE of claims: the refill's Sandbox CREATEs are not the claim's.
		"of which admission webhooks on the claim CREATE": {"6.00", "0.00"},
		// (30 − 27) + 10 − 12.
		"create returned → first reconcile starts (informer delivery, queue wait)": {"1.00", "0.10"},
		"bind patch": {"8.00", "5.00"},
		"of which admission webhooks on the Sandbox UPDATE":                                {"2.00", "0.00"},
		"pod metadata patch (Ready means routable; the contract floor's, not the floor's)": {"3.00", "0.00"},
		"status patch": {"6.00", "4.00"},
		// 18 − 8 − 3 − 6.
		"rest of the reconcile (reads, pick, decisions)": {"1.00", "0.10"},
		// 27 − 10 − 18.
		"status patch returned → client's watch shows Ready": {"-1.00", "0.80"},
		"total: create call → watch shows Ready":             {"30.00", "15.00"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pathBreakdown (-want +got):\n%s", diff)
	}
	// The terms (not the "of which" rows) add up to the total.
	for side := range 2 {
		var sum float64
		for _, row := range rows[:len(rows)-1] {
			v := row.sandgate
			if side == 1 {
				v = row.floor
			}
			if !strings.HasPrefix(row.name, "  of which") {
				sum += *v
			}
		}
		total := rows[len(rows)-1].sandgate
		if side == 1 {
			total = rows[len(rows)-1].floor
		}
		if diff := sum - *total; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("side %d: phases sum to %v, total %v", side, sum, *total)
		}
	}
}

// The contract floor's phases stand beside sandgate's: its admission round trips from the API
// server's histogram, its writes, the route write among them, from the load generator.
func TestPathBreakdownOfTheContractFloor(t *testing.T) {
	r := serialWithFloor()
	r.ContractFloor = &Result{
		Parameters: Parameters{Floor: true, FloorAdmission: true, FloorRoute: true},
		Claims:     Claims{Created: 10, Ready: 10},
		Latency:    Latency{Client: stats.Summary{Count: 10, Mean: 20}, CreateCall: stats.Summary{Count: 10, Mean: 7}},
		Webhooks: []Webhook{
			{Name: "stamp", Type: "mutating", Operation: "CREATE", Calls: 10, SumSeconds: 0.015, Resources: []string{"sandboxclaims"}},
			{Name: "guard", Type: "validating", Operation: "UPDATE", Calls: 10, SumSeconds: 0.01, Resources: []string{"sandboxes"}},
		},
		ClientPath: &ClientPath{
			BeforeBind: stats.Summary{Count: 10, Mean: 0.1}, Bind: stats.Summary{Count: 10, Mean: 5},
			Route: stats.Summary{Count: 10, Mean: 3}, BetweenPatches: stats.Summary{Count: 10, Mean: 0.1},
			Status: stats.Summary{Count: 10, Mean: 4}, WatchDelivery: stats.Summary{Count: 10, Mean: 0.8},
		},
	}
	got := map[string]string{}
	for _, row := range pathBreakdown(r) {
		got[strings.TrimSpace(row.name)] = msOrNot(row.contract)
	}
	want := map[string]string{
		"create call (client: POST round trip, admission included)":                "7.00",
		"of which admission webhooks on the claim CREATE":                          "1.50",
		"create returned → first reconcile starts (informer delivery, queue wait)": "0.10",
		"bind patch": "5.00",
		"of which admission webhooks on the Sandbox UPDATE":                                "1.00",
		"pod metadata patch (Ready means routable; the contract floor's, not the floor's)": "3.00",
		"status patch": "4.00",
		"rest of the reconcile (reads, pick, decisions)":     "0.10",
		"status patch returned → client's watch shows Ready": "0.80",
		"total: create call → watch shows Ready":             "20.00",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the contract floor's phases (-want +got):\n%s", diff)
	}
}

// An operator without sandgate_claim_phase_seconds (an older build, another implementation)
// leaves its phases not measured; what the client and the API server see is still shown.
func TestPathBreakdownWithoutOperatorPhases(t *testing.T) {
	r := serialWithFloor()
	r.Operator.Phases = nil
	r.Floor = nil
	for _, row := range pathBreakdown(r) {
		name := strings.TrimSpace(row.name)
		measured := strings.HasPrefix(name, "create call") || strings.HasPrefix(name, "of which") || strings.HasPrefix(name, "total")
		if got := msOrNot(row.sandgate) != "not measured"; got != measured {
			t.Errorf("%s: sandgate measured = %v, want %v", name, got, measured)
		}
		if got := msOrNot(row.floor); got != "not measured" {
			t.Errorf("%s: floor = %s without a floor run, want not measured", name, got)
		}
	}
}

func TestWriteMarkdownAgainstTheFloor(t *testing.T) {
	burst := serialWithFloor()
	burst.Scenario = "burst"
	burst.Targets = &Targets{FloorP50Ratio: 1.3, FloorP99Ratio: 1.5, FloorCPURatio: 1.5}
	noFloor := serialWithFloor()
	noFloor.Scenario, noFloor.Floor = "kubelet", nil
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{serialWithFloor(), burst, noFloor}, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		// p50 2.00 misses the serial target of 1.5; p99 and CPU have none.
		// The floor's other work was not measured, sandgate's took a quarter of two CPUs.
		"| serial | 14.0 | 28.0 | 2.00 ✗ (≤ 1.5) | 16.0 | 40.0 | 2.50 | 0.20 | 0.30 | 1.50 | - / 25% | 0.0 / 0.0 |",
		// CPU 1.5 meets the burst target of 1.5.
		"| burst | 14.0 | 28.0 | 2.00 ✗ (≤ 1.3) | 16.0 | 40.0 | 2.50 ✗ (≤ 1.5) | 0.20 | 0.30 | 1.50 ✓ (≤ 1.5) |",
		"| kubelet | not measured | 28.0 |",
		"| serial | guard | validating | UPDATE | 10 | 1.00 | 2.00 |",
		"| bind patch | 8.00 | - | 5.00 | operator: bind | load generator |",
		"| status patch returned → client's watch shows Ready | -1.00 | - | 0.80 | derived: server view − admission_to_reconcile − ready_to_status | load generator |",
		"Its floor (10 claims, 10 Ready",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
}

func TestOtherWorkShare(t *testing.T) {
	cases := map[string]struct {
		o    *OtherWork
		want float64
	}{
		"half of one of two CPUs": {o: &OtherWork{CPUSeconds: 0.5, WindowSeconds: 1, CPUs: 2}, want: 0.25},
		"not measured":            {},
		"empty window":            {o: &OtherWork{CPUSeconds: 1, CPUs: 2}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.o.Share(); got != tc.want {
				t.Errorf("Share = %v, want %v", got, tc.want)
			}
		})
	}
}

// A scenario measured in rounds is judged by the median of each ratio over its rounds, and
// lists every round.
func TestRounds(t *testing.T) {
	rounds := []Round{
		{FloorP50Ms: 10, P50Ms: 20, FloorP99Ms: 20, P99Ms: 20, FloorCPUSeconds: 1, CPUSeconds: 1.5},
		{FloorP50Ms: 10, P50Ms: 13, FloorP99Ms: 20, P99Ms: 60, FloorCPUSeconds: 1, CPUSeconds: 1.1},
		{FloorP50Ms: 20, P50Ms: 30, FloorP99Ms: 20, P99Ms: 30, FloorCPUSeconds: 1, CPUSeconds: 1.2, LightFloorP50Ms: 7, LightFloorP99Ms: 9},
	}
	if got := MedianRound(rounds); got != 2 {
		t.Errorf("median round = %d, want 2 (ratios 2.00, 1.30, 1.50)", got)
	}
	if got := MedianRound(rounds[:2]); got != 1 {
		t.Errorf("median of two rounds = %d, want 1, the lower ratio", got)
	}
	if got := MedianRound(nil); got != -1 {
		t.Errorf("median of no rounds = %d, want -1", got)
	}
	// Each ratio's median comes from its own round: p50 from round 3, p99 from round 3, CPU
	// from round 3 here; not all from the median p50 round in general.
	want := FloorRatios{P50: 1.5, P99: 1.5, CPU: 1.2}
	if got := MedianRatios(rounds); math.Abs(got.P50-want.P50) > 1e-9 || math.Abs(got.P99-want.P99) > 1e-9 || math.Abs(got.CPU-want.CPU) > 1e-9 {
		t.Errorf("MedianRatios = %+v, want %+v", got, want)
	}
	skewed := []Round{{FloorP50Ms: 10, P50Ms: 10, FloorP99Ms: 10, P99Ms: 50}, {FloorP50Ms: 10, P50Ms: 20, FloorP99Ms: 10, P99Ms: 10}, {FloorP50Ms: 10, P50Ms: 30, FloorP99Ms: 10, P99Ms: 20}}
	if got := MedianRatios(skewed); got.P50 != 2 || got.P99 != 2 {
		t.Errorf("MedianRatios of skewed rounds = %+v, want p50 2 (round 2) and p99 2 (round 3)", got)
	}

	r := serialWithFloor()
	r.Rounds = rounds
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r}, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		"**serial** was measured in 3 rounds",
		"medians of the rounds' ratios (p50 1.50, p99 1.50, CPU 1.20)",
		"| 1 | 10.0 / 20.0 | 2.00 | 20.0 / 20.0 | 1.00 | 1.00 / 1.50 | 1.50 | - | - |",
		"| 2 | 10.0 / 13.0 | 1.30 | 20.0 / 60.0 | 3.00 | 1.00 / 1.10 | 1.10 | - | - |",
		"| 3 | 20.0 / 30.0 | 1.50 | 20.0 / 30.0 | 1.50 | 1.00 / 1.20 | 1.20 | - | 7.0 / 9.0 |",
		"| serial (median of 3 rounds) | 14.0 | 28.0 | 1.50 ✓ (≤ 1.5) | 16.0 | 40.0 | 1.50 | 0.20 | 0.30 | 1.20 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
}

// Rounds that measured the contract floor list it, and the scenario is set against it too: each
// ratio the median of the rounds' ratios, marked against the same targets, with what the
// contract floor costs over the floor.
func TestContractFloor(t *testing.T) {
	r := serialWithFloor()
	r.Targets = &Targets{FloorP50Ratio: 1.3, FloorP99Ratio: 1.5, FloorCPURatio: 1.3}
	r.ContractFloor = &Result{
		Parameters: Parameters{Floor: true, FloorAdmission: true, FloorRoute: true},
		Claims:     Claims{Created: 10, Ready: 10},
		Latency:    Latency{Client: stats.Summary{Count: 10, P50: 25, P99: 25}},
		API:        API{ClaimsCPUSeconds: 0.25},
	}
	r.Rounds = []Round{
		// sandgate ÷ contract floor: p50 1.25, p99 1.11, CPU 1.20; contract ÷ floor: 1.60, 1.25.
		{FloorP50Ms: 10, P50Ms: 20, FloorP99Ms: 20, P99Ms: 20, FloorCPUSeconds: 1, CPUSeconds: 1.5, ContractFloorP50Ms: 16, ContractFloorP99Ms: 18, ContractFloorCPUSeconds: 1.25},
		// 1.08, 1.50, 1.10; 1.20, 1.00.
		{FloorP50Ms: 10, P50Ms: 13, FloorP99Ms: 20, P99Ms: 60, FloorCPUSeconds: 1, CPUSeconds: 1.1, ContractFloorP50Ms: 12, ContractFloorP99Ms: 40, ContractFloorCPUSeconds: 1},
		// 1.20, 1.20, 1.60 (over the CPU target); 1.25, 0.75.
		{FloorP50Ms: 20, P50Ms: 30, FloorP99Ms: 20, P99Ms: 30, FloorCPUSeconds: 1, CPUSeconds: 1.2, ContractFloorP50Ms: 25, ContractFloorP99Ms: 25, ContractFloorCPUSeconds: 0.75},
	}
	want := FloorRatios{P50: 1.2, P99: 1.2, CPU: 1.2}
	if got := MedianContractRatios(r.Rounds); math.Abs(got.P50-want.P50) > 1e-9 || math.Abs(got.P99-want.P99) > 1e-9 || math.Abs(got.CPU-want.CPU) > 1e-9 {
		t.Errorf("MedianContractRatios = %+v, want %+v", got, want)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r}, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		"**Against the contract floor.**",
		// Medians over the rounds: contract floor p50 16/12/25, p99 18/40/25, CPU 1.25/1/0.75;
		// sandgate p50 20/13/30, p99 20/60/30, CPU 1.5/1.1/1.2.
		"| serial | 3 | 16.0 / 25.0 | 20.0 / 30.0 | 1.20 ✓ (≤ 1.3) | 1.20 ✓ (≤ 1.5) | 1.00 / 1.20 | 1.20 ✓ (≤ 1.3) | 1.25 / 1.00 |",
		"| 1 | 10.0 / 20.0 | 2.00 | 20.0 / 20.0 | 1.00 | 1.00 / 1.50 | 1.50 | 16.0 / 18.0, 1.25 | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}

	// Measured in the first round only: that round alone is the contract floor's.
	r.Rounds[1].ContractFloorP50Ms, r.Rounds[2].ContractFloorP50Ms = 0, 0
	b.Reset()
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r}, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if row := "| serial | 1 | 16.0 / 18.0 | 20.0 / 20.0 | 1.25 ✓ (≤ 1.3) | 1.11 ✓ (≤ 1.5) | 1.25 / 1.50 | 1.20 ✓ (≤ 1.3) | 1.60 / 1.25 |"; !strings.Contains(b.String(), row) {
		t.Errorf("report lacks %q; report:\n%s", row, b.String())
	}

	// Without a contract floor in any round the paragraph is left out.
	r.ContractFloor, r.Rounds[0].ContractFloorP50Ms = nil, 0
	b.Reset()
	if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r}, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	if strings.Contains(b.String(), "Against the contract floor") {
		t.Errorf("report has a contract floor section without a contract floor")
	}
}

// Rounds that measured an admission floor list it next to the floor and sandgate, with the
// medians of both ratios; rounds without one leave the paragraph out.
func TestAdmissionFloorRounds(t *testing.T) {
	render := func(rounds []Round) string {
		r := serialWithFloor()
		r.Rounds = rounds
		var b strings.Builder
		if err := WriteMarkdown(&b, Machine{CPUs: 2}, []*Result{r}, "make bench"); err != nil {
			t.Fatalf("WriteMarkdown: %v", err)
		}
		return b.String()
	}
	got := render([]Round{
		{FloorP50Ms: 10, AdmissionFloorP50Ms: 12, P50Ms: 15},
		{FloorP50Ms: 10, AdmissionFloorP50Ms: 11, P50Ms: 16.5},
		{FloorP50Ms: 20, AdmissionFloorP50Ms: 30, P50Ms: 30},
	})
	for _, want := range []string{
		"order: 12.0 ÷ 10.0 = 1.20 and 15.0 ÷ 12.0 = 1.25; 11.0 ÷ 10.0 = 1.10 and 16.5 ÷ 11.0 = 1.50; 30.0 ÷ 20.0 = 1.50 and 30.0 ÷ 30.0 = 1.00.",
		"Medians: the round trips alone 1.20 × the floor; sandgate 1.25 × the admission floor.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
	if got := render([]Round{{FloorP50Ms: 10, P50Ms: 15}, {FloorP50Ms: 10, P50Ms: 16}}); strings.Contains(got, "admission floor") {
		t.Errorf("rounds without an admission floor still describe one:\n%s", got)
	}
	if got := median([]float64{3, 1, 2, 4}); got != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", got)
	}
}
