package performance

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Settings of the scale-20k scenario (AddScaleFlags). They are package settings rather than
// Options fields: only that scenario reads them.
var (
	// scaleSandboxes is the total of pool members, spread evenly over scaleNamespaces ×
	// scalePoolsPerNamespace pools.
	scaleSandboxes         = 20000
	scaleNamespaces        = 20
	scalePoolsPerNamespace = 10
	// scaleClaims is how many serial claims each of the three measurements makes: at scale,
	// at pool 50, and the floor at scale.
	scaleClaims = 30
	// scaleRestarts is how many times the operator is restarted, each time with a claim made
	// right after; the figures are the median restart's.
	scaleRestarts = 3
	// scaleIdle is the idle window of the operator's CPU; scaleFillTimeout bounds the fill.
	scaleIdle        = 30 * time.Second
	scaleFillTimeout = 40 * time.Minute
)

// AddScaleFlags registers the flags of the scale-20k scenario on fs.
func AddScaleFlags(fs *flag.FlagSet) {
	fs.IntVar(&scaleSandboxes, "scale-sandboxes", scaleSandboxes,
		"scale-20k: Sandboxes in all (pool members), spread evenly over --scale-namespaces × --scale-pools-per-namespace pools; pools filled at 11–13 Sandboxes/s on a busy 2-core machine (2026-11-26), so 20,000 takes about half an hour there")
	fs.IntVar(&scaleNamespaces, "scale-namespaces", scaleNamespaces, "scale-20k: namespaces")
	fs.IntVar(&scalePoolsPerNamespace, "scale-pools-per-namespace", scalePoolsPerNamespace, "scale-20k: templates and pools in each namespace")
	fs.IntVar(&scaleClaims, "scale-claims", scaleClaims, "scale-20k: serial claims at scale, at pool 50 and in the floor")
	fs.IntVar(&scaleRestarts, "scale-restarts", scaleRestarts, "scale-20k: operator restarts, each timed to its first claim; judged by the median (one restart's time moves by seconds from run to run)")
	fs.DurationVar(&scaleIdle, "scale-idle", scaleIdle, "scale-20k: window over which the idle operator's CPU is measured")
	fs.DurationVar(&scaleFillTimeout, "scale-fill-timeout", scaleFillTimeout, "scale-20k: how long the pools may take to fill")
}

// scaleReplicas is the replicas of each scale pool, and an error when the settings cannot be
// measured: a pool must hold the serial claims and the restart's claim without a cold start.
func scaleReplicas() (int32, error) {
	pools := scaleNamespaces * scalePoolsPerNamespace
	if pools < 1 || scaleSandboxes < pools {
		return 0, fmt.Errorf("--scale-sandboxes %d over %d namespaces × %d pools: need at least one Sandbox a pool",
			scaleSandboxes, scaleNamespaces, scalePoolsPerNamespace)
	}
	if scaleNamespaces < 2 {
		return 0, errors.New("--scale-namespaces must be at least 2: the floor's claims go into the second")
	}
	if scaleClaims < 1 {
		return 0, errors.New("--scale-claims must be at least 1")
	}
	if scaleRestarts < 1 {
		return 0, errors.New("--scale-restarts must be at least 1")
	}
	replicas := scaleSandboxes / pools
	if replicas < scaleClaims+1 {
		return 0, fmt.Errorf("--scale-sandboxes %d gives pools of %d, fewer than --scale-claims %d plus a restart's claim: use fewer namespaces or pools",
			scaleSandboxes, replicas, scaleClaims)
	}
	return int32(replicas), nil
}
