package performance

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Every flag of the overload scenario that cannot run is refused, each naming itself.
func TestOverloadFlagsValidate(t *testing.T) {
	if err := overloadFlags.validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*overloadSettings)
		want   string
	}{
		"a multiplier of one":     {func(s *overloadSettings) { s.Multipliers = "1,4" }, `--overload-multipliers: "1" is not a number above 1`},
		"a multiplier not a rate": {func(s *overloadSettings) { s.Multipliers = "2,x" }, `--overload-multipliers: "x" is not a number above 1`},
		"a multiplier twice":      {func(s *overloadSettings) { s.Multipliers = "2, 2" }, "--overload-multipliers: 2 twice"},
		"no multiplier":           {func(s *overloadSettings) { s.Multipliers = "" }, `--overload-multipliers: "" is not a number above 1`},
		"a short duration":        {func(s *overloadSettings) { s.Duration = 10 * time.Second }, "--overload-duration 10s: want at least 20s"},
		"no probe rate":           {func(s *overloadSettings) { s.ProbeRate = 0 }, "--overload-probe-rate 0: want a positive rate"},
		"a negative rate":         {func(s *overloadSettings) { s.Rate = -1 }, "--overload-rate -1: want 0"},
		"an empty pool":           {func(s *overloadSettings) { s.Pool = 0 }, "--overload-pool 0: want at least 1"},
		"a lifetime backwards":    {func(s *overloadSettings) { s.Lifetime = "10s-2s" }, "--overload-lifetime: lifetime \"10s-2s\""},
	} {
		t.Run(name, func(t *testing.T) {
			s := overloadFlags
			tc.change(&s)
			err := s.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The sandgate arms offer their rate open (refusals counted, no slot waiting for Ready); the
// floor's probe is the plain floor, drained as long as the arrivals last, at least 30 s.
func TestOverloadArms(t *testing.T) {
	s := overloadFlags
	got, err := s.multipliers()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{2, 4}, got); diff != "" {
		t.Errorf("default multipliers (-want +got):\n%s", diff)
	}
	floor, sg := s.config(Options{}, "floor", 40, true), s.config(Options{}, "1x", 12.5, false)
	if !floor.Floor || floor.Open || sg.Floor || !sg.Open || sg.Rate != 12.5 || sg.Timeout != 45*time.Second || floor.RefillWorkers != 400 {
		t.Errorf("floor %+v, sandgate %+v: want the floor closed, sandgate open at 12.5/s, drained 45s", floor, sg)
	}
	for _, cfg := range []any{floor.Validate(), sg.Validate()} {
		if cfg != nil {
			t.Error(cfg)
		}
	}
	if floor.APIServerProfile != "" || sg.APIServerProfile != "" {
		t.Errorf("profiles %q, %q without --apiserver-profile", floor.APIServerProfile, sg.APIServerProfile)
	}
}

// With --apiserver-profile each arm profiles its whole arrivals into a file of its own; the
// floor has no webhook server of sandgate's to profile.
func TestOverloadArmsProfileEachArm(t *testing.T) {
	s := overloadFlags
	o := Options{CPUProfile: "/tmp/api.pprof", WebhookProfile: "/tmp/op.pprof", ProfileSeconds: 10}
	floor, sg := s.config(o, "floor", 40, true), s.config(o, "2x", 25, false)
	if floor.APIServerProfile != "/tmp/api.pprof.floor" || floor.WebhookServerProfile != "" {
		t.Errorf("floor profiles %q, %q", floor.APIServerProfile, floor.WebhookServerProfile)
	}
	if sg.APIServerProfile != "/tmp/api.pprof.2x" || sg.WebhookServerProfile != "/tmp/op.pprof.2x" {
		t.Errorf("2× profiles %q, %q", sg.APIServerProfile, sg.WebhookServerProfile)
	}
	if want := int(s.Duration.Seconds()); floor.ProfileSeconds != want || sg.ProfileSeconds != want {
		t.Errorf("profile seconds %d, %d: want the arrivals' %d", floor.ProfileSeconds, sg.ProfileSeconds, want)
	}
}
