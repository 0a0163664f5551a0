// Package soak runs sandgate as a cluster runs it, two replicas with leader election behind
// one webhook address, under a steady claim load, while it injects the faults clusters really
// have (the leader killed or frozen past its Lease, the API server restarted, the webhook
// unreachable or its certificate renewed, a slow API, a pool deleted and recreated, a template
// changed under pending claims, a replica restarted during a rollout, a Sandbox's pod lost),
// and then proves with package check, from the API server's audit log and what is left, that
// nothing was lost, leaked, bound twice or written by a stale leader (issue 25).
//
// Everything runs on a local control plane and talks to 127.0.0.1 only; a run is bounded in
// claims and time and stops by itself. test/cmd/sandgate-soak (`make soak`) runs the long version,
// the integration test in this package the short one.
package soak

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// leaseNamespace holds the replicas' leader election Lease.
const leaseNamespace = "default"

// leaseDuration is the replicas' Lease duration (their default): a frozen leader loses the
// Lease after it.
const leaseDuration = operator.DefaultLeaderElectionLeaseDuration

// Options configure Run.
type Options struct {
	// Rate is how many claims a second the load generator creates, for Duration.
	Rate     float64
	Duration time.Duration
	// Seed decides which namespace each claim goes to, its lifetime, and the order, spacing
	// and lengths of the faults: two runs with one seed inject the same schedule.
	Seed int64
	// Namespaces each get a template and a pool of PoolSize members.
	Namespaces int
	PoolSize   int32
	// LifetimeMin and LifetimeMax bound a claim's life, from its creation to its deletion (a
	// claim not Ready by then is deleted once Ready, or when ReadyTimeout passes).
	LifetimeMin, LifetimeMax time.Duration
	// ReadyTimeout is how long a claim may take to become Ready before it counts as not
	// served.
	ReadyTimeout time.Duration
	// Faults are the kinds injected (every kind when empty), each FaultsPerKind times.
	Faults        []string
	FaultsPerKind int
	// PauseMin and PauseMax bound the pause before each fault; HoldMin and HoldMax how long
	// a fault that lasts (webhook unreachable, slow API) lasts. A frozen leader stays frozen
	// until another replica has taken its Lease over, and 1–5 s more.
	PauseMin, PauseMax time.Duration
	HoldMin, HoldMax   time.Duration
	// Nodes is the number of simulated Nodes.
	Nodes int
	// Profile and PodStartup are how the simulated Nodes' pods become Ready
	// (controlplane.Options); "" means fast.
	Profile    controlplane.Profile
	PodStartup controlplane.PodStartup
	// SettleTimeout bounds the wait, after the load, for the pools to be back at their
	// replicas and the last claims' Sandboxes to be gone.
	SettleTimeout time.Duration
	// KeepLogs keeps the cluster's logs (the audit log among them) after the run.
	KeepLogs bool
	// OperatorArgs are flags given to both replicas after the soak's own (a later flag wins),
	// each "--name" or "--name=value": an operator setting the soak is to be run with, such as
	// --claim-admission-max-wait.
	OperatorArgs []string
	// Log receives progress lines.
	Log io.Writer
}

// DefaultRate is the default claim rate. The issue asked for 20 claims a second; on the 2-core
// machines this runs on, the soak's cluster (two replicas, an audit log of every write)
// serves about 10 a second with no fault at all: at 20 a second the claims' p50 latency was
// 64 s after 90 s without a fault, at 10 a second 426 ms. 8 a second leaves room to drain
// what each fault holds back (docs/soak.md); raise it with --rate on a bigger machine.
const DefaultRate = 8

// DefaultOptions are the long soak of `make soak`: DefaultRate claims a second for 10
// minutes, every fault at least 3 times.
func DefaultOptions() Options {
	return Options{
		Rate:          DefaultRate,
		Duration:      10 * time.Minute,
		Seed:          1,
		Namespaces:    3,
		PoolSize:      20,
		LifetimeMin:   5 * time.Second,
		LifetimeMax:   30 * time.Second,
		ReadyTimeout:  5 * time.Minute,
		FaultsPerKind: 3,
		PauseMin:      3 * time.Second,
		PauseMax:      8 * time.Second,
		HoldMin:       10 * time.Second,
		HoldMax:       30 * time.Second,
		Nodes:         4,
		Profile:       controlplane.ProfileFast,
		SettleTimeout: 3 * time.Minute,
	}
}

// ShortOptions are the short soak `make test` runs: every fault once in about two minutes.
func ShortOptions() Options {
	o := DefaultOptions()
	o.Duration = 150 * time.Second
	o.Namespaces = 2
	o.PoolSize = 12
	o.LifetimeMax = 20 * time.Second
	o.FaultsPerKind = 1
	o.PauseMin, o.PauseMax = 2*time.Second, 4*time.Second
	o.HoldMin, o.HoldMax = 10*time.Second, 12*time.Second
	return o
}

