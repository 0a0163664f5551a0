package performance

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// The fair-share scenario (issue 36): two tenants on one pool, tenant A steady at a moderate
// rate, tenant B bursting to several times the pool, in three arms of one run, each on a fresh
// cluster: A alone; A and B without a ClaimPolicy; A and B with one that reserves A a warm
// share of the pool and limits B's claims. What it shows: how far A falls without the policy,
// whether A keeps its warm claims and its latency with it, and how quickly B's claims beyond
// its limit are refused.

// fairShareSettings are the fair-share scenario's flags (AddFairShareFlags).
type fairShareSettings struct {
	Pool     int
	Duration time.Duration
	ARate    float64
	AHold    time.Duration
	// BBurst 0 is three times the pool.
	BBursts, BBurst int
	BRate           float64
	BHold           time.Duration
	// AGuaranteed 0 is what A holds at its rate (ARate × AHold) and what it claims while the
	// pool starts a replacement (ARate × a member's start-up, Startup; at least half as much
	// again as it holds), within the pool: the sizing docs/fair-share.md gives. BMax 0 is half
	// the pool, negative none (B limited by its admission rate only: no ledger).
	AGuaranteed, BMax int
	// Startup is the pods' start-up time to plan A's guarantee with: the profile's p99 (0 on
	// a profile whose pods start at once).
	Startup time.Duration
	// BWarmMax is the most warm members B may hold; negative leaves it unset.
	BWarmMax int
	// ControlEvery is how many of B's creates the policy arm sends a control create beside
	// (one in ControlEvery; 0: none).
	ControlEvery int
	// BAdmissionRate is B's admission rate in the policy arm, claims a minute (0: none;
	// negative: A's rate, an equal share of the API server's time), in a bucket of
	// BAdmissionBurst (0: the policy's default, a second's worth).
	BAdmissionRate, BAdmissionBurst int
	Arms                            string
	Profile                         string
}

// fairShareFlags hold the scenario's flags. The defaults keep a run (three clusters) within
// ten minutes on two cores: A at 5 claims a second held 5 s, about 25 at once, in a pool of
// 100; B two bursts of 300 at 50 a second, each claim held 15 s. The pool serves A alone
// warm: its refill waits for claims to pause up to --pool-refill-max-deferral (10 s), and A
// takes 50 members in that time; a pool of 50 served A alone 97% warm, so the run measured
// the pool as much as what B does to A.
var fairShareFlags = fairShareSettings{
	Pool: 100, Duration: 60 * time.Second, ARate: 5, AHold: 5 * time.Second,
	BBursts: 2, BRate: 50, BWarmMax: -1, BHold: 15 * time.Second, BAdmissionRate: -1, ControlEvery: 10,
	Arms: strings.Join(report.FairShareArms, ","), Profile: string(controlplane.ProfileRealistic),
}

