package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults of PodStartup: a container image already on the node and a process that needs a
// second or two to listen, with a tail of slow pulls and slow nodes.
const (
	DefaultPodStartupMedian = 2 * time.Second
	DefaultPodStartupP99    = 8 * time.Second
)

// startupAtoms is how many start-up times the distribution is made of: each pod gets one of
// them, all equally likely, so quantiles are exact to 1/startupAtoms.
const startupAtoms = 1000

// maxPodStartup bounds the flags: longer start-ups are a configuration mistake here.
const maxPodStartup = 10 * time.Minute

// z99 is the standard normal distribution's 0.99 quantile.
const z99 = 2.3263478740408408

// PodStartup is how long a pod of ProfileRealistic takes from being bound to a node to having
// its containers ready: a log-normal distribution fitted to a median and a 99th percentile.
// The zero value of a field means its default.
//
// Each pod's start-up time is a function of Seed and the pod's namespace and name (Draw), so
// the same pods on the same seed start in the same times on every run; pods whose names the
// API server generates (generateName) get different names, and so other times, on each run.
type PodStartup struct {
	Median time.Duration // 0 means DefaultPodStartupMedian
	P99    time.Duration // 0 means DefaultPodStartupP99
	Seed   int64
}

// withDefaults fills in the zero fields.
func (s PodStartup) withDefaults() PodStartup {
	if s.Median == 0 {
		s.Median = DefaultPodStartupMedian
	}
	if s.P99 == 0 {
		s.P99 = DefaultPodStartupP99
	}
	return s
}

// isDefault reports whether s, defaults filled in, is the default distribution.
func (s PodStartup) isDefault() bool {
	return s.withDefaults() == PodStartup{}.withDefaults()
}

// validate reports a distribution that cannot be built.
func (s PodStartup) validate() error {
	s = s.withDefaults()
	var errs []error
	if s.Median < time.Millisecond || s.Median > maxPodStartup {
		errs = append(errs, fmt.Errorf("invalid pod start-up median %s: want 1ms to %s", s.Median, maxPodStartup))
	}
	if s.P99 <= s.Median || s.P99 > maxPodStartup {
		errs = append(errs, fmt.Errorf("invalid pod start-up p99 %s: want more than the median (%s) and at most %s", s.P99, s.Median, maxPodStartup))
	}
	return errors.Join(errs...)
}

// String describes s for logs and reports: "median 2s, p99 8s, seed 0".
func (s PodStartup) String() string {
	s = s.withDefaults()
	return fmt.Sprintf("median %s, p99 %s, seed %d", s.Median, s.P99, s.Seed)
}

// Milliseconds returns the start-up times a pod draws from, ascending, in whole milliseconds
// (they go into kwok's stage template as literals): the log-normal's quantiles at (i+1)/n for
// i < n-1, so that the distribution's p50 and p99 are the median and p99 exactly, and at
// (n-0.5)/n for the last, the longest start-up.
func (s PodStartup) Milliseconds() []int64 {
	s = s.withDefaults()
	mu := math.Log(float64(s.Median) / float64(time.Millisecond))
	sigma := math.Log(float64(s.P99)/float64(s.Median)) / z99
	out := make([]int64, startupAtoms)
	for i := range out {
		u := float64(i+1) / startupAtoms
		if i == startupAtoms-1 {
			u = (startupAtoms - 0.5) / startupAtoms
		}
		z := math.Sqrt2 * math.Erfinv(2*u-1)
		out[i] = max(1, int64(math.Round(math.Exp(mu+sigma*z))))
	}
	return out
}

// Draw returns the start-up time ProfileRealistic gives the pod namespace/name: the atom of
// Milliseconds that the first 48 bits of SHA-256("<seed>/<namespace>/<name>") pick, as the
// stage template in stages/pods-realistic.yaml computes it.
func (s PodStartup) Draw(namespace, name string) time.Duration {
	s = s.withDefaults()
	return time.Duration(s.Milliseconds()[drawIndex(s.Seed, namespace, name)]) * time.Millisecond
}

// drawIndex is the template's hash of a pod into [0, startupAtoms).
func drawIndex(seed int64, namespace, name string) int {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d/%s/%s", seed, namespace, name)))
	h, _ := strconv.ParseInt(hex.EncodeToString(sum[:])[:12], 16, 64) // 48 bits: never fails
	return int(h % startupAtoms)
}

// realisticStages fills the placeholders of stages/pods-realistic.yaml with s.
func realisticStages(template []byte, s PodStartup) []byte {
	ms := s.Milliseconds()
	atoms := make([]string, len(ms))
	for i, v := range ms {
		atoms[i] = strconv.FormatInt(v, 10)
	}
	return []byte(strings.NewReplacer(
		"SANDGATE_STARTUP_ATOMS", strconv.Itoa(startupAtoms),
		"SANDGATE_STARTUP_MILLISECONDS", strings.Join(atoms, " "),
		"SANDGATE_STARTUP_SEED", strconv.FormatInt(s.withDefaults().Seed, 10),
	).Replace(string(template)))
}

// DescribeProfile names profile for logs and reports, with its start-up times for
// ProfileRealistic: "realistic (pod start-up median 2s, p99 8s, seed 0)".
func DescribeProfile(profile Profile, startup PodStartup) string {
	if profile != ProfileRealistic {
		return string(profile)
	}
	return fmt.Sprintf("%s (pod start-up %s)", profile, startup)
}

// AddProfileFlags registers --profile, --pod-startup-median, --pod-startup-p99 and
// --pod-startup-seed on fs, bound to profile and startup, with their values as defaults: the
// same flags in every command that starts a cluster. CheckProfile checks them.
func AddProfileFlags(fs *flag.FlagSet, profile *Profile, startup *PodStartup) {
	*startup = startup.withDefaults()
	fs.StringVar((*string)(profile), "profile", string(*profile),
		"how pods become Ready: fast (one status update), kubelet (separate updates tens of ms apart) "+
			"or realistic (kubelet's steps, containers ready after a start-up time drawn per pod: --pod-startup-*)")
	fs.DurationVar(&startup.Median, "pod-startup-median", startup.Median,
		"with --profile realistic: median time from a pod's binding to its containers being ready")
	fs.DurationVar(&startup.P99, "pod-startup-p99", startup.P99,
		"with --profile realistic: 99th percentile of that time (a log-normal distribution fits the two)")
	fs.Int64Var(&startup.Seed, "pod-startup-seed", startup.Seed,
		"with --profile realistic: seed of the per-pod start-up times (a pod's time is a function of the seed and its namespace and name)")
}

// CheckProfile reports an unknown profile, a start-up distribution that cannot be built, and
// start-up times other than the defaults given with a profile that does not use them.
func CheckProfile(profile Profile, startup PodStartup) error {
	if err := profile.validate(); err != nil {
		return err
	}
	if err := startup.validate(); err != nil {
		return err
	}
	if profile != ProfileRealistic && !startup.isDefault() {
		return fmt.Errorf("pod start-up times (%s) apply to the %s profile only, not %s", startup, ProfileRealistic, profile)
	}
	return nil
}
