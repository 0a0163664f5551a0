//go:build integration

package soak_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandgate-dev/sandgate/test/soak"
)

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The short soak of issue 25: two replicas under a claim load, every fault once, and the
// checker finds nothing lost, leaked, bound twice or written by a stale leader.
func TestShortSoakLosesNothing(t *testing.T) {
	o := soak.ShortOptions()
	o.Log = testLog{t}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := soak.Run(ctx, o)
	if err != nil {
		t.Fatalf("the soak did not run: %v", err)
	}
	var report strings.Builder
	if err := res.WriteText(&report); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + report.String())
	for _, k := range soak.FaultKinds {
		if res.Report.FaultsByKind[k] < 1 {
			t.Errorf("fault %s was not injected", k)
		}
	}
	if res.Skipped > 0 || len(res.FaultErrors) > 0 {
		t.Errorf("%d faults skipped, injection errors %v", res.Skipped, res.FaultErrors)
	}
	if res.NotServed > 0 {
		t.Errorf("%d claims not Ready within %s", res.NotServed, o.ReadyTimeout)
	}
	if !res.Settled {
		t.Error("the system did not settle after the load")
	}
	if res.Report.Claims.Served == 0 || res.Report.Claims.Served < res.Report.Claims.Created/2 {
		t.Errorf("%d of %d claims served", res.Report.Claims.Served, res.Report.Claims.Created)
	}
	for _, v := range res.Report.Violations {
		t.Errorf("violation: %s", v)
	}
}
