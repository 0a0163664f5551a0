package report

import (
	"image/color"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The cost of a policy is the ready unbound members integrated over the trace: each sample
// holds until the next one, and only the trace's span counts.
func TestIdleMemberSecondsIntegratesReadyUnboundMembersOverTheTrace(t *testing.T) {
	every := func(n int, ready func(i int) int32) []TracePoint {
		out := make([]TracePoint, n)
		for i := range out {
			out[i] = TracePoint{AtSeconds: float64(i), Ready: ready(i), Replicas: 10}
		}
		return out
	}
	cases := map[string]struct {
		points   []TracePoint
		from, to float64
		want     float64
	}{
		"no samples cost nothing": {from: 0, to: 60},
		"ten ready members for a minute": {
			points: every(61, func(int) int32 { return 10 }), from: 0, to: 60, want: 600,
		},
		"a drained pool costs nothing while dry": {
			points: every(61, func(i int) int32 {
				if i >= 30 {
					return 0
				}
				return 4
			}), from: 0, to: 60, want: 120,
		},
		"samples beyond the trace do not count": {
			points: every(121, func(int) int32 { return 3 }), from: 0, to: 60, want: 180,
		},
		"irregular samples: each count holds until the next": {
			points: []TracePoint{{AtSeconds: 0, Ready: 2}, {AtSeconds: 0.5, Ready: 6}, {AtSeconds: 3, Ready: 1}},
			from:   0, to: 4, want: 2*0.5 + 6*2.5 + 1*1,
		},
		"the first sample late: its count stands for the start too": {
			points: []TracePoint{{AtSeconds: 1.2, Ready: 5}, {AtSeconds: 2, Ready: 5}},
			from:   0, to: 10, want: 50,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IdleMemberSeconds(tc.points, tc.from, tc.to); got != tc.want {
				t.Errorf("IdleMemberSeconds = %v, want %v", got, tc.want)
			}
		})
	}
	if got := ReplicaSeconds(every(61, func(int) int32 { return 0 }), 0, 60); got != 600 {
		t.Errorf("ReplicaSeconds of 10 replicas over 60 s = %v, want 600", got)
	}
}

// traceResult is a trace scenario's result with a static arm, an hpa arm and a failed
// autoscaler arm.
func traceResult() *Result {
	timeline := func(replicas int32, ready func(i int) int32) []TracePoint {
		var out []TracePoint
		for i := range 130 {
			out = append(out, TracePoint{AtSeconds: float64(i), Replicas: replicas, Members: ready(i), Ready: ready(i)})
		}
		return out
	}
	run := func(warm, cold int) *Result {
		return &Result{Claims: Claims{Created: warm + cold, Ready: warm + cold, WarmHits: warm, ColdStarts: cold},
			Latency: Latency{Client: stats.Summary{Count: warm + cold, P50: 40, P99: 900}}}
	}
	return &Result{
		Scenario: "trace", Description: "a day of demand", Parameters: Parameters{Profile: "fast"},
		Trace: &Trace{
			Summary: "seed 1: 300 claims over 2m0s", CSV: "trace-seed1.csv", Seed: 1, DurationSeconds: 120, Claims: 300,
			Demand: []float64{0.4, 1, 3, 2.2}, DemandBinSeconds: 30, StartupSeconds: 8, PeakWindowClaims: 40, Headroom: 0.25,
			Arms: []TraceArm{
				{Policy: PolicyStatic, Settings: "a pool of 50", Result: run(300, 0), WarmShare: 1, WarmStarting: 4, IdleMemberSeconds: 5000,
					Timeline: timeline(50, func(int) int32 { return 45 })},
				{Policy: PolicyHPA, Settings: "HPA on the claim rate", Result: run(270, 30), WarmShare: 0.9, WarmStarting: -1, IdleMemberSeconds: 1500,
					Timeline: timeline(12, func(i int) int32 { return int32(i % 12) }), Scales: []PoolScale{{AtSeconds: 45, From: 5, To: 12}}},
				{Policy: PolicyAutoscaler, Settings: "WarmPoolAutoscaler: min 5", Error: "the cluster does not serve it"},
			},
		},
	}
}

func TestWriteTracePlotDrawsDemandAndEachPolicysPool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace-timeline.svg")
	if err := WriteTracePlot(path, traceResult()); err != nil {
		t.Fatalf("WriteTracePlot: %v", err)
	}
	doc := readSVG(t, path)
	for _, want := range []string{"claims created (per 30 s)", "static: 100.0% warm, 5000 idle member-seconds",
		"hpa: 90.0% warm, 1500 idle member-seconds", "autoscaler: failed", "replicas", "ready unbound", "claims/s"} {
		if !doc.hasText(want) {
			t.Errorf("no text starting %q in %q", want, doc.texts)
		}
	}
	// The demand once; replicas and ready members in each of the two arms that ran, each a line
	// and its legend's thumbnail; nothing for the failed arm.
	for name, tc := range map[string]struct {
		c    color.RGBA
		want int
	}{"demand": {demandColor, 2}, "replicas": {replicasColor, 4}, "ready": {readyColor, 4}} {
		if got := doc.paths(tc.c); got != tc.want {
			t.Errorf("%s: %d paths, want %d", name, got, tc.want)
		}
	}
}

// The trace scenario has a section of its own, its picture linked when drawn; its policies'
// runs are not rows of the tables of single runs.
func TestMarkdownHasTheTraceSectionOutsideTheRunTables(t *testing.T) {
	reportPath := filepath.Join(t.TempDir(), "performance.md")
	tr := traceResult()
	names, err := WritePlots(PlotDir(reportPath), tr)
	if err != nil || len(names) != 1 || names[0] != "trace-timeline.svg" {
		t.Fatalf("WritePlots = %v, %v; want trace-timeline.svg", names, err)
	}
	burst := &Result{Scenario: "burst-100", Parameters: Parameters{BurstSize: 100, TotalBursts: 1, QPS: 100}}
	var b strings.Builder
	if err := WriteMarkdownWithPlots(&b, Machine{}, []*Result{burst, tr}, "make bench", reportPath); err != nil {
		t.Fatalf("WriteMarkdownWithPlots: %v", err)
	}
	got := b.String()
	for _, want := range []string{
		"## Demand trace: warm pool policies",
		"trace seed 1: 300 claims over 2m0s; CSV `trace-seed1.csv`",
		"| static | a pool of 50 | 300 of 300 | 100.00% | 4 | 0 | 40.0 | 900.0 | 5000 | 1.00 |",
		"| hpa | HPA on the claim rate | 300 of 300 | 90.00% | - | 30 | 40.0 | 900.0 | 1500 | 0.30 |",
		"| autoscaler | WarmPoolAutoscaler: min 5 | failed: the cluster does not serve it |",
		"![trace: demand, pool replicas and ready members over time](performance/trace-timeline.svg)",
		"| burst-100 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| trace |") {
		t.Errorf("the trace scenario is a row of the run tables:\n%s", got)
	}
}