// Fault kinds.
const (
	FaultLeaderKill       = "leader-kill"
	FaultLeaderFreeze     = "leader-freeze"
	FaultAPIServerRestart = "apiserver-restart"
	FaultWebhookDown      = "webhook-unreachable"
	FaultCertRotation     = "cert-rotation"
	FaultSlowAPI          = "slow-api"
	FaultPoolRecreate     = "pool-recreate"
	FaultTemplateChange   = "template-change"
	FaultRolloutRestart   = "replica-restart-in-rollout"
	FaultPodLoss          = "pod-loss"
)

// FaultKinds lists every fault kind, in the order reports show them.
var FaultKinds = []string{
	FaultLeaderKill, FaultLeaderFreeze, FaultAPIServerRestart, FaultWebhookDown, FaultCertRotation,
	FaultSlowAPI, FaultPoolRecreate, FaultTemplateChange, FaultRolloutRestart, FaultPodLoss,
}

// Validate names every bad setting.
func (o Options) Validate() error {
	var errs []error
	if o.Rate <= 0 || o.Rate > 200 {
		errs = append(errs, fmt.Errorf("rate must be in (0, 200] claims a second, got %v", o.Rate))
	}
	if o.Duration < 30*time.Second {
		errs = append(errs, fmt.Errorf("duration must be at least 30s, got %s", o.Duration))
	}
	if o.Namespaces < 1 || o.Namespaces > 50 {
		errs = append(errs, fmt.Errorf("namespaces must be between 1 and 50, got %d", o.Namespaces))
	}
	if o.PoolSize < 1 {
		errs = append(errs, fmt.Errorf("pool size must be at least 1, got %d", o.PoolSize))
	}
	if o.LifetimeMin <= 0 || o.LifetimeMax < o.LifetimeMin {
		errs = append(errs, fmt.Errorf("lifetime must be positive with min <= max, got %s-%s", o.LifetimeMin, o.LifetimeMax))
	}
	if o.ReadyTimeout <= 0 || o.SettleTimeout <= 0 {
		errs = append(errs, errors.New("ready and settle timeouts must be positive"))
	}
	if o.PauseMin < 0 || o.PauseMax < o.PauseMin || o.HoldMin <= 0 || o.HoldMax < o.HoldMin {
		errs = append(errs, fmt.Errorf("fault pauses and holds must be ranges min <= max (holds positive), got pause %s-%s, hold %s-%s", o.PauseMin, o.PauseMax, o.HoldMin, o.HoldMax))
	}
	if err := controlplane.CheckProfile(cmp.Or(o.Profile, controlplane.ProfileFast), o.PodStartup); err != nil {
		errs = append(errs, err)
	}
	if o.FaultsPerKind < 0 {
		errs = append(errs, fmt.Errorf("faults per kind must not be negative, got %d", o.FaultsPerKind))
	}
	if o.Nodes < 1 {
		errs = append(errs, fmt.Errorf("nodes must be at least 1, got %d", o.Nodes))
	}
	for i, a := range o.OperatorArgs {
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			errs = append(errs, fmt.Errorf("operator argument %d %q: want a flag, --name or --name=value", i+1, a))
		}
	}
	for _, k := range o.Faults {
		if !knownFault(k) {
			errs = append(errs, fmt.Errorf("unknown fault %q (known: %s)", k, strings.Join(FaultKinds, ", ")))
		}
	}
	return errors.Join(errs...)
}

func knownFault(kind string) bool {
	for _, k := range FaultKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// plannedFault is one entry of the schedule: which fault, after which pause, for how long
// (for faults that last), and a number the injector draws from (which namespace, delay).
type plannedFault struct {
	kind  string
	pause time.Duration
	hold  time.Duration
	pick  uint64
}

// schedule is the seed's fault schedule: every kind FaultsPerKind times in a shuffled order,
// PauseMin–PauseMax apart, faults that last holding HoldMin–HoldMax (a frozen leader until
// another replica took over, and 1–5 s more).
func (o Options) schedule() []plannedFault {
	kinds := o.Faults
	if len(kinds) == 0 {
		kinds = FaultKinds
	}
	rng := newRand(uint64(o.Seed))
	var plan []plannedFault
	for i := 0; i < o.FaultsPerKind; i++ {
		for _, k := range kinds {
			plan = append(plan, plannedFault{kind: k})
		}
	}
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	for i := range plan {
		p := &plan[i]
		p.pause = o.PauseMin + time.Duration(rng.Int64N(int64(o.PauseMax-o.PauseMin)+1))
		p.pick = rng.Uint64()
		switch p.kind {
		case FaultLeaderFreeze:
			// How long the frozen leader stays stopped after another replica took over.
			p.hold = time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
		case FaultWebhookDown, FaultSlowAPI:
			p.hold = o.HoldMin + time.Duration(rng.Int64N(int64(o.HoldMax-o.HoldMin)+1))
		}
	}
	return plan
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
