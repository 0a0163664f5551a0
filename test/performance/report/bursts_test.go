package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func burstRun() *Result {
	r := &Result{PoolFillSeconds: 12}
	r.Parameters.WarmPoolSize = 600 // fills at 50 members/s
	r.Bursts = &Bursts{Bursts: []Burst{
		{Index: 1, Seconds: 3, During: &BurstWindow{SandboxCreates: 0}},
		{Index: 2, Seconds: 4, During: &BurstWindow{SandboxCreates: 50}},
		{Index: 3, Seconds: 10, During: &BurstWindow{SandboxCreates: 300}},
		{Index: 4, Seconds: 9},
	}}
	return r
}

func TestWorkSecondsAddsABurstsStartsAtTheFillRate(t *testing.T) {
	r := burstRun()
	for i, want := range []float64{3, 4, 9, 0} {
		if got := WorkSeconds(r, r.Bursts.Bursts[i]); got != want {
			t.Errorf("burst %d: work seconds %v, want %v", i+1, got, want)
		}
	}
	r.Parameters.Autoscaler = "min 10, max 600, targetSpare 10"
	if got := WorkSeconds(r, r.Bursts.Bursts[2]); got != 0 {
		t.Errorf("an autoscaled pool, filled to its minimum: %v, want 0", got)
	}
	r.Parameters.Autoscaler, r.PoolFillSeconds = "", 0
	if got := WorkSeconds(r, r.Bursts.Bursts[2]); got != 0 {
		t.Errorf("without a measured fill: %v, want 0", got)
	}
}

func TestBurstTablesShowTheWorkSeconds(t *testing.T) {
	r := burstRun()
	var text bytes.Buffer
	if err := WriteBurstsText(&text, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "fill rate, 50.0 members/s, one after the other") {
		t.Errorf("text table does not name the fill rate:\n%s", text.String())
	}
	var md []string
	writeBursts(func(f string, a ...any) { md = append(md, fmt.Sprintf(f, a...)) }, []*Result{r})
	row := ""
	for _, l := range md {
		if strings.HasPrefix(l, "| 3 |") {
			row = l
		}
	}
	if !strings.HasSuffix(row, "| 10.0 | 9.0 |") {
		t.Errorf("markdown row of burst 3 = %q, want its seconds then its work seconds", row)
	}
}
