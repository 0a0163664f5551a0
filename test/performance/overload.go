package performance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// The overload scenario (issue 37): what sandgate serves past the rate the cluster sustains.
// The floor is offered more than it can serve (--overload-probe-rate) and what it serves per
// second is the sustainable rate on this machine, measured in the same run; sandgate is then
// offered that rate and its multiples (--overload-multipliers), each on a fresh cluster, the
// arrivals open (a refused claim is counted, not retried, and no claim waiting for Ready slows
// the arrivals). The 1× arm is the reference of the served claims' p99.

// overloadSettings are the overload scenario's flags (AddOverloadFlags).
type overloadSettings struct {
	Multipliers string
	Duration    time.Duration
	ProbeRate   float64
	// Rate, when positive, is taken as the sustainable rate and the floor is not measured.
	Rate     float64
	Pool     int
	Lifetime string
	// Profile is how the clusters' pods become Ready (the floor's too): the shedding must
	// not take a slow pod's start-up for a backlog.
	Profile string
	// ContractFloor also measures the contract floor's sustainable rate (with the floor's).
	ContractFloor bool
}

// overloadFlags hold the scenario's flags. The defaults keep a run (seven clusters) within
// about fourteen minutes on two cores: 45 s of arrivals per cluster, claims held 2–10 s so that
// a run at four times the rate does not hold thousands of pods.
var overloadFlags = overloadSettings{Multipliers: "2,4", Duration: 45 * time.Second, ProbeRate: 40, Pool: 50, Lifetime: "2s-10s",
	Profile: string(controlplane.ProfileFast), ContractFloor: true}

// AddOverloadFlags registers the flags of the overload scenario on fs.
func AddOverloadFlags(fs *flag.FlagSet) {
	f := &overloadFlags
	fs.StringVar(&f.Multipliers, "overload-multipliers", f.Multipliers, "overload: the offered rates past the sustainable one, as multiples of it (comma-separated, each > 1); the 1× arm always runs, as the reference")
	fs.DurationVar(&f.Duration, "overload-duration", f.Duration, "overload: how long claims arrive, per cluster (at least 20s: goodput is counted after the first quarter)")
	fs.Float64Var(&f.ProbeRate, "overload-probe-rate", f.ProbeRate, "overload: claims a second offered to the floor to find the rate it sustains (more than it serves)")
	fs.Float64Var(&f.Rate, "overload-rate", f.Rate, "overload: take this as the sustainable rate instead of measuring the floor's (0 measures it)")
	fs.IntVar(&f.Pool, "overload-pool", f.Pool, "overload: the pool's size")
	fs.StringVar(&f.Lifetime, "overload-lifetime", f.Lifetime, "overload: range of a claim's lifetime from Ready to its deletion (min-max)")
	fs.StringVar(&f.Profile, "overload-profile", f.Profile, "overload: pod profile of the clusters, the floor's too ("+profileNames()+"; realistic draws start-ups from --pod-startup-*)")
	fs.BoolVar(&f.ContractFloor, "overload-contract-floor", f.ContractFloor, "overload: also measure the rate the contract floor sustains (the floor with the admission webhooks kept and answered at once by a stand-in process, and the route write after each bind), offered the probe rate, and report goodput ÷ it beside goodput ÷ the floor's; then the contract floor at each of --overload-multipliers, its stand-in admitting claims at the rate the contract floor sustained and refusing the rest with 429 (an oracle shedding at no cost of its own)")
}

