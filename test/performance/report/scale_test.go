package report

import (
	"strings"
	"testing"
)

func TestScaleRatiosAreToPool50AndToTheFloorAndZeroWithoutEitherSide(t *testing.T) {
	cases := map[string]struct {
		scale                        Scale
		wantToPool50, wantToTheFloor float64
	}{
		"both measured":    {scale: Scale{SerialP50Ms: 24, Pool50SerialP50Ms: 20, FloorSerialP50Ms: 12}, wantToPool50: 1.2, wantToTheFloor: 2},
		"no reference":     {scale: Scale{SerialP50Ms: 24, FloorSerialP50Ms: 12}, wantToTheFloor: 2},
		"no floor":         {scale: Scale{SerialP50Ms: 24, Pool50SerialP50Ms: 20}, wantToPool50: 1.2},
		"no serial claims": {scale: Scale{Pool50SerialP50Ms: 20, FloorSerialP50Ms: 12}},
		"nothing measured": {},
		"faster than pool": {scale: Scale{SerialP50Ms: 18, Pool50SerialP50Ms: 20}, wantToPool50: 0.9},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.scale
			s.SetRatios()
			if s.P50RatioToPool50 != tc.wantToPool50 || s.P50RatioToFloor != tc.wantToTheFloor {
				t.Errorf("ratios to pool 50 and to the floor = %v, %v; want %v, %v", s.P50RatioToPool50, s.P50RatioToFloor, tc.wantToPool50, tc.wantToTheFloor)
			}
		})
	}
}

func TestPerThousandIsTheIncreaseForEachThousand(t *testing.T) {
	cases := map[string]struct {
		value, baseline float64
		count           int
		want            float64
	}{
		"20,000":                {value: 240, baseline: 40, count: 20000, want: 10},
		"fewer than a thousand": {value: 41, baseline: 40, count: 500, want: 2},
		"rounded to hundredths": {value: 50, baseline: 40, count: 3000, want: 3.33},
		"no count":              {value: 240, baseline: 40, count: 0, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := PerThousand(tc.value, tc.baseline, tc.count); got != tc.want {
				t.Errorf("PerThousand(%v, %v, %d) = %v, want %v", tc.value, tc.baseline, tc.count, got, tc.want)
			}
		})
	}
}

func TestScaleTextSaysWhetherEachTargetWasMet(t *testing.T) {
	s := &Scale{Sandboxes: 20000, Pools: 200, Namespaces: 20, SerialP50Ms: 30, Pool50SerialP50Ms: 20, RestartToFirstClaimSeconds: 4}
	s.SetRatios()
	var b strings.Builder
	if err := WriteScaleText(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20000 Sandboxes in 200 pools across 20 namespaces", "target ≤ 10 s: met", "serial p50 ÷ pool 50: 1.50 — target ≤ 1.2: MISSED"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// TestScaleIsJudgedOnTheMedianRestart: with several restarts, the restart figures (and so the
// target) are the median restart's, whole (its /readyz time too), and the text lists each.
func TestScaleIsJudgedOnTheMedianRestart(t *testing.T) {
	s := &Scale{Restarts: []Restart{
		{StopSeconds: 1.1, ToReadySeconds: 12.7, ToFirstClaimSeconds: 14.4, ClaimAttempts: 7},
		{StopSeconds: 1.2, ToReadySeconds: 8.1, ToFirstClaimSeconds: 9.2, ClaimAttempts: 5},
		{StopSeconds: 1.3, ToReadySeconds: 8.9, ToFirstClaimSeconds: 9.8, ClaimAttempts: 6},
	}}
	s.SetMedianRestart()
	if s.RestartToFirstClaimSeconds != 9.8 || s.RestartToReadySeconds != 8.9 || s.RestartStopSeconds != 1.3 || s.RestartClaimAttempts != 6 {
		t.Errorf("restart figures %v / %v / %v / %d, want the median restart's 9.8 / 8.9 / 1.3 / 6",
			s.RestartToFirstClaimSeconds, s.RestartToReadySeconds, s.RestartStopSeconds, s.RestartClaimAttempts)
	}
	var b strings.Builder
	if err := WriteScaleText(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "restart (median of 3)") || !strings.Contains(b.String(), "each: 14.40, 9.20, 9.80 s") ||
		!strings.Contains(b.String(), "target ≤ 10 s: met") {
		t.Errorf("text does not give the median and each restart:\n%s", b.String())
	}

	two := &Scale{Restarts: []Restart{{ToFirstClaimSeconds: 11}, {ToFirstClaimSeconds: 9}}}
	two.SetMedianRestart()
	if two.RestartToFirstClaimSeconds != 11 {
		t.Errorf("median of two restarts: %v, want the slower middle one, 11", two.RestartToFirstClaimSeconds)
	}
}
