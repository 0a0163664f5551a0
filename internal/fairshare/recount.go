package fairshare

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
)

// ClaimView is what the leader's recount needs of a claim that exists (its cache shows it;
// one being deleted exists until it is gone).
type ClaimView struct {
	Name string
	// Reservation is the claim's policy.sandgate.dev/reservation, "" for none.
	Reservation string
	// Created is its creationTimestamp.
	Created time.Time
	// Tenant and Pool are its charge's in the ledger's policy.
	Tenant, Pool string
}

// RecountInput is what a ledger is recounted from.
type RecountInput struct {
	// Ledger is the ledger as it is now (spec says whose claims it counts).
	Ledger *tenancyv1alpha1.ClaimLedger
	// Claims are the claims of the namespace that exist, as the leader's cache shows them.
	Claims []ClaimView
	// Seen reports whether the leader's cache ever showed a claim with this reservation: such
	// a reservation is spent (its claim is counted, or was and is gone), whether or not the
	// claim still exists.
	Seen func(id string) bool
	// SeenName reports whether the leader's cache showed, at some time, a claim of this name
	// (one that is gone by now included).
	SeenName func(name string) bool
	// Now is the time of the recount.
	Now time.Time
	// TTL is how long a reservation whose claim never appears is kept: longer than any create
	// can take after its admission, so that no claim on its way loses its reservation.
	TTL time.Duration
	// Settle is how long a reservation of a named claim is kept once another claim of that
	// name exists or existed: its create was refused as AlreadyExists (the other was there
	// first, or won a race of two creates), unless the other was deleted and this create
	// landed after it and the cache has not shown this claim for this long; a create lands
	// within milliseconds of its admission.
	Settle time.Duration
}

// Recount is a ledger recounted from the claims that exist.
type Recount struct {
	// Status is the ledger's new status (its refusals unchanged).
	Status tenancyv1alpha1.ClaimLedgerStatus
	// Confirmed counts the reservations dropped because their claim was seen; Dropped those
	// dropped because it never came (expired, or its name was taken).
	Confirmed, Dropped int
	// Freed is true when the recount lowers what admission counts for some key: a claim gone,
	// a reservation dropped. Such a recount should be written at once: claims may be waiting.
	Freed bool
	// OldestConfirmed is when the oldest confirmed reservation was made (zero for none).
	OldestConfirmed time.Time
}

// RecountLedger counts the claims in the ledger's scope and keeps only the reservations
// whose claim the cache has not shown: every claim is counted once, either in Counted (once
// the leader saw it) or as its reservation (until then), never both and never neither while
// it exists. A reservation whose create failed after admission is dropped after in.TTL, or
// after in.Settle when another claim of its name exists or existed (AlreadyExists).
func RecountLedger(p *tenancyv1alpha1.ClaimPolicy, in RecountInput) Recount {
	scope := in.Ledger.Spec.Tenant
	counted := Counts{}
	byReservation := map[string]bool{}
	byName := map[string]ClaimView{}
	for _, c := range in.Claims {
		if c.Reservation != "" {
			byReservation[c.Reservation] = true
		}
		byName[c.Name] = c
		if scope != "" && c.Tenant != scope {
			continue
		}
		counted[Key{c.Tenant, c.Pool}]++
	}
	out := Recount{Status: *in.Ledger.Status.DeepCopy()}
	out.Status.Counted = CountsList(counted)
	countedAt := metav1.NewMicroTime(in.Now)
	out.Status.CountedAt = &countedAt
	out.Status.Reservations = nil
	for _, r := range in.Ledger.Status.Reservations {
		switch {
		case byReservation[r.ID] || (in.Seen != nil && in.Seen(r.ID)):
			out.Confirmed++
			if out.OldestConfirmed.IsZero() || r.At.Time.Before(out.OldestConfirmed) {
				out.OldestConfirmed = r.At.Time
			}
		case in.Now.Sub(r.At.Time) >= in.TTL:
			out.Dropped++
		case r.Claim != "" && in.Now.Sub(r.At.Time) >= in.Settle && (nameTaken(byName, r) || (in.SeenName != nil && in.SeenName(r.Claim))):
			out.Dropped++
		default:
			out.Status.Reservations = append(out.Status.Reservations, r)
		}
	}
	out.Status.CountedGeneration = p.Generation
	out.Status.Retired = in.Ledger.Status.Retired
	before, after := LedgerCounts(p, in.Ledger), LedgerCounts(p, &tenancyv1alpha1.ClaimLedger{Status: out.Status})
	for k, n := range before {
		if after[k] < n {
			out.Freed = true
		}
	}
	return out
}

// nameTaken reports whether a claim of r's name that is not r's exists.
func nameTaken(byName map[string]ClaimView, r tenancyv1alpha1.Reservation) bool {
	c, ok := byName[r.Claim]
	return ok && c.Reservation != r.ID
}

// NeedsWrite says whether a recount should be written now, and if not how long it may wait.
// Dropping confirmed reservations changes nothing admission counts, only the ledger's size,
// so it waits for confirmBatch of them or for the oldest to be confirmDelay old: a burst's
// claims do not each cost the ledger a write that admission's writes would conflict with.
func NeedsWrite(p *tenancyv1alpha1.ClaimPolicy, old *tenancyv1alpha1.ClaimLedger, r Recount, now time.Time, confirmBatch int, confirmDelay time.Duration) (bool, time.Duration) {
	if old.Status.CountedAt == nil || old.Status.CountedGeneration != r.Status.CountedGeneration || r.Freed || r.Dropped > 0 || countsGrew(p, old, r) {
		return true, 0
	}
	if r.Confirmed == 0 {
		return false, 0
	}
	if r.Confirmed >= confirmBatch {
		return true, 0
	}
	if wait := confirmDelay - now.Sub(r.OldestConfirmed); wait > 0 {
		return false, wait
	}
	return true, 0
}

// countsGrew reports whether the recount counts a claim the ledger counts neither in Counted
// nor as a reservation (a claim admitted without one: before the policy, or by a replica whose
// cache did not show it yet): admission must count it at once.
func countsGrew(p *tenancyv1alpha1.ClaimPolicy, old *tenancyv1alpha1.ClaimLedger, r Recount) bool {
	before, after := LedgerCounts(p, old), LedgerCounts(p, &tenancyv1alpha1.ClaimLedger{Status: r.Status})
	for k, n := range after {
		if n > before[k] {
			return true
		}
	}
	return false
}
