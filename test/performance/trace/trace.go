// Package trace is the demand of the trace scenario and the policies it is replayed against,
// without a cluster: a seeded day of claims compressed to minutes (Generate), the sizing of a
// static pool for its peak (Trace.StaticPool), and the public project's HPA recipe emulated
// (HPA, RateMetric). test/performance/load replays a Trace against a cluster; everything here
// is pure so that it can be tested against the documented behaviour, and a run repeated from
// its seed or its CSV.
package trace

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Phases of the compressed day, as fractions of Shape.Duration: night, the morning ramp, the
// day plateau, the evening decline, night again.
const (
	rampStart    = 0.15
	plateauStart = 0.35
	declineStart = 0.70
	nightAgain   = 0.90
	// noiseKnots is how many random knots the plateau's noise is interpolated between over the
	// whole day: at 8 minutes, one every 12 s, slow enough for an autoscaler to see and fast
	// enough that it must follow.
	noiseKnots = 40
	// burstsFrom and burstsTo bound where bursts fall, as fractions of the day: anywhere but
	// the first and last moments, night included (a burst is sudden).
	burstsFrom, burstsTo = 0.10, 0.90
)

// Shape is a day of demand compressed to Duration.
type Shape struct {
	Duration time.Duration
	// NightRate is claims a second at night; PeakRate the highest the day's rate reaches,
	// noise included. The plateau's base is PeakRate / (1 + Noise).
	NightRate, PeakRate float64
	// Noise is the relative amplitude of the plateau's noise, 0 to 1.
	Noise float64
	// Bursts are sudden batches of claims on top of the Poisson arrivals, each of BurstMin to
	// BurstMax claims spread evenly over BurstSpread.
	Bursts             int
	BurstMin, BurstMax int
	BurstSpread        time.Duration
	// LifetimeMin and LifetimeMax bound how long a claim is held once Ready, drawn uniformly.
	LifetimeMin, LifetimeMax time.Duration
	Seed                     uint64
}

// Validate reports the settings a trace cannot be generated from.
func (s Shape) Validate() error {
	var errs []error
	if s.Duration < 10*time.Second {
		errs = append(errs, fmt.Errorf("a trace lasts at least 10 s, not %s", s.Duration))
	}
	if s.NightRate < 0 || s.PeakRate <= 0 || s.NightRate > s.PeakRate {
		errs = append(errs, fmt.Errorf("rates: want 0 ≤ night (%g) ≤ peak (%g), peak > 0", s.NightRate, s.PeakRate))
	}
	if s.Noise < 0 || s.Noise > 1 {
		errs = append(errs, fmt.Errorf("noise %g: want 0 to 1", s.Noise))
	}
	if s.Bursts < 0 || (s.Bursts > 0 && (s.BurstMin < 1 || s.BurstMax < s.BurstMin)) {
		errs = append(errs, fmt.Errorf("bursts: want a count ≥ 0 and sizes 1 ≤ min (%d) ≤ max (%d)", s.BurstMin, s.BurstMax))
	}
	if s.BurstSpread < 0 {
		errs = append(errs, errors.New("a burst's spread must not be negative"))
	}
	if s.LifetimeMin < 0 || s.LifetimeMax < s.LifetimeMin {
		errs = append(errs, fmt.Errorf("lifetimes %s–%s: want 0 ≤ min ≤ max", s.LifetimeMin, s.LifetimeMax))
	}
	return errors.Join(errs...)
}

// Arrival is one claim of a trace.
type Arrival struct {
	// At is when the claim is created, from the start of the trace.
	At time.Duration
	// Lifetime is how long it is held once Ready before it is deleted.
	Lifetime time.Duration
	// Burst is the 1-based burst the claim belongs to; 0 for a Poisson arrival.
	Burst int
}

// Burst is one burst of a trace.
type Burst struct {
	At     time.Duration
	Claims int
}

