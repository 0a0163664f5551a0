package trace

import (
	"bytes"
	"encoding/csv"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// day is the shape of the scenario's default trace.
func day(seed uint64) Shape {
	return Shape{
		Duration: 8 * time.Minute, NightRate: 0.5, PeakRate: 6, Noise: 0.2,
		Bursts: 3, BurstMin: 50, BurstMax: 150, BurstSpread: 1500 * time.Millisecond,
		LifetimeMin: 10 * time.Second, LifetimeMax: 60 * time.Second, Seed: seed,
	}
}

func generate(t *testing.T, s Shape) *Trace {
	t.Helper()
	tr, err := Generate(s)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return tr
}

// A run is repeated from its seed: the same shape gives the same arrivals, lifetimes and
// bursts, another seed other ones.
func TestGenerateIsDeterminedBySeed(t *testing.T) {
	a, b := generate(t, day(7)), generate(t, day(7))
	if diff := cmp.Diff(a.Arrivals, b.Arrivals); diff != "" {
		t.Errorf("two traces of seed 7 differ (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(a.Bursts, b.Bursts); diff != "" {
		t.Errorf("bursts of seed 7 differ (-first +second):\n%s", diff)
	}
	if c := generate(t, day(8)); cmp.Equal(a.Arrivals, c.Arrivals) {
		t.Error("seeds 7 and 8 gave the same arrivals")
	}
}

// Changing the bursts leaves the Poisson arrivals as they were: each concern draws from its
// own stream, so that one setting can be varied alone.
func TestBurstsDoNotMoveThePoissonArrivals(t *testing.T) {
	with, without := day(3), day(3)
	without.Bursts = 0
	poisson := func(tr *Trace) []time.Duration {
		var at []time.Duration
		for _, a := range tr.Arrivals {
			if a.Burst == 0 {
				at = append(at, a.At)
			}
		}
		return at
	}
	if diff := cmp.Diff(poisson(generate(t, without)), poisson(generate(t, with))); diff != "" {
		t.Errorf("Poisson arrivals moved with the bursts (-without +with):\n%s", diff)
	}
}

// The Poisson arrivals follow the day's rate: their count is the rate's integral within the
// spread of a Poisson count (four standard deviations), for each of several seeds, and the
// night, the plateau and the evening each get their share.
func TestPoissonArrivalsMatchTheRateIntegral(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		s := day(seed)
		s.Bursts = 0
		tr := generate(t, s)
		want := tr.ExpectedPoisson()
		if got := float64(len(tr.Arrivals)); math.Abs(got-want) > 4*math.Sqrt(want) {
			t.Errorf("seed %d: %v arrivals, want %.0f ± %.0f", seed, got, want, 4*math.Sqrt(want))
		}
		// Phase by phase: the first night (0–15%) and the plateau (35–70%).
		for _, ph := range []struct {
			name     string
			from, to float64
		}{{"night", 0, rampStart}, {"plateau", plateauStart, declineStart}} {
			from, to := time.Duration(ph.from*float64(s.Duration)), time.Duration(ph.to*float64(s.Duration))
			expected := 0.0
			for d := from + 5*time.Millisecond; d < to; d += 10 * time.Millisecond {
				expected += tr.Rate(d) * 0.01
			}
			n := 0
			for _, a := range tr.Arrivals {
				if a.At >= from && a.At < to {
					n++
				}
			}
			if math.Abs(float64(n)-expected) > 4*math.Sqrt(expected)+1 {
				t.Errorf("seed %d, %s: %d arrivals, want %.0f ± %.0f", seed, ph.name, n, expected, 4*math.Sqrt(expected))
			}
		}
	}
}

// Without noise the integral is known in closed form: the night, the two smooth ramps (each
// their average times their span) and the plateau at the peak.
func TestRateIntegralWithoutNoise(t *testing.T) {
	s := day(1)
	s.Noise = 0
	tr := generate(t, s)
	d := s.Duration.Seconds()
	want := s.NightRate*d*(rampStart+1-nightAgain) +
		(s.NightRate+s.PeakRate)/2*d*(plateauStart-rampStart+nightAgain-declineStart) +
		s.PeakRate*d*(declineStart-plateauStart)
	if got := tr.ExpectedPoisson(); math.Abs(got-want) > 0.01*want {
		t.Errorf("ExpectedPoisson = %.1f, want %.1f", got, want)
	}
	for _, f := range []float64{0, 0.1, 0.95} {
		if got := tr.Rate(time.Duration(f * float64(s.Duration))); got != s.NightRate {
			t.Errorf("Rate at %.0f%% of the day = %g, want the night's %g", 100*f, got, s.NightRate)
		}
	}
	if got := tr.Rate(time.Duration(0.5 * float64(s.Duration))); got != s.PeakRate {
		t.Errorf("Rate at midday = %g, want the peak %g", got, s.PeakRate)
	}
}

// The rate never exceeds the peak, noise included: thinning at the peak rate is then exact.
func TestRateStaysWithinNightAndPeak(t *testing.T) {
	tr := generate(t, day(11))
	for d := time.Duration(0); d < tr.Shape.Duration; d += 100 * time.Millisecond {
		r := tr.Rate(d)
		if r > tr.Shape.PeakRate+1e-9 || r < 0 {
			t.Fatalf("Rate(%s) = %g, outside [0, %g]", d, r, tr.Shape.PeakRate)
		}
	}
}

// Each burst's claims arrive within its spread, in the order of the trace, the bursts apart.
func TestBurstsArriveWithinTheirSpread(t *testing.T) {
	s := day(5)
	tr := generate(t, s)
	if len(tr.Bursts) != s.Bursts {
		t.Fatalf("%d bursts, want %d", len(tr.Bursts), s.Bursts)
	}
	count := map[int]int{}
	for i, a := range tr.Arrivals {
		if i > 0 && a.At < tr.Arrivals[i-1].At {
			t.Fatalf("arrival %d at %s before arrival %d at %s", i, a.At, i-1, tr.Arrivals[i-1].At)
		}
		if a.Lifetime < s.LifetimeMin || a.Lifetime >= s.LifetimeMax {
			t.Errorf("arrival %d lives %s, outside [%s, %s)", i, a.Lifetime, s.LifetimeMin, s.LifetimeMax)
		}
		if a.Burst == 0 {
			continue
		}
		count[a.Burst]++
		b := tr.Bursts[a.Burst-1]
		if a.At < b.At || a.At >= b.At+s.BurstSpread {
			t.Errorf("arrival %d of burst %d at %s, outside [%s, %s)", i, a.Burst, a.At, b.At, b.At+s.BurstSpread)
		}
	}
	for i, b := range tr.Bursts {
		if b.Claims < s.BurstMin || b.Claims > s.BurstMax || count[i+1] != b.Claims {
			t.Errorf("burst %d: %d claims, %d arrivals, want %d–%d", i+1, b.Claims, count[i+1], s.BurstMin, s.BurstMax)
		}
		if i > 0 && b.At-tr.Bursts[i-1].At < s.Duration/10 {
			t.Errorf("bursts %d and %d only %s apart", i, i+1, b.At-tr.Bursts[i-1].At)
		}
	}
}

// The static pool holds the most claims arriving within one member start-up time, plus its
// headroom.
func TestStaticPoolCoversThePeakWindow(t *testing.T) {
	tr := &Trace{Shape: Shape{Duration: time.Minute}, Arrivals: []Arrival{
		{At: 0}, {At: 3 * time.Second}, {At: 10 * time.Second}, {At: 11 * time.Second},
		{At: 12 * time.Second}, {At: 17 * time.Second}, {At: 30 * time.Second},
	}}
	if n, at := tr.PeakWindow(8 * time.Second); n != 4 || at != 10*time.Second {
		t.Errorf("PeakWindow(8s) = %d at %s, want 4 at 10s", n, at)
	}
	if got := tr.StaticPool(8*time.Second, 0.25); got != 5 {
		t.Errorf("StaticPool(8s, 25%%) = %d, want ceil(4 × 1.25) = 5", got)
	}
}

// MaxConcurrent counts claims held at once: each from its arrival to its Ready (extra) plus
// its lifetime.
func TestMaxConcurrentCountsOverlappingClaims(t *testing.T) {
	tr := &Trace{Shape: Shape{Duration: time.Minute}, Arrivals: []Arrival{
		{At: 0, Lifetime: 10 * time.Second},
		{At: 2 * time.Second, Lifetime: 3 * time.Second},  // held until 6 s
		{At: 7 * time.Second, Lifetime: 10 * time.Second}, // overlaps the first only
		{At: 12 * time.Second, Lifetime: time.Second},     // the first is gone at 11 s
	}}
	if got := tr.MaxConcurrent(time.Second); got != 2 {
		t.Errorf("MaxConcurrent = %d, want 2", got)
	}
}

// The CSV holds every arrival with its claim name, so that a run can be checked against it.
func TestWriteCSVListsEveryArrival(t *testing.T) {
	s := day(2)
	s.Duration, s.Bursts = time.Minute, 1
	s.BurstMin, s.BurstMax = 3, 3
	tr := generate(t, s)
	var buf bytes.Buffer
	if err := tr.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"claim", "at_seconds", "lifetime_seconds", "burst"}, rows[0]); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if len(rows) != len(tr.Arrivals)+1 {
		t.Fatalf("%d rows, want %d arrivals and a header", len(rows), len(tr.Arrivals))
	}
	if rows[1][0] != "claim-000000" {
		t.Errorf("first claim %q, want claim-000000", rows[1][0])
	}
	bursts := 0
	for _, r := range rows[1:] {
		if r[3] == "1" {
			bursts++
		}
	}
	if bursts != 3 {
		t.Errorf("%d rows of burst 1, want 3", bursts)
	}
	if !strings.Contains(tr.String(), "seed 2") {
		t.Errorf("summary %q does not name the seed", tr.String())
	}
}

func TestShapeValidateRefusesWhatCannotBeGenerated(t *testing.T) {
	cases := map[string]func(*Shape){
		"too short":        func(s *Shape) { s.Duration = time.Second },
		"night above peak": func(s *Shape) { s.NightRate = 10 },
		"no peak":          func(s *Shape) { s.PeakRate = 0 },
		"noise above 1":    func(s *Shape) { s.Noise = 1.5 },
		"empty bursts":     func(s *Shape) { s.BurstMin = 0 },
		"lifetimes upside": func(s *Shape) { s.LifetimeMax = time.Second },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := day(1)
			mutate(&s)
			if _, err := Generate(s); err == nil {
				t.Error("Generate accepted it")
			}
		})
	}
}
