package check

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// The invariants Check proves, as Violation.Invariant names them: each says what must hold.
const (
	// InvariantClaimStamped: every admitted claim carries the template-hash stamp before it
	// is bound or Ready: admission's, or the operator's for a claim admitted while its pool
	// or template did not exist.
	InvariantClaimStamped = "claim-stamped"
	// InvariantStampByOperator: a claim's stamp, once set, is changed by the operator only.
	InvariantStampByOperator = "stamp-by-operator"
	// InvariantClaimReady: at the end, every claim not being deleted is Ready.
	InvariantClaimReady = "final-claim-ready"
	// InvariantClaimOneSandbox: at the end, every claim not being deleted has exactly one
	// Sandbox, controlled by it and labelled with its UID.
	InvariantClaimOneSandbox = "final-claim-one-sandbox"
	// InvariantClaimTemplateVersion: at the end, a claim's Sandbox is built from the claim's
	// (final) stamped template version.
	InvariantClaimTemplateVersion = "final-claim-template-version"
	// InvariantSandboxOneClaim: a Sandbox is never bound to two claims, at once or one after
	// the other.
	InvariantSandboxOneClaim = "sandbox-one-claim"
	// InvariantSandboxBoundOnce: a Sandbox is never bound again after it was unbound.
	InvariantSandboxBoundOnce = "sandbox-bound-once"
	// InvariantBindingByOperator: only the operator user binds a Sandbox to a claim.
	InvariantBindingByOperator = "binding-by-operator"
	// InvariantClaimOneBinding: a claim is never bound to two Sandboxes at once.
	InvariantClaimOneBinding = "claim-one-binding"
	// InvariantStaleLeaderWrite: no replica writes while it does not hold the leader
	// election Lease.
	InvariantStaleLeaderWrite = "no-stale-leader-write"
	// InvariantKnownWriter: every write of the operator user comes from a known replica.
	InvariantKnownWriter = "known-writer"
	// InvariantNoLeakedSandbox: at the end, every Sandbox has a controlling owner (a claim or
	// a pool) that exists, and a Sandbox bound to a claim has that claim.
	InvariantNoLeakedSandbox = "no-leaked-sandbox"
	// InvariantNoLeakedChild: at the end, every pod, PVC, Service and NetworkPolicy of
	// sandgate's has its Sandbox (or template) still there.
	InvariantNoLeakedChild = "no-leaked-child"
	// InvariantPoolAtReplicas: at the end, every pool has spec.replicas members, all ready.
	InvariantPoolAtReplicas = "pool-at-replicas"
	// InvariantRefusedCleanly: a create refused with an error (4xx or 5xx) left no claim.
	InvariantRefusedCleanly = "refused-cleanly"
	// InvariantServedAfterRecovery: every claim created after the last fault cleared is
	// served (Ready), unless deleted before it was.
	InvariantServedAfterRecovery = "served-after-recovery"
	// InvariantFaultRecovered: every claim pending when a fault cleared becomes Ready,
	// unless deleted before it was.
	InvariantFaultRecovered = "fault-recovered"
	// InvariantPolicyUsage: at the end, every ClaimPolicy's status shows the claims that exist
	// against each of its limits, none reserved, and its ledgers count the same claims.
	InvariantPolicyUsage = "policy-usage-exact"
)

// Violation is one broken invariant.
type Violation struct {
	// Invariant is one of the Invariant* names.
	Invariant string
	// Object names what broke it: "<Kind> <namespace>/<name>" (with the UID where the name
	// alone is ambiguous), or a replica.
	Object string
	// Detail says how, with the request (verb, user, audit ID) where one did it.
	Detail string
	// At is when it happened: the offending request's receipt; zero for the final state.
	At time.Time
}

func (v Violation) String() string {
	at := "final state"
	if !v.At.IsZero() {
		at = v.At.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s: %s: %s (%s)", v.Invariant, v.Object, v.Detail, at)
}

// FaultResult is what Check found of one fault.
type FaultResult struct {
	Fault Fault
	// Pending is the number of claims created before the fault cleared and not Ready then
	// (deleted ones left out); NeverReady those of them that never became Ready.
	Pending, NeverReady int
	// Recovery is the last Ready of the pending claims minus the fault's End; 0 when none
	// was pending.
	Recovery time.Duration
}

// ClaimCounts counts claims.
type ClaimCounts struct {
	// Requested is the number of creates the load generator sent; Created, Served
	// (Ready), Deleted (a delete requested) and Refused (create answered with a status >=
	// 400) count its records.
	Requested, Created, Served, Deleted, Refused int
	// Unanswered counts the creates that got no status before the client gave up (its
	// timeout: the API server down, or client-go retrying 429s until then) and that the
	// audit log does not show admitted. Requested = Created + Refused + Unanswered.
	Unanswered int
	// Admitted is the number of claim creates the audit log shows answered 201, by anyone;
	// Shed those it shows answered 429, every retry counted: admission shedding, and claims over
	// a ClaimPolicy's limit or rate, which answer 429 too (the audit log does not tell them
	// apart).
	Admitted, Shed int
}

// Percentiles are nearest-rank percentiles of durations (test/performance/stats).
type Percentiles struct {
	Count    int
	P50, P99 time.Duration
}

// PercentilesOf returns the count, p50 and p99 of samples; zero for none.
func PercentilesOf(samples []time.Duration) Percentiles {
	s := stats.Summarize(samples)
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return Percentiles{Count: s.Count, P50: ms(s.P50), P99: ms(s.P99)}
}

// Report is what Check found.
type Report struct {
	// Violations are every broken invariant, in time order (the final state's last).
	Violations []Violation
	// ByInvariant counts Violations by invariant.
	ByInvariant map[string]int
	// Faults are the faults in the input's order, with what each cost.
	Faults []FaultResult
	// Recovery holds the recovery time of each fault, by fault kind.
	Recovery map[string][]time.Duration
	// FaultsByKind counts faults by kind.
	FaultsByKind map[string]int
	// LatencyInFaults and LatencyOutsideFaults are the claim latency (Created to Ready) of the
	// claims created during a fault (Start to End of any) and of the others.
	LatencyInFaults, LatencyOutsideFaults Percentiles
	// Claims counts claims.
	Claims ClaimCounts
	// Notes are what Check could not read or interpret (an object of the audit log it could
	// not decode, a Lease write without a replica): no violations, but less was proven.
	Notes []string
}

// OK reports whether no invariant broke.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// RecoveryPercentiles returns the recovery percentiles by fault kind.
func (r *Report) RecoveryPercentiles() map[string]Percentiles {
	out := make(map[string]Percentiles, len(r.Recovery))
	for kind, ds := range r.Recovery {
		out[kind] = PercentilesOf(ds)
	}
	return out
}

// sortViolations orders violations by time, those of the final state last, then by
// invariant, object and detail, so that a report reads the same each time.
func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int {
		if a.At.IsZero() != b.At.IsZero() {
			if a.At.IsZero() {
				return 1
			}
			return -1
		}
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Invariant, b.Invariant),
			cmp.Compare(a.Object, b.Object), cmp.Compare(a.Detail, b.Detail))
	})
}
