package report

import (
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

func TestWriteMarkdown(t *testing.T) {
	zero := 0
	results := []*Result{
		{
			Scenario:   "burst",
			Parameters: Parameters{BurstSize: 300, TotalBursts: 1, QPS: 300, WarmPoolSize: 600},
			Targets:    &Targets{P50Ms: 150, P90Ms: 300, P99Ms: 500, MutatingPerClaim: 9, Conflicts: &zero},
			Claims:     Claims{Created: 300, Ready: 300, WarmHits: 300},
			Latency: Latency{
				Client: stats.Summary{Count: 300, P50: 120, P90: 310, P99: 400},
				Server: stats.Summary{Count: 300, P50: 110, P90: 290, P99: 390},
			},
			API: API{Mutating: 2400, MutatingPerClaim: 8, Conflicts: 2},
		},
		{Scenario: "scale-50", Parameters: Parameters{WarmPoolSize: 50, Profile: "realistic", PodStartup: &PodStartup{MedianSeconds: 2, P99Seconds: 8}},
			Latency: Latency{Client: stats.Summary{Count: 30, P50: 10}}},
		{Scenario: "scale-5000", Parameters: Parameters{WarmPoolSize: 5000}, Latency: Latency{Client: stats.Summary{Count: 30, P50: 12}}},
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, Machine{CPUs: 2, Go: "go1.26"}, results, "make bench"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		// p50 and p99 meet their targets, p90 does not; the server view has no targets.
		"| burst | 120.0 ✓ | 310.0 ✗ | 400.0 ✓ | 110.0 | 290.0 | 390.0 | ≤ 150 / 300 / 500 |",
		// 8 writes per claim meet the target of 9; 2 conflicts miss the target of 0.
		"| burst | 2400 | 8.00 ✓ | ≤ 9 | 2 ✗ |",
		"serial p50 at the large pool ÷ serial p50 at pool 50 = **1.20**",
		"| CPU | 2 × - |",
		// The start-up times a figure was measured with.
		"| 50 | 0 | realistic (start-up median 2s, p99 8s, seed 0) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; report:\n%s", want, got)
		}
	}
}

// The report names the commit each scenario measured when they differ: a scenario run again
// after a change rewrites its part of the report and keeps the others'.
func TestReportNamesEachScenariosCommit(t *testing.T) {
	m := Machine{CPUs: 2, Commit: "bbbbbbbbbbbb"}
	same := []*Result{{Scenario: "serial", Parameters: Parameters{Commit: "bbbbbbbbbbbb"}}, {Scenario: "cold", Parameters: Parameters{Commit: "bbbbbbbbbbbb"}}}
	if got := commits(m, same); got != "bbbbbbbbbbbb" {
		t.Errorf("every scenario at the machine's commit: %q, want it once", got)
	}
	older := []*Result{{Scenario: "serial", Parameters: Parameters{Commit: "aaaaaaaaaaaa"}}, {Scenario: "cold", Parameters: Parameters{Commit: "aaaaaaaaaaaa"}}}
	if got := commits(m, older); got != "aaaaaaaaaaaa" {
		t.Errorf("every scenario at one commit before the machine's: %q, want it once", got)
	}
	mixed := []*Result{{Scenario: "serial", Parameters: Parameters{Commit: "aaaaaaaaaaaa"}}, {Scenario: "cold", Parameters: Parameters{Commit: "bbbbbbbbbbbb"}}, {Scenario: "kubelet"}}
	if got, want := commits(m, mixed), "serial aaaaaaaaaaaa; cold bbbbbbbbbbbb; kubelet bbbbbbbbbbbb"; got != want {
		t.Errorf("scenarios of several commits: %q, want %q", got, want)
	}
}