// AddFairShareFlags registers the flags of the fair-share scenario on fs.
func AddFairShareFlags(fs *flag.FlagSet) {
	f := &fairShareFlags
	fs.IntVar(&f.Pool, "fair-share-pool", f.Pool, "fair-share: the pool's size")
	fs.DurationVar(&f.Duration, "fair-share-duration", f.Duration, "fair-share: how long tenant A creates claims, per arm (B's bursts come in its middle half)")
	fs.Float64Var(&f.ARate, "fair-share-a-rate", f.ARate, "fair-share: tenant A's claims a second")
	fs.DurationVar(&f.AHold, "fair-share-a-hold", f.AHold, "fair-share: how long tenant A holds a claim once Ready before deleting it")
	fs.IntVar(&f.BBursts, "fair-share-b-bursts", f.BBursts, "fair-share: tenant B's bursts")
	fs.IntVar(&f.BBurst, "fair-share-b-burst", f.BBurst, "fair-share: claims in one of B's bursts (0: three times the pool)")
	fs.Float64Var(&f.BRate, "fair-share-b-rate", f.BRate, "fair-share: tenant B's claims a second within a burst")
	fs.DurationVar(&f.BHold, "fair-share-b-hold", f.BHold, "fair-share: how long tenant B holds an admitted claim once Ready before deleting it")
	fs.IntVar(&f.AGuaranteed, "fair-share-a-guaranteed", f.AGuaranteed, "fair-share: the policy arm's warm members guaranteed to A (0: A's rate × (hold + the pods' p99 start-up, at least half the hold), within the pool)")
	fs.IntVar(&f.BMax, "fair-share-b-max", f.BMax, "fair-share: the policy arm's limit on B's claims (0: half the pool; negative: none, B limited by its admission rate only, which keeps no ledger)")
	fs.IntVar(&f.BWarmMax, "fair-share-b-warm-max", f.BWarmMax, "fair-share: the policy arm's warm share of the pool B may hold at most, its claims beyond it served cold (negative: no maximum)")
	fs.IntVar(&f.BAdmissionRate, "fair-share-b-admission-rate", f.BAdmissionRate, "fair-share: the policy arm's admission rate of B's claims, a minute (0: none; negative: A's rate)")
	fs.IntVar(&f.BAdmissionBurst, "fair-share-b-admission-burst", f.BAdmissionBurst, "fair-share: the bucket of B's admission rate (0: a second's worth)")
	fs.IntVar(&f.ControlEvery, "fair-share-control-every", f.ControlEvery, "fair-share: the policy arm sends a control create (refused by authorization) beside one in this many of B's creates, to time the API server's own refusal at the same moments (0: none; 1: beside each, which adds that load to A's)")
	fs.StringVar(&f.Arms, "fair-share-arms", f.Arms, "fair-share: the arms to run, in order, each on a fresh cluster: "+strings.Join(report.FairShareKnownArms, ", ")+" (forbidden: B's creates refused by authorization, before any admission)")
	fs.StringVar(&f.Profile, "fair-share-profile", f.Profile, "fair-share: pod profile of the clusters ("+profileNames()+")")
}

