package load

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// memory is an operator scrape with the memory series of its process and Go collectors.
func memory(rssMiB, inuseMiB, allocMiB float64) scrape.Snapshot {
	snap, err := scrape.Parse(strings.NewReader(
		"process_resident_memory_bytes " + mibBytes(rssMiB) + "\n" +
			"go_memstats_heap_inuse_bytes " + mibBytes(inuseMiB) + "\n" +
			"go_memstats_heap_alloc_bytes " + mibBytes(allocMiB) + "\n"))
	if err != nil {
		panic(err)
	}
	return snap
}

func mibBytes(mib float64) string { return strconv.FormatFloat(mib*(1<<20), 'f', -1, 64) }

func TestSetMemoryReportsTheCostOfEachThousandSandboxesAboveTheEmptyOperator(t *testing.T) {
	cases := map[string]struct {
		baseline, idle scrape.Snapshot
		want           report.Scale
	}{
		"both read": {
			baseline: memory(40, 10, 8), idle: memory(240, 130, 100),
			want: report.Scale{Sandboxes: 20000, BaselineRSSMiB: 40, BaselineHeapInuseMiB: 10,
				OperatorRSSMiB: 240, HeapInuseMiB: 130, HeapAllocMiB: 100,
				MiBPer1000Sandboxes: 10, HeapInuseMiBPer1000Sandboxes: 6},
		},
		"no baseline: the whole process per thousand": {
			idle: memory(240, 130, 100),
			want: report.Scale{Sandboxes: 20000, OperatorRSSMiB: 240, HeapInuseMiB: 130, HeapAllocMiB: 100,
				MiBPer1000Sandboxes: 12, HeapInuseMiBPer1000Sandboxes: 6.5},
		},
		"no idle scrape: nothing but the baseline": {
			baseline: memory(40, 10, 8),
			want:     report.Scale{Sandboxes: 20000, BaselineRSSMiB: 40, BaselineHeapInuseMiB: 10},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := report.Scale{Sandboxes: 20000}
			setMemory(&got, tc.baseline, tc.idle)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("memory figures (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCorePercentIsCPUSecondsPerSecondOfTheWindow(t *testing.T) {
	cases := map[string]struct {
		before, after float64
		ok            bool
		window        time.Duration
		want          float64
	}{
		"a tenth of a core":     {before: 10, after: 13, ok: true, window: 30 * time.Second, want: 10},
		"one and a half cores":  {before: 0, after: 3, ok: true, window: 2 * time.Second, want: 150},
		"idle":                  {before: 5, after: 5, ok: true, window: 30 * time.Second, want: 0},
		"a read failed":         {before: 1, after: 2, window: 30 * time.Second, want: -1},
		"an empty window":       {before: 1, after: 2, ok: true, want: -1},
		"rounded to hundredths": {before: 0, after: 0.1, ok: true, window: 30 * time.Second, want: 0.33},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := corePercent(tc.before, tc.after, tc.ok, tc.window); got != tc.want {
				t.Errorf("corePercent(%v, %v, %v, %s) = %v, want %v", tc.before, tc.after, tc.ok, tc.window, got, tc.want)
			}
		})
	}
}

func TestCountFillCountsOnlyTheRunsPoolsAndCapsReadyAtReplicas(t *testing.T) {
	pool := func(ns, name string, replicas, ready int32) extv1beta1.SandboxWarmPool {
		return extv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status:     extv1beta1.SandboxWarmPoolStatus{Replicas: replicas, ReadyReplicas: ready},
		}
	}
	pools := []extv1beta1.SandboxWarmPool{
		pool("scale-00", "bench-pool", 5, 5),
		pool("scale-00", "bench-pool-1", 5, 3),
		pool("scale-01", "bench-pool", 6, 6), // a surplus member on its way out: not full yet
		pool("other", "bench-pool", 5, 5),    // not the run's
	}
	want := map[string]bool{"scale-00/bench-pool": true, "scale-00/bench-pool-1": true, "scale-01/bench-pool": true}
	got := countFill(pools, want, 5)
	if diff := cmp.Diff(fillCount{ready: 13, members: 16, full: 1, pools: 3}, got, cmp.AllowUnexported(fillCount{})); diff != "" {
		t.Errorf("fill (-want +got):\n%s", diff)
	}
}

func TestScaleNamesGiveEachNamespacesFirstPoolTheNamesClaimsUse(t *testing.T) {
	type names struct{ Namespace, Template, Pool string }
	cases := map[string]struct {
		ns, i int
		want  names
	}{
		"first pool":  {ns: 0, i: 0, want: names{"scale-00", templateName, poolName}},
		"other pools": {ns: 12, i: 9, want: names{"scale-12", templateName + "-9", poolName + "-9"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got names
			got.Namespace, got.Template, got.Pool = scaleNames("scale", tc.ns, tc.i)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScaleConfigRefusesPoolsTooSmallForItsClaims(t *testing.T) {
	valid := ScaleConfig{Namespaces: 20, PoolsPerNamespace: 10, Replicas: 100, SerialClaims: 30, FloorClaims: 30}
	if err := valid.validate(); err != nil {
		t.Errorf("20 × 10 × 100 with 30 claims: %v", err)
	}
	if got := valid.Sandboxes(); got != 20000 {
		t.Errorf("Sandboxes() = %d, want 20000", got)
	}
	cases := map[string]func(*ScaleConfig){
		"no namespace":                       func(c *ScaleConfig) { c.Namespaces = 0 },
		"no pool":                            func(c *ScaleConfig) { c.PoolsPerNamespace = 0 },
		"no room for the restart's claim":    func(c *ScaleConfig) { c.Replicas = 30 },
		"more floor claims than one pool":    func(c *ScaleConfig) { c.FloorClaims = 101 },
		"no serial claim":                    func(c *ScaleConfig) { c.SerialClaims = 0 },
		"a floor without a second namespace": func(c *ScaleConfig) { c.Namespaces = 1 },
		"pools of zero replicas (cold only)": func(c *ScaleConfig) { c.Replicas = 0 },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			c := valid
			edit(&c)
			if err := c.validate(); err == nil {
				t.Errorf("validate() accepted %+v", c)
			}
		})
	}
}

func TestPoolMembersKeepsTheNamedPoolsMembersOnly(t *testing.T) {
	mine, other, claimed := readyMember("a"), readyMember("b"), readyMember("c")
	other.OwnerReferences[0].Name = "bench-pool-1"
	claimed.OwnerReferences[0].Kind = "SandboxClaim"
	got := poolMembers([]*agentsv1beta1.Sandbox{mine, other, claimed}, "bench-pool")
	if len(got) != 1 || got[0].Name != "a" {
		t.Errorf("members of bench-pool: %v, want [a]", got)
	}
}
