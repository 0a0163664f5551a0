package performance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

func TestSelectScenarios(t *testing.T) {
	cases := []struct {
		name      string
		list      string
		scalePool int
		want      []string
		wantErr   bool
	}{
		{name: "all in order, optional ones left out", list: "all", scalePool: 5000, want: []string{"serial", "burst-100", "burst-300", "kubelet", "cold", "sustained-10", "sustained-50", "sustained-150", "rapid-burst", "scale-20k"}},
		{name: "optional by name", list: "burst-v1alpha1,admission-floor", scalePool: 5000, want: []string{"burst-v1alpha1", "admission-floor"}},
		{name: "scale-large alias", list: "serial, scale-large", scalePool: 3000, want: []string{"serial", "scale-3000"}},
		{name: "unknown", list: "serial,nope", scalePool: 5000, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectScenarios(tc.list, tc.scalePool)
			if (err != nil) != tc.wantErr {
				t.Fatalf("selectScenarios error = %v, wantErr %v", err, tc.wantErr)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("scenarios mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Rounds are the scenario's own, --rounds instead for a scenario measured in rounds, and one
// for the long scenarios that are not or without floors to compare with; a sustained scenario
// measured in rounds splits its arrivals over them.
func TestRoundsAndSustainedArrivals(t *testing.T) {
	byName := map[string]scenario{}
	all, err := selectScenarios("all", 20000)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		byName[sc.name] = sc
	}
	for _, tc := range []struct {
		scenario string
		o        Options
		want     int
	}{
		{"serial", Options{}, 5},
		{"serial", Options{Rounds: 2}, 2},
		{"serial", Options{SkipFloor: true}, 1},
		{"sustained-10", Options{}, 3},
		{"sustained-10", Options{Rounds: 5}, 5},
		{"sustained-50", Options{Rounds: 5}, 1},
		{"scale-20k", Options{Rounds: 5}, 1},
	} {
		if got := roundsOf(byName[tc.scenario], tc.o); got != tc.want {
			t.Errorf("roundsOf(%s, rounds %d, skip floor %v) = %d, want %d", tc.scenario, tc.o.Rounds, tc.o.SkipFloor, got, tc.want)
		}
	}
	saved := sustainedFlags
	t.Cleanup(func() { sustainedFlags = saved })
	for _, tc := range []struct {
		scenario string
		flag     time.Duration
		want     time.Duration
	}{
		{"sustained-10", 0, 80 * time.Second},
		{"sustained-10", 6 * time.Minute, 2 * time.Minute},
		{"sustained-50", 0, 5 * time.Minute},
		{"sustained-50", time.Minute, time.Minute},
	} {
		sc := byName[tc.scenario]
		sustainedFlags.Duration = tc.flag
		cfg, err := sustainedConfig(Options{Rounds: roundsOf(sc, Options{})}, sc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Duration != tc.want {
			t.Errorf("%s with --sustained-duration %s: arrivals of %s a round, want %s", tc.scenario, tc.flag, cfg.Duration, tc.want)
		}
	}
}

func TestRapidBurstVariantsKeepResultsOfTheirOwn(t *testing.T) {
	for _, c := range []struct {
		profile    controlplane.Profile
		autoscaled bool
		want       string
	}{
		{controlplane.ProfileFast, false, "rapid-burst"},
		{"", false, "rapid-burst"},
		{controlplane.ProfileRealistic, false, "rapid-burst-realistic"},
		{controlplane.ProfileRealistic, true, "rapid-burst-realistic-autoscaler"},
		{controlplane.ProfileFast, true, "rapid-burst-autoscaler"},
	} {
		if got := rapidBurstVariant("rapid-burst", c.profile, c.autoscaled); got != c.want {
			t.Errorf("rapidBurstVariant(%q, %v) = %q, want %q", c.profile, c.autoscaled, got, c.want)
		}
	}
}
