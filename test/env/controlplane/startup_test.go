package controlplane

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// quantile is the q-quantile of sorted, equally likely values (the smallest value with at least
// a share q of them at or below it).
func quantile[T int64 | time.Duration](sorted []T, q float64) T {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// within reports whether got is within a share tol of want.
func within(got, want time.Duration, tol float64) bool {
	return math.Abs(float64(got-want)) <= tol*float64(want)
}

func TestRealisticStartupQuantilesMatchTheFlags(t *testing.T) {
	// The log-normal fitted to the median and p99 has its p90 at exp(mu + 1.2816 sigma).
	const z90 = 1.2815515655446004
	for name, s := range map[string]PodStartup{
		"defaults (2s, 8s)":     {},
		"short (300ms, 1.2s)":   {Median: 300 * time.Millisecond, P99: 1200 * time.Millisecond},
		"narrow (100ms, 150ms)": {Median: 100 * time.Millisecond, P99: 150 * time.Millisecond},
		"long tail (1s, 1m)":    {Median: time.Second, P99: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.validate(); err != nil {
				t.Fatal(err)
			}
			full := s.withDefaults()
			ms := s.Milliseconds()
			if len(ms) != startupAtoms || !slices.IsSorted(ms) || ms[0] < 1 {
				t.Fatalf("Milliseconds: got %d values (sorted %t, smallest %d), want %d ascending positive ones",
					len(ms), slices.IsSorted(ms), ms[0], startupAtoms)
			}
			sigma := math.Log(float64(full.P99)/float64(full.Median)) / z99
			wantP90 := time.Duration(float64(full.Median) * math.Exp(sigma*z90))
			for _, c := range []struct {
				q    float64
				want time.Duration
			}{{0.5, full.Median}, {0.9, wantP90}, {0.99, full.P99}} {
				got := time.Duration(quantile(ms, c.q)) * time.Millisecond
				if !within(got, c.want, 0.01) {
					t.Errorf("p%g of the atoms: got %s, want %s within 1%%", c.q*100, got, c.want)
				}
			}
		})
	}
}

func TestDrawsOfNamedPodsFollowTheDistributionAndTheSeed(t *testing.T) {
	// A pod's draw is a hash of its name: 300 pods named in sequence must still spread over
	// the distribution, and another seed must give them other times.
	s := PodStartup{}.withDefaults()
	other := s
	other.Seed = 42
	var draws []time.Duration
	changed := 0
	for i := range 300 {
		name := fmt.Sprintf("pod-%03d", i)
		d := s.Draw("default", name)
		draws = append(draws, d)
		if other.Draw("default", name) != d {
			changed++
		}
		if again := s.Draw("default", name); again != d {
			t.Fatalf("Draw(default, %s): %s, then %s: want the same time for the same pod", name, d, again)
		}
	}
	slices.Sort(draws)
	for _, c := range []struct {
		q    float64
		want time.Duration
		tol  float64
	}{{0.5, s.Median, 0.15}, {0.99, s.P99, 0.35}} {
		if got := quantile(draws, c.q); !within(got, c.want, c.tol) {
			t.Errorf("p%g of 300 pods' draws: got %s, want %s within %g%%", c.q*100, got, c.want, c.tol*100)
		}
	}
	if changed < 250 {
		t.Errorf("seed 42 changed the draw of %d of 300 pods, want nearly all", changed)
	}
}

// stage is the part of a kwok Stage these tests read.
type stage struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		ResourceRef struct {
			Kind string `json:"kind"`
		} `json:"resourceRef"`
		Delay *struct {
			DurationMilliseconds       *int64          `json:"durationMilliseconds"`
			JitterDurationMilliseconds *int64          `json:"jitterDurationMilliseconds"`
			DurationFrom               *map[string]any `json:"durationFrom"`
		} `json:"delay"`
		Steps []struct {
			Patch *struct {
				Template string `json:"template"`
			} `json:"patch"`
		} `json:"steps"`
	} `json:"spec"`
}

// parseStages splits a kwok configuration into its Stages.
func parseStages(t *testing.T, data []byte) map[string]stage {
	t.Helper()
	out := map[string]stage{}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var st stage
		if err := yaml.Unmarshal(doc, &st); err != nil {
			t.Fatalf("stage document does not parse: %v\n%s", err, doc)
		}
		if st.Kind == "" {
			continue // comments only
		}
		if _, dup := out[st.Metadata.Name]; dup {
			t.Fatalf("stage %s defined twice", st.Metadata.Name)
		}
		out[st.Metadata.Name] = st
	}
	return out
}