// multipliers parses --overload-multipliers.
func (s overloadSettings) multipliers() ([]float64, error) {
	var out []float64
	for _, m := range strings.Split(s.Multipliers, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(m), 64)
		if err != nil || v <= 1 {
			return nil, fmt.Errorf("--overload-multipliers: %q is not a number above 1", strings.TrimSpace(m))
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("--overload-multipliers: %g twice", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// validate names every flag that cannot run.
func (s overloadSettings) validate() error {
	var errs []error
	if _, err := s.multipliers(); err != nil {
		errs = append(errs, err)
	}
	if s.Duration < 20*time.Second {
		errs = append(errs, fmt.Errorf("--overload-duration %s: want at least 20s", s.Duration))
	}
	if s.ProbeRate <= 0 {
		errs = append(errs, fmt.Errorf("--overload-probe-rate %g: want a positive rate", s.ProbeRate))
	}
	if s.Rate < 0 {
		errs = append(errs, fmt.Errorf("--overload-rate %g: want 0 (measure the floor) or a positive rate", s.Rate))
	}
	if s.Pool < 1 {
		errs = append(errs, fmt.Errorf("--overload-pool %d: want at least 1", s.Pool))
	}
	if !slices.Contains(controlplane.Profiles, controlplane.Profile(s.Profile)) {
		errs = append(errs, fmt.Errorf("--overload-profile %q: want one of %s", s.Profile, profileNames()))
	}
	if _, _, err := load.ParseLifetime(s.Lifetime); err != nil {
		errs = append(errs, fmt.Errorf("--overload-lifetime: %w", err))
	}
	return errors.Join(errs...)
}

// describe says the run's shape, for the report.
func (s overloadSettings) describe() string {
	return fmt.Sprintf("pods %s; a pool of %d; %s of arrivals per cluster, each claim held %s once Ready; the floor offered %g claims/s; sandgate at 1× and %s× the sustainable rate",
		s.Profile, s.Pool, s.Duration, s.Lifetime, s.ProbeRate, strings.ReplaceAll(s.Multipliers, ",", "×, "))
}

// config is one arm's load at rate; floor runs the floor. With --apiserver-profile each arm
// profiles the whole of its arrivals into its own files, <file>.<arm> (floor, 1x, 2x, ...).
func (s overloadSettings) config(o Options, arm string, rate float64, floor bool) load.SustainedConfig {
	lo, hi, _ := load.ParseLifetime(s.Lifetime) // validated
	cfg := load.SustainedConfig{
		Namespace: "bench", PodSpec: load.DefaultPodSpec(), PoolSize: int32(s.Pool), Rate: rate, Duration: s.Duration,
		LifetimeMin: lo, LifetimeMax: hi, Seed: 1, Floor: floor, Open: !floor,
		// Sixty-four replacements at once held the floor to 7 claims/s on two loaded cores
		// while sandgate served 25: each waits seconds for its pod, so the bound was the load
		// generator's. Ten seconds' worth of them leaves the API server as the bound.
		RefillWorkers:  int(10 * rate),
		PoolCreateWait: max(o.PoolCreateWait, time.Duration(s.Pool)*200*time.Millisecond),
		// The drain after the last arrival: what a cluster has not served by then is lost
		// to its clients; waiting minutes more for a backlog would only measure the backlog.
		Timeout: max(30*time.Second, s.Duration),
	}
	cfg.APIServerProfile, cfg.WebhookServerProfile, cfg.ProfileSeconds = o.armProfiles(arm, s.Duration)
	if floor {
		cfg.WebhookServerProfile = "" // no process of sandgate's answers the floors' webhooks
	}
	return cfg
}

// runOverload measures the floor's sustainable rate (and the contract floor's), then sandgate
// at 1× and, at each multiple, the oracle (the contract floor shedding) and sandgate in turn,
// each on a fresh cluster.
func runOverload(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	s := overloadFlags
	if err := s.validate(); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	mults, _ := s.multipliers() // validated
	o.Profile = controlplane.Profile(s.Profile)
	if o.Profile != controlplane.ProfileRealistic {
		o.PodStartup = controlplane.PodStartup{}
	}
	res := &report.Result{Scenario: sc.name, Description: sc.description, StartedAt: time.Now(), RefillSeconds: -1,
		Overload: &report.Overload{Settings: s.describe(), SustainableRate: s.Rate}}
	warmUp, arrivals := s.Duration.Seconds()/4, s.Duration.Seconds()
	var failed []string
	if s.Rate == 0 {
		logf(stderr, "\n=== scenario %s: the floor offered %g claims/s, to find the rate it sustains\n", sc.name, s.ProbeRate)
		f, err := runSustainedOnce(ctx, o, s.config(o, "floor", s.ProbeRate, true), stderr)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, err
			}
			return nil, append(failed, fmt.Sprintf("%s (floor): %v", sc.name, err)), nil
		}
		arm := report.OverloadArmOf("floor", 0, f, warmUp, arrivals)
		res.Overload.Arms = append(res.Overload.Arms, arm)
		res.Overload.SustainableRate, res.Overload.Measured = arm.Goodput, true
		res.Parameters = f.Parameters
		if arm.Goodput <= 0 {
			return nil, append(failed, fmt.Sprintf("%s (floor): served nothing after the warm-up", sc.name)), nil
		}
		logf(stderr, "the floor sustains %.1f claims/s\n", arm.Goodput)
		if s.ContractFloor {
			logf(stderr, "\n=== scenario %s: the contract floor offered %g claims/s, to find the rate it sustains\n", sc.name, s.ProbeRate)
			carm, err := s.runContractFloor(ctx, o, 0, s.ProbeRate, 0, warmUp, arrivals, stderr)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil, nil, err
			case err != nil:
				failed = append(failed, fmt.Sprintf("%s (contract floor): %v", sc.name, err))
			default:
				res.Overload.ContractRate = carm.Goodput
				logf(stderr, "the contract floor sustains %.1f claims/s\n", carm.Goodput)
			}
			res.Overload.Arms = append(res.Overload.Arms, carm)
		}
	}
	for _, m := range append([]float64{1}, mults...) {
		rate := round1(m * res.Overload.SustainableRate)
		if m > 1 && res.Overload.ContractRate > 0 { // measured above, with the floor
			// Past the sustainable rate, the design's limit: an oracle that knows the
			// capacity (the rate the contract floor sustained) sheds at no cost of its own,
			// each refusal paying only what any refusal costs (a create decoded, a webhook
			// round trip, a 429). The sandgate arm at m is read against it, and runs right
			// after it: on a shared machine whose speed drifts by a fifth within minutes,
			// two arms minutes apart would compare the machine as much as the operators.
			logf(stderr, "\n=== scenario %s: the contract floor at %g× the sustainable rate, %g claims/s, its stand-in admitting %.1f claims/s\n",
				sc.name, m, rate, res.Overload.ContractRate)
			arm, err := s.runContractFloor(ctx, o, m, rate, res.Overload.ContractRate, warmUp, arrivals, stderr)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, err
				}
				failed = append(failed, fmt.Sprintf("%s (contract floor %g×): %v", sc.name, m, err))
			}
			res.Overload.Arms = append(res.Overload.Arms, arm)
		}
		logf(stderr, "\n=== scenario %s: sandgate at %g× the sustainable rate, %g claims/s\n", sc.name, m, rate)
		r, err := runSustainedOnce(ctx, o, s.config(o, fmt.Sprintf("%gx", m), rate, false), stderr)
		var arm report.OverloadArm
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, err
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s (%g×): %v", sc.name, m, err))
			arm = report.OverloadArm{Arm: "sandgate", Multiplier: m, Rate: rate, Error: firstLine(err.Error())}
		default:
			arm = report.OverloadArmOf("sandgate", m, r, warmUp, arrivals)
			if res.Parameters.OperatorCommand == "" || r.Parameters.OperatorCommand != "" {
				res.Parameters = r.Parameters
			}
			if arm.Lost > 0 || arm.BoundTwice > 0 || arm.CreateErrors > 0 {
				failed = append(failed, fmt.Sprintf("%s (%g×): %d lost, %d bound twice, %d create errors", sc.name, m, arm.Lost, arm.BoundTwice, arm.CreateErrors))
				for _, e := range r.Errors {
					logf(stderr, "  %s\n", e)
				}
			}
			if r.Sustained != nil && r.Sustained.NamesDrawnAgain > 0 {
				logf(stderr, "%d Sandbox names drawn again for a later Sandbox (%g×)\n", r.Sustained.NamesDrawnAgain, m)
			}
		}
		res.Overload.Arms = append(res.Overload.Arms, arm)
	}
	res.Overload.SetRatios()
	res.LoadAverage = 0 // each arm says its own
	if err := report.WriteOverloadText(stdout, res); err != nil {
		return nil, nil, err
	}
	return res, failed, nil
}

// runContractFloor runs the contract floor (the floor with sandgate's webhook configurations
// kept and answered at once by the stand-in, and the route write after each bind) offered
// rate; m is the arm's multiple of the sustainable rate, 0 for the probe. With admitRate > 0
// the stand-in admits claim creates at that rate and refuses the rest with 429, and the
// arrivals are open, as sandgate's arms are.
func (s overloadSettings) runContractFloor(ctx context.Context, o Options, m, rate, admitRate, warmUp, arrivals float64, stderr io.Writer) (report.OverloadArm, error) {
	co := o
	co.Floor, co.FloorAdmission, co.FloorClaimRate = true, true, admitRate
	name := "contract-floor"
	if m > 0 {
		name = fmt.Sprintf("contract-floor-%gx", m)
	}
	cfg := s.config(co, name, rate, true)
	cfg.FloorRoute, cfg.Open = true, admitRate > 0
	r, err := runSustainedOnce(ctx, co, cfg, stderr)
	if err != nil {
		return report.OverloadArm{Arm: report.OverloadContractFloor, Multiplier: m, Rate: rate, Error: firstLine(err.Error())}, err
	}
	return report.OverloadArmOf(report.OverloadContractFloor, m, r, warmUp, arrivals), nil
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