// Trace is a generated day of demand: its arrivals in time order.
type Trace struct {
	Shape    Shape
	Arrivals []Arrival
	Bursts   []Burst
	// noise is the plateau's noise at its knots, in [-1, 1].
	noise []float64
}

// Stream constants of the generator's random sources: one per concern, so that changing the
// bursts leaves the Poisson arrivals as they were, and so on.
const (
	streamNoise    = 0x6e6f697365
	streamPoisson  = 0x706f6973
	streamBursts   = 0x6275727374
	streamLifetime = 0x6c696665
)

// Generate draws the trace of shape s: Poisson arrivals at the day's instantaneous rate
// (thinning a process at PeakRate), then the bursts, each arrival with its lifetime. The same
// shape gives the same trace.
func Generate(s Shape) (*Trace, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	t := &Trace{Shape: s, noise: make([]float64, noiseKnots+1)}
	noise := rand.New(rand.NewPCG(s.Seed, streamNoise))
	for i := range t.noise {
		t.noise[i] = 2*noise.Float64() - 1
	}
	// Lewis and Shedler's thinning: candidates at the highest rate, each kept with the
	// probability rate(t) / PeakRate, are a Poisson process of rate(t).
	poisson := rand.New(rand.NewPCG(s.Seed, streamPoisson))
	for at := 0.0; ; {
		at += poisson.ExpFloat64() / s.PeakRate
		d := time.Duration(at * float64(time.Second))
		if d >= s.Duration {
			break
		}
		if poisson.Float64()*s.PeakRate < t.Rate(d) {
			t.Arrivals = append(t.Arrivals, Arrival{At: d})
		}
	}
	bursts := rand.New(rand.NewPCG(s.Seed, streamBursts))
	slot := time.Duration(float64(s.Duration) * (burstsTo - burstsFrom) / float64(max(s.Bursts, 1)))
	for b := range s.Bursts {
		// One burst in the middle 60% of each of Bursts equal slots: apart, never back to back.
		at := time.Duration(float64(s.Duration)*burstsFrom) + time.Duration(b)*slot +
			time.Duration((0.2+0.6*bursts.Float64())*float64(slot))
		n := s.BurstMin + bursts.IntN(s.BurstMax-s.BurstMin+1)
		t.Bursts = append(t.Bursts, Burst{At: at, Claims: n})
		for i := range n {
			t.Arrivals = append(t.Arrivals, Arrival{At: at + time.Duration(i)*s.BurstSpread/time.Duration(n), Burst: b + 1})
		}
	}
	slices.SortStableFunc(t.Arrivals, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) })
	life := rand.New(rand.NewPCG(s.Seed, streamLifetime))
	for i := range t.Arrivals {
		t.Arrivals[i].Lifetime = s.LifetimeMin
		if span := s.LifetimeMax - s.LifetimeMin; span > 0 {
			t.Arrivals[i].Lifetime += time.Duration(life.Int64N(int64(span)))
		}
	}
	return t, nil
}

// Rate is the Poisson arrivals' rate at d, in claims a second: night, a smooth morning ramp,
// the noisy plateau, a smooth evening decline, night again. Bursts come on top.
func (t *Trace) Rate(d time.Duration) float64 {
	s := t.Shape
	f := float64(d) / float64(s.Duration)
	base := s.PeakRate / (1 + s.Noise)
	// smooth goes from a to b as x goes from 0 to 1, with a flat start and end.
	smooth := func(a, b, x float64) float64 { return a + (b-a)*(1-math.Cos(math.Pi*x))/2 }
	switch {
	case f < rampStart || f >= nightAgain:
		return s.NightRate
	case f < plateauStart:
		return smooth(s.NightRate, base, (f-rampStart)/(plateauStart-rampStart))
	case f < declineStart:
		return base * (1 + s.Noise*t.noiseAt(f))
	default:
		return smooth(base, s.NightRate, (f-declineStart)/(nightAgain-declineStart))
	}
}