func TestRealisticStagesHoldThePodUntilItsDrawnTime(t *testing.T) {
	s := PodStartup{Median: 300 * time.Millisecond, P99: 1200 * time.Millisecond, Seed: 7}
	data, err := kwokStages(ProfileRealistic, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, placeholder := range []string{"SANDGATE_STARTUP_ATOMS", "SANDGATE_STARTUP_MILLISECONDS", "SANDGATE_STARTUP_SEED"} {
		if strings.Contains(string(data), placeholder) {
			t.Fatalf("placeholder %s is left in the stages:\n%s", placeholder, data)
		}
	}
	stages := parseStages(t, data)
	var pods []string
	for name, st := range stages {
		if st.Spec.ResourceRef.Kind == "Pod" {
			pods = append(pods, name)
		}
	}
	slices.Sort(pods)
	want := []string{
		"sandgate-kubelet-pod-complete", "sandgate-kubelet-pod-delete", "sandgate-kubelet-pod-terminate",
		"sandgate-realistic-pod-containers", "sandgate-realistic-pod-initialize", "sandgate-realistic-pod-ready",
	}
	if diff := cmp.Diff(want, pods); diff != "" {
		t.Errorf("pod stages of the realistic profile (-want +got):\n%s", diff)
	}

	// The initialize stage carries the atoms and the seed; the containers stage waits for the
	// time it writes, with no jitter (kwok would cap the delay at it).
	init := stages["sandgate-realistic-pod-initialize"].Spec.Steps[0].Patch.Template
	atoms := make([]string, 0, startupAtoms)
	for _, v := range s.Milliseconds() {
		atoms = append(atoms, fmt.Sprint(v))
	}
	for _, part := range []string{"( list " + strings.Join(atoms, " ") + " )", `"7" .metadata.namespace .metadata.name`, fmt.Sprintf(") ) ) %d }}", startupAtoms)} {
		if !strings.Contains(init, part) {
			t.Errorf("the initialize template lacks %.80q", part)
		}
	}
	delay := stages["sandgate-realistic-pod-containers"].Spec.Delay
	if delay == nil || delay.DurationFrom == nil || delay.JitterDurationMilliseconds != nil {
		t.Errorf("the containers stage's delay: got %+v, want a durationFrom and no jitter", delay)
	}
}

func TestEveryProfileHasUniqueStageNames(t *testing.T) {
	for _, p := range Profiles {
		data, err := kwokStages(p, PodStartup{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if n := len(parseStages(t, data)); n < 4 {
			t.Errorf("%s: %d stages, want the nodes' and the pods'", p, n)
		}
	}
}

func TestCheckProfile(t *testing.T) {
	for name, c := range map[string]struct {
		profile Profile
		startup PodStartup
		wantErr string
	}{
		"fast with no start-up times":    {profile: ProfileFast},
		"fast with the default times":    {profile: ProfileFast, startup: PodStartup{Median: DefaultPodStartupMedian, P99: DefaultPodStartupP99}},
		"realistic with its defaults":    {profile: ProfileRealistic},
		"realistic with short times":     {profile: ProfileRealistic, startup: PodStartup{Median: 300 * time.Millisecond, P99: 1200 * time.Millisecond, Seed: 3}},
		"unknown profile":                {profile: "slow", wantErr: `unknown profile "slow"`},
		"kubelet with a start-up median": {profile: ProfileKubelet, startup: PodStartup{Median: time.Second}, wantErr: "apply to the realistic profile only"},
		"fast with a seed":               {profile: ProfileFast, startup: PodStartup{Seed: 1}, wantErr: "apply to the realistic profile only"},
		"p99 not above the median":       {profile: ProfileRealistic, startup: PodStartup{Median: 3 * time.Second, P99: 3 * time.Second}, wantErr: "want more than the median"},
		"p99 below the default median":   {profile: ProfileRealistic, startup: PodStartup{P99: time.Second}, wantErr: "want more than the median (2s)"},
		"negative median":                {profile: ProfileRealistic, startup: PodStartup{Median: -time.Second}, wantErr: "invalid pod start-up median"},
		"median beyond the bound":        {profile: ProfileRealistic, startup: PodStartup{Median: time.Hour, P99: 2 * time.Hour}, wantErr: "want 1ms to 10m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckProfile(c.profile, c.startup)
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}
