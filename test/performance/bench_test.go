package performance

import (
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parse is what sandgate-bench does with its command line.
func parse(t *testing.T, args ...string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := flag.NewFlagSet("sandgate-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o
}

func TestDefaultsValid(t *testing.T) {
	if err := parse(t).Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestSerial(t *testing.T) {
	o := parse(t, "--serial", "50", "--burst-size", "7", "--warmpool-size", "60")
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	o = o.resolved()
	want := []int{1, 50, 60}
	if diff := cmp.Diff(want, []int{o.BurstSize, o.TotalBursts, o.WarmPoolSize}); diff != "" {
		t.Errorf("--serial 50: burst size, bursts, pool mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := map[string][]string{
		"zero qps":                   {"--qps", "0"},
		"zero bursts":                {"--total-bursts", "0"},
		"negative pool":              {"--warmpool-size", "-1"},
		"unknown profile":            {"--profile", "slow"},
		"start-up times, fast pods":  {"--pod-startup-median", "1s"},
		"p99 below the median":       {"--profile", "realistic", "--pod-startup-median", "3s", "--pod-startup-p99", "2s"},
		"render without out":         {"--scenarios", "all", "--render"},
		"scenarios on a remote":      {"--scenarios", "all", "--kubeconfig", "/tmp/k"},
		"floor admission alone":      {"--floor-admission"},
		"floor on a remote cluster":  {"--floor", "--kubeconfig", "/tmp/k"},
		"floor with nothing to fill": {"--floor", "--operator-cmd", "none"},
		"floor without webhooks":     {"--floor", "--webhooks=false"},
		"floor of the scenarios":     {"--floor", "--scenarios", "all"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if err := parse(t, args...).Validate(); err == nil {
				t.Errorf("Validate of %q succeeded, want an error", args)
			}
		})
	}
}

func TestStartupTimesFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"realistic pods":                 {"--profile", "realistic", "--pod-startup-median", "1s", "--pod-startup-p99", "4s", "--pod-startup-seed", "9"},
		"realistic pods, default times":  {"--profile", "realistic"},
		"the realistic scenarios' times": {"--scenarios", "all", "--pod-startup-median", "1s", "--pod-startup-p99", "4s"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := parse(t, args...).Validate(); err != nil {
				t.Errorf("Validate of %q: %v", args, err)
			}
		})
	}
}