// arms lists --fair-share-arms.
func (s fairShareSettings) arms() ([]string, error) {
	var out []string
	for _, a := range strings.Split(s.Arms, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(report.FairShareKnownArms, a) {
			return nil, fmt.Errorf("--fair-share-arms: unknown arm %q (want %s)", a, strings.Join(report.FairShareKnownArms, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// validate names every flag that cannot run.
func (s fairShareSettings) validate() error {
	var errs []error
	if _, err := s.arms(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(controlplane.Profiles, controlplane.Profile(s.Profile)) {
		errs = append(errs, fmt.Errorf("--fair-share-profile %q: want one of %s", s.Profile, profileNames()))
	}
	if s.Pool < 1 {
		errs = append(errs, fmt.Errorf("--fair-share-pool %d: want at least 1", s.Pool))
	}
	if s.Duration < time.Second {
		errs = append(errs, fmt.Errorf("--fair-share-duration %s: want at least 1s", s.Duration))
	}
	if s.ARate <= 0 || s.BRate <= 0 {
		errs = append(errs, fmt.Errorf("--fair-share-a-rate %g, --fair-share-b-rate %g: want both positive", s.ARate, s.BRate))
	}
	if s.AHold < 0 || s.BHold < 0 || s.BBursts < 0 || s.BBurst < 0 || s.AGuaranteed < 0 || s.BAdmissionBurst < 0 || s.ControlEvery < 0 {
		errs = append(errs, errors.New("--fair-share-a-hold, -b-hold, -b-bursts, -b-burst, -a-guaranteed, -b-admission-burst and -control-every: want none negative"))
	}
	if s.AGuaranteed > s.Pool {
		errs = append(errs, fmt.Errorf("--fair-share-a-guaranteed %d: want at most the pool (%d)", s.AGuaranteed, s.Pool))
	}
	return errors.Join(errs...)
}

// burst is the size of one of B's bursts.
func (s fairShareSettings) burst() int {
	if s.BBurst > 0 {
		return s.BBurst
	}
	return 3 * s.Pool
}

// policy is the policy arm's ClaimPolicy.
func (s fairShareSettings) policy() load.FairSharePolicy {
	g, m := s.AGuaranteed, s.BMax
	if g == 0 {
		runway := max(s.Startup, s.AHold/2)
		g = min(int(math.Ceil(s.ARate*(s.AHold+runway).Seconds())), s.Pool)
	}
	switch {
	case m == 0:
		m = max(s.Pool/2, 1)
	case m < 0:
		m = 0
	}
	rate := s.BAdmissionRate
	if rate < 0 {
		rate = max(int(math.Round(s.ARate*60)), 1)
	}
	p := load.FairSharePolicy{AGuaranteed: int32(g), BMaxClaims: int32(m), BRatePerMinute: int32(rate), BRateBurst: int32(s.BAdmissionBurst)}
	if s.BWarmMax >= 0 {
		p.BWarmMax = ptr.To(int32(s.BWarmMax))
	}
	return p
}

// describe says the run's load and policy, for the report.
func (s fairShareSettings) describe() string {
	p := s.policy()
	out := fmt.Sprintf("a pool of %d; A %g claims/s for %s, each held %s; B %d bursts of %d at %g/s, each held %s; policy: A guaranteed %d warm members",
		s.Pool, s.ARate, s.Duration, s.AHold, s.BBursts, s.burst(), s.BRate, s.BHold, p.AGuaranteed)
	if p.BMaxClaims > 0 {
		out += fmt.Sprintf(", B at most %d claims", p.BMaxClaims)
	} else {
		out += ", B no limit on claims"
	}
	if p.BWarmMax != nil {
		out += fmt.Sprintf(" and %d warm members (the rest served cold)", *p.BWarmMax)
	}
	if p.BRatePerMinute > 0 {
		out += fmt.Sprintf(", admitted at most %d a minute", p.BRatePerMinute)
		if p.BRateBurst > 0 {
			out += fmt.Sprintf(" (%d at once)", p.BRateBurst)
		}
	}
	return out
}

// config is the load of one arm.
func (s fairShareSettings) config(arm string, o Options) load.FairShareConfig {
	cfg := load.FairShareConfig{
		Namespace: "bench", PodSpec: load.DefaultPodSpec(), PoolSize: int32(s.Pool),
		Duration: s.Duration, ARate: s.ARate, AHold: s.AHold,
		BBursts: s.BBursts, BBurst: s.burst(), BRate: s.BRate, BHold: s.BHold,
		ControlEvery:   s.ControlEvery,
		PoolCreateWait: max(o.PoolCreateWait, time.Duration(s.Pool)*200*time.Millisecond), Timeout: max(o.Timeout, 5*time.Minute),
	}
	// At least the whole load: B's first burst comes a quarter into it, past the flag's
	// default of 10 s.
	cfg.APIServerProfile, cfg.WebhookServerProfile, cfg.ProfileSeconds = o.armProfiles(arm, s.Duration)
	if arm == report.ArmAlone || arm == report.ArmFloorAlone {
		cfg.BBursts = 0
	}
	if arm == report.ArmPolicy || arm == report.ArmFloorPolicy {
		p := s.policy()
		cfg.Policy = &p
	}
	cfg.BForbidden = arm == report.ArmForbidden
	if report.IsFloorArm(arm) {
		// Both floor arms get the pool the floor-policy arm needs, so that they differ only
		// in B.
		p, withB := s.policy(), cfg
		withB.BBursts, withB.Policy = s.BBursts, &p
		cfg.Floor, cfg.PoolSize = true, max(cfg.PoolSize, load.FloorPoolSize(withB))
		cfg.PoolCreateWait = max(cfg.PoolCreateWait, time.Duration(cfg.PoolSize)*200*time.Millisecond)
	}
	return cfg
}

// runFairShare runs the arms of --fair-share-arms, each on a fresh cluster.
func runFairShare(ctx context.Context, o Options, sc scenario, stdout, stderr io.Writer) (*report.Result, []string, error) {
	s := fairShareFlags
	if err := s.validate(); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", sc.name, err)}, nil
	}
	if controlplane.Profile(s.Profile) == controlplane.ProfileRealistic {
		s.Startup = cmp.Or(o.PodStartup.P99, controlplane.DefaultPodStartupP99)
	}
	arms, _ := s.arms() // validated
	res := &report.Result{Scenario: sc.name, Description: sc.description, StartedAt: time.Now(), RefillSeconds: -1,
		FairShare: &report.FairShare{Settings: s.describe()}}
	var failed []string
	for i, arm := range arms {
		logf(stderr, "\n=== scenario %s, arm %d/%d: %s\n", sc.name, i+1, len(arms), arm)
		cfg := s.config(arm, o)
		cfg.Progress = stderr
		fig, err := runFairShareArm(ctx, o, cfg, arm, &res.Parameters, stderr)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, err
		case err != nil:
			logf(stderr, "arm %s of scenario %s failed: %v\n", arm, sc.name, err)
			failed = append(failed, fmt.Sprintf("%s (%s): %v", sc.name, arm, err))
			fig = &report.ShareArm{Arm: arm, Error: firstLine(err.Error())}
		case fig.AReady < fig.ACreated:
			failed = append(failed, fmt.Sprintf("%s (%s): %d of tenant A's claims never Ready", sc.name, arm, fig.ACreated-fig.AReady))
		}
		res.FairShare.Arms = append(res.FairShare.Arms, *fig)
	}
	res.FairShare.SetRatios()
	if err := report.WriteFairShareText(stdout, res); err != nil {
		return nil, nil, err
	}
	return res, failed, nil
}

// runFairShareArm starts a fresh local cluster with the operator on the scenario's profile,
// runs cfg and stops the cluster; params gets where it ran.
func runFairShareArm(ctx context.Context, o Options, cfg load.FairShareConfig, arm string, params *report.Parameters, progress io.Writer) (_ *report.ShareArm, retErr error) {
	o.Profile = controlplane.Profile(fairShareFlags.Profile)
	o.Floor, o.FloorAdmission = cfg.Floor, cfg.Floor
	if o.Profile != controlplane.ProfileRealistic {
		o.PodStartup = controlplane.PodStartup{}
	}
	env, err := startEnv(ctx, o, controlplane.DefaultNodes, progress)
	if err != nil {
		return nil, err
	}
	defer stopEnv(env, progress, &retErr)
	if env.Cluster == nil || env.Operator == nil || !env.Webhooks {
		return nil, errors.New("a fair-share run needs the operator and its webhooks in the local cluster")
	}
	p := report.Parameters{Namespace: cfg.Namespace, Template: "built-in", TimeoutSeconds: cfg.Timeout.Seconds(),
		WarmPoolSize: cfg.PoolSize, QPS: cfg.ARate, OperatorCommand: env.Operator.Template}
	describeCluster(&p, env, o)
	*params = p
	var probes load.Probes
	switch {
	case cfg.Floor:
		probes.DetachOperator = env.DetachOperator
		standInProbes(env, &probes)
	case env.Operator.MetricsURL != "":
		probes.OperatorMetrics = env.Operator.Metrics
	}
	probes.ProfileWebhookServer = env.ProfileWebhookServer
	fig, err := load.RunFairShare(ctx, env.Config, cfg, probes, arm)
	switch {
	case meta.IsNoMatchError(err):
		return nil, err // the kind is not served: nothing in the operator's log to add
	case err != nil:
		return nil, fmt.Errorf("%w\n(operator log %s ends:\n%s)", err, env.Operator.LogPath, harness.Tail(env.Operator.LogPath, 15))
	}
	return fig, nil
}
