package report

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The figures of a sustained run: claims arriving at a steady rate for minutes, each deleted
// after a random lifetime, the pool refilling while they arrive. What a burst cannot show is
// whether the refill keeps up with traffic that never pauses (a pool whose refill waits for a
// quiet period that never comes runs dry), and whether latency drifts over time.

// WindowSeconds is the width of a sustained run's latency windows.
const WindowSeconds = 10

// RefillGraceSeconds is how long after the first claim a sustained run's pool may be empty
// without failing RefillKeptUp: the first replacements are started only once members are
// taken, and a member takes its start-up time to be ready.
const RefillGraceSeconds = 10

// Sustained is what a sustained run measured beyond the figures every run has.
type Sustained struct {
	// Rate is claims created per second, for DurationSeconds.
	Rate            float64 `json:"rate"`
	DurationSeconds float64 `json:"durationSeconds"`
	// StoppedBehindSeconds is when the arrivals ended early because they had fallen behind
	// Rate (load.SustainedConfig.StopBehind): the cluster did not carry the rate on this
	// machine. 0 when they ran for DurationSeconds.
	StoppedBehindSeconds float64 `json:"stoppedBehindSeconds,omitempty"`
	// AchievedRate is claims created per second from the first create to the last: below
	// Rate when claims waiting for Ready held every slot of the load generator.
	AchievedRate float64 `json:"achievedRate"`
	// LifetimeMinSeconds and LifetimeMaxSeconds bound each claim's lifetime, drawn uniformly
	// with Seed, from its Ready to its deletion.
	LifetimeMinSeconds float64 `json:"lifetimeMinSeconds"`
	LifetimeMaxSeconds float64 `json:"lifetimeMaxSeconds"`
	Seed               uint64  `json:"seed"`
	// WarmShare is the share of Ready claims bound to a pool member that was ready when the
	// claim needed it (launch-type warm; in the floor, a member the claim did not wait for).
	WarmShare float64 `json:"warmShare"`
	// ClaimsDeleted are claims deleted at the end of their lifetime; DeleteErrors the
	// deletions that failed.
	ClaimsDeleted int `json:"claimsDeleted"`
	DeleteErrors  int `json:"deleteErrors"`
	// Refused are creates refused with 429 (an open run's, load.SustainedConfig.Open: not
	// retried), RetryAfterSeconds the longest retry delay they suggested; BoundTwice the
	// Sandboxes two Ready claims named at the same time, or bound to one claim and later to
	// another (0 expected). NamesDrawnAgain counts the Sandbox names two Sandboxes (two UIDs)
	// carried one after the other: a pool member's random name drawn again once the first
	// was deleted, which two claims naming one name one after the other are.
	Refused           int   `json:"refused,omitempty"`
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
	BoundTwice        int   `json:"boundTwice,omitempty"`
	NamesDrawnAgain   int   `json:"namesDrawnAgain,omitempty"`
	// Refilled are the replacement members the load generator made itself (floor only).
	Refilled int `json:"refilled,omitempty"`
	// Pool is the pool sampled every second from the claims' first create: its unbound
	// members and how many of them are Ready.
	Pool []PoolPoint `json:"pool"`
	// Windows are the claims by their create time in windows of WindowSeconds.
	Windows []Window `json:"windows"`
	// MinReady is the fewest ready members seen after RefillGraceSeconds, until the last
	// create; DrySeconds how many of the samples of that span saw none.
	MinReady   int32 `json:"minReady"`
	DrySeconds int   `json:"drySeconds"`
	// RefillKeptUp: after RefillGraceSeconds and until the last create, the pool never
	// showed zero ready members (RefillKeptUp of Pool).
	RefillKeptUp bool `json:"refillKeptUp"`
}

// PoolPoint is the pool at one moment.
type PoolPoint struct {
	AtSeconds float64 `json:"at"`
	Ready     int32   `json:"ready"`
	Members   int32   `json:"members"`
}