// noiseAt interpolates the noise knots at f, the fraction of the day.
func (t *Trace) noiseAt(f float64) float64 {
	x := f * noiseKnots
	i := min(int(x), noiseKnots-1)
	return t.noise[i] + (t.noise[i+1]-t.noise[i])*(x-float64(i))
}

// ExpectedPoisson is the integral of Rate over the day: the Poisson arrivals' expected count.
func (t *Trace) ExpectedPoisson() float64 {
	const step = 10 * time.Millisecond
	sum := 0.0
	for d := step / 2; d < t.Shape.Duration; d += step {
		sum += t.Rate(d) * step.Seconds()
	}
	return sum
}

// PeakWindow returns the most claims that arrive within any span of w, and when that span
// starts.
func (t *Trace) PeakWindow(w time.Duration) (claims int, at time.Duration) {
	j := 0
	for i, a := range t.Arrivals {
		for j < len(t.Arrivals) && t.Arrivals[j].At < a.At+w {
			j++
		}
		if j-i > claims {
			claims, at = j-i, a.At
		}
	}
	return claims, at
}

// StaticPool is the size of a pool sized for the trace's peak: the most claims that arrive
// within one member start-up time (what a pool must hold when a member taken is replaced only
// that much later), plus headroom (0.25 is a quarter more), rounded up.
func (t *Trace) StaticPool(startup time.Duration, headroom float64) int32 {
	peak, _ := t.PeakWindow(startup)
	return int32(math.Ceil(float64(peak) * (1 + headroom)))
}

// MaxConcurrent is the most claims held at once if each is Ready extra after its creation
// and deleted its lifetime later: what the cluster must have room for besides the pool.
func (t *Trace) MaxConcurrent(extra time.Duration) int {
	type edge struct {
		at    time.Duration
		delta int
	}
	edges := make([]edge, 0, 2*len(t.Arrivals))
	for _, a := range t.Arrivals {
		edges = append(edges, edge{a.At, 1}, edge{a.At + extra + a.Lifetime, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		// An end before a start at the same moment.
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	held, most := 0, 0
	for _, e := range edges {
		held += e.delta
		most = max(most, held)
	}
	return most
}

// PerSecond counts the arrivals in each window of width from the start: the demand as a
// plot shows it.
func (t *Trace) PerSecond(width time.Duration) []float64 {
	n := int((t.Shape.Duration + width - 1) / width)
	out := make([]float64, n)
	for _, a := range t.Arrivals {
		out[min(int(a.At/width), n-1)]++
	}
	for i := range out {
		out[i] /= width.Seconds()
	}
	return out
}

// WriteCSV writes the arrivals, one a line (claim, at_seconds, lifetime_seconds, burst), so
// that a run can be checked against, or repeated from, exactly what was replayed.
func (t *Trace) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{"claim", "at_seconds", "lifetime_seconds", "burst"}}
	for i, a := range t.Arrivals {
		rows = append(rows, []string{ClaimName(i), strconv.FormatFloat(a.At.Seconds(), 'f', 3, 64),
			strconv.FormatFloat(a.Lifetime.Seconds(), 'f', 3, 64), strconv.Itoa(a.Burst)})
	}
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	return nil
}

// ClaimName is the name of the i-th claim of a trace.
func ClaimName(i int) string { return fmt.Sprintf("claim-%06d", i) }

// String summarizes the trace in one line.
func (t *Trace) String() string {
	s := t.Shape
	bursts := ""
	for i, b := range t.Bursts {
		if i > 0 {
			bursts += ", "
		}
		bursts += fmt.Sprintf("%d at %s", b.Claims, b.At.Round(time.Second))
	}
	if bursts == "" {
		bursts = "none"
	}
	return fmt.Sprintf("seed %d: %d claims over %s (night %g/s, peak %g/s, noise ±%.0f%%; bursts %s; lifetimes %s–%s)",
		s.Seed, len(t.Arrivals), s.Duration, s.NightRate, s.PeakRate, 100*s.Noise, bursts, s.LifetimeMin, s.LifetimeMax)
}
