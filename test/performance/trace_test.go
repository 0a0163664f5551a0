package performance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/trace"
)

// The policies are sized from the trace: the static pool for the most claims within one
// member start-up time plus headroom, which is also the dynamic policies' maximum; their
// minimum for the night's claims within one start-up time plus headroom, at least 2.
func TestTraceSizingFollowsTheTrace(t *testing.T) {
	s := traceFlags
	tr := &trace.Trace{Shape: trace.Shape{Duration: time.Minute}, Arrivals: []trace.Arrival{
		{At: 0}, {At: 3 * time.Second}, {At: 10 * time.Second}, {At: 11 * time.Second},
		{At: 12 * time.Second}, {At: 17 * time.Second}, {At: 30 * time.Second},
	}}
	z := s.sizeFor(tr) // 4 claims within 8 s: ceil(4 × 1.25) = 5; night 0.5/s × 8 s × 1.25 = 5
	if z.static != 5 || z.min != 5 || z.hpa.MaxReplicas != 5 || z.wpa.MaxReplicas != 5 || z.hpa.MinReplicas != 5 {
		t.Errorf("sizing = static %d, min %d, hpa %d–%d, autoscaler max %d; want 5 each", z.static, z.min, z.hpa.MinReplicas, z.hpa.MaxReplicas, z.wpa.MaxReplicas)
	}
	s.MinReplicas = 1 // below the floor of 2
	if z := s.sizeFor(tr); z.min != 2 {
		t.Errorf("--trace-min 1: min %d, want 2", z.min)
	}
	s.MinReplicas, s.HPADelay, s.HPAWindow = 3, 45*time.Second, 30*time.Second
	z = s.sizeFor(tr)
	if z.min != 3 || z.hpa.Delay != 45*time.Second || z.hpa.Window != 30*time.Second || z.hpa.Target != s.HPATarget {
		t.Errorf("flags not applied: %+v", z.hpa)
	}
	if got, want := z.settings(report.PolicyStatic), "a pool of 5"; got != want {
		t.Errorf("static settings %q, want %q", got, want)
	}
}

func TestTraceSettingsRefuseWhatCannotRun(t *testing.T) {
	if _, err := traceFlags.shape(); err != nil {
		t.Fatalf("the default settings: %v", err)
	}
	for name, mutate := range map[string]func(*traceSettings){
		"unknown policy":        func(s *traceSettings) { s.Policies = "static,vpa" },
		"unknown profile":       func(s *traceSettings) { s.Profile = "slow" },
		"burst sizes garbled":   func(s *traceSettings) { s.BurstSize = "many" },
		"lifetimes garbled":     func(s *traceSettings) { s.Lifetime = "long" },
		"no start-up time":      func(s *traceSettings) { s.Startup = 0 },
		"night above the peak":  func(s *traceSettings) { s.NightRate = 7 },
		"a window of fractions": func(s *traceSettings) { s.ScaleDownWindow = 1500 * time.Millisecond },
		"a negative window":     func(s *traceSettings) { s.ScaleDownWindow = -time.Minute },
		"a period of fractions": func(s *traceSettings) { s.ScaleDownPeriod = 500 * time.Millisecond },
		"a step of nothing":     func(s *traceSettings) { s.ScaleDownMaxStep = "0%" },
		"a step garbled":        func(s *traceSettings) { s.ScaleDownMaxStep = "half" },
	} {
		t.Run(name, func(t *testing.T) {
			s := traceFlags
			mutate(&s)
			if _, err := s.shape(); err == nil {
				t.Error("accepted")
			}
		})
	}
	s := traceFlags
	s.Policies = " hpa, static"
	got, err := s.policies()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"hpa", "static"}, got); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
}