// Window is the claims created in one window of a sustained run.
type Window struct {
	// AtSeconds is the window's start, in seconds after the first create.
	AtSeconds float64 `json:"at"`
	Claims    int     `json:"claims"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
	WarmShare float64 `json:"warmShare"`
}

// Windows groups samples by their create time into windows of width seconds, from 0 to the
// last sample; a window without samples is kept, with zero claims, so that a stall shows.
func Windows(samples []Sample, width float64) []Window {
	if len(samples) == 0 || width <= 0 {
		return nil
	}
	var last float64
	for _, s := range samples {
		last = max(last, s.AtSeconds)
	}
	n := int(last/width) + 1
	lat := make([][]time.Duration, n)
	warm := make([]int, n)
	for _, s := range samples {
		i := int(max(s.AtSeconds, 0) / width)
		lat[i] = append(lat[i], time.Duration(s.Ms*float64(time.Millisecond)))
		if s.Warm {
			warm[i]++
		}
	}
	out := make([]Window, n)
	for i := range out {
		sum := stats.Summarize(lat[i])
		out[i] = Window{AtSeconds: float64(i) * width, Claims: sum.Count, P50Ms: sum.P50, P99Ms: sum.P99}
		if sum.Count > 0 {
			out[i].WarmShare = roundShare(float64(warm[i]) / float64(sum.Count))
		}
	}
	return out
}

// WarmShare is the share of samples that were warm; 0 without samples.
func WarmShare(samples []Sample) float64 {
	if len(samples) == 0 {
		return 0
	}
	warm := 0
	for _, s := range samples {
		if s.Warm {
			warm++
		}
	}
	return roundShare(float64(warm) / float64(len(samples)))
}

// ReadyWarmShare is WarmShare less the claims served from a member still starting
// (starting < 0: unknown, none taken off).
func ReadyWarmShare(samples []Sample, starting int) float64 {
	if len(samples) == 0 {
		return 0
	}
	share := WarmShare(samples) - float64(max(0, starting))/float64(len(samples))
	return roundShare(max(0, share))
}

// RefillKeptUp reports whether the pool, sampled in pool, kept at least one ready member
// from grace seconds to until seconds, with the fewest ready members and the number of
// samples without any in that span. Without samples in the span it did not keep up: nothing
// shows it did.
func RefillKeptUp(pool []PoolPoint, grace, until float64) (ok bool, minReady int32, dry int) {
	seen := false
	minReady = math.MaxInt32
	for _, p := range pool {
		if p.AtSeconds < grace || p.AtSeconds > until {
			continue
		}
		seen = true
		minReady = min(minReady, p.Ready)
		if p.Ready == 0 {
			dry++
		}
	}
	if !seen {
		return false, 0, 0
	}
	return dry == 0, minReady, dry
}

func roundShare(v float64) float64 { return math.Round(v*10000) / 10000 }

// WriteSustainedText prints the sustained figures of r and, when measured, its floor's: the
// lines WriteText does not have.
func WriteSustainedText(w io.Writer, r *Result) error {
	s := r.Sustained
	if s == nil {
		return nil
	}
	var err error
	pf := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	pf("\nsustained: %g claims/s for %.0f s, lifetimes %g–%g s (seed %d), pool %d\n",
		s.Rate, s.DurationSeconds, s.LifetimeMinSeconds, s.LifetimeMaxSeconds, s.Seed, r.Parameters.WarmPoolSize)
	for _, x := range []struct {
		name string
		r    *Result
	}{{"floor", r.Floor}, {"sandgate", r}} {
		if x.r != nil && x.r.Sustained != nil && x.r.Sustained.StoppedBehindSeconds > 0 {
			pf("  the %s's arrivals ended after %.0f s: they had fallen behind the rate\n", x.name, x.r.Sustained.StoppedBehindSeconds)
		}
	}
	if r.Floor != nil && r.Floor.Sustained != nil {
		pf("  achieved rate: floor %.1f/s, sandgate %.1f/s\n", r.Floor.Sustained.AchievedRate, s.AchievedRate)
	} else {
		pf("  achieved rate: %.1f/s\n", s.AchievedRate)
	}
	line := func(name string, x *Result) {
		y := x.Sustained
		if y == nil {
			return
		}
		pf("  %-9s warm %.2f%%, p50 %.1f ms, p99 %.1f ms, kube-apiserver CPU %s s, ready members min %d (%d s dry), refill kept up %v, deleted %d (%d errors)",
			name, 100*y.WarmShare, x.Latency.Client.P50, x.Latency.Client.P99, cpu(x.API.ClaimsCPUSeconds), y.MinReady, y.DrySeconds, y.RefillKeptUp, y.ClaimsDeleted, y.DeleteErrors)
		if y.Refilled > 0 {
			pf(", %d members refilled by the load generator", y.Refilled)
		}
		pf("\n")
	}
	if r.Floor != nil {
		line("floor", r.Floor)
	}
	line("sandgate", r)
	if r.Floor != nil {
		q := r.Ratios()
		pf("  sandgate ÷ floor: p50 %.2f, p99 %.2f, kube-apiserver CPU %.2f\n", q.P50, q.P99, q.CPU)
	}
	pf("  %6s %7s %9s %9s %6s %13s\n", "at (s)", "claims", "p50 (ms)", "p99 (ms)", "warm", "pool ready")
	for _, win := range s.Windows {
		ready := "-"
		for _, p := range s.Pool {
			if p.AtSeconds >= win.AtSeconds+WindowSeconds {
				break
			}
			if p.AtSeconds >= win.AtSeconds {
				ready = fmt.Sprintf("%d", p.Ready) // the window's last sample
			}
		}
		pf("  %6.0f %7d %9.1f %9.1f %5.1f%% %13s\n", win.AtSeconds, win.Claims, win.P50Ms, win.P99Ms, 100*win.WarmShare, ready)
	}
	if err != nil {
		return fmt.Errorf("printing the sustained figures: %w", err)
	}
	return nil
}
