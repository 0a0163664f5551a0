package report

import (
	"slices"
	"testing"
)

func TestSpliceSectionsReplacesAndInserts(t *testing.T) {
	old := "# Performance\n\n## Scenarios\nold runs\n\n## Rapid bursts\nold bursts\n\n## Startup latency\nold startup\n"
	fresh := "# Performance\n\n## Scenarios\nonly the new run\n\n## Rapid bursts\nnew bursts\n\n## Demand trace: warm pool policies\nnew trace\n\n## Startup latency\nnew startup\n"
	got, titles := SpliceSections(old, fresh)
	want := "# Performance\n\n## Scenarios\nold runs\n\n## Rapid bursts\nnew bursts\n\n## Demand trace: warm pool policies\nnew trace\n\n## Startup latency\nold startup\n"
	if got != want {
		t.Errorf("spliced report:\n%s\nwant:\n%s", got, want)
	}
	if !slices.Equal(titles, []string{"## Rapid bursts", "## Demand trace: warm pool policies"}) {
		t.Errorf("titles taken %q", titles)
	}
}

func TestSpliceSectionsAtTheEndAndNothingToTake(t *testing.T) {
	got, _ := SpliceSections("# P\n\n## Claims\nx\n", "## Demand trace: warm pool policies\ntrace\n")
	if want := "# P\n\n## Claims\nx\n\n## Demand trace: warm pool policies\ntrace\n"; got != want {
		t.Errorf("appended:\n%q\nwant\n%q", got, want)
	}
	got, titles := SpliceSections("# P\n", "# Q\n\n## Claims\ny\n")
	if got != "# P\n" || len(titles) != 0 {
		t.Errorf("nothing to take: %q, %q", got, titles)
	}
}

// A report written again keeps the sections measured apart from the one it replaces: no
// result renders them.
func TestKeepSectionsCarriesTheMeasuredApart(t *testing.T) {
	old := "# Performance\n\n## Scenarios\nold runs\n\n" + SectionEncodings + "\nby hand\n\n## Startup latency\nold startup\n"
	fresh := "# Performance\n\n## Scenarios\nnew runs\n\n## Startup latency\nnew startup\n"
	want := "# Performance\n\n## Scenarios\nnew runs\n\n" + SectionEncodings + "\nby hand\n\n## Startup latency\nnew startup\n"
	if got := KeepSections(fresh, old); got != want {
		t.Errorf("kept:\n%s\nwant:\n%s", got, want)
	}
	if got := KeepSections(fresh, "# Performance\n"); got != fresh {
		t.Errorf("nothing to keep: %q", got)
	}
}
