package fairshare

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

func reservation(id, claim, tenant, pool string, at time.Time) tenancyv1alpha1.Reservation {
	return tenancyv1alpha1.Reservation{ID: id, Claim: claim, Tenant: tenant, Pool: pool, At: metav1.NewMicroTime(at)}
}

func TestRecountCountsEveryClaimOnce(t *testing.T) {
	p := builders.MakeClaimPolicy("p", "ns").MaxClaims(10).Tenant(builders.MakeTenant("a").User("alice")).Obj()
	const ttl, settle = 2 * time.Minute, 5 * time.Second
	now := t0.Add(time.Minute)
	ledger := func(counted []tenancyv1alpha1.LedgerCount, rs ...tenancyv1alpha1.Reservation) *tenancyv1alpha1.ClaimLedger {
		at := metav1.NewMicroTime(t0)
		return &tenancyv1alpha1.ClaimLedger{Spec: tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "p"},
			Status: tenancyv1alpha1.ClaimLedgerStatus{CountedAt: &at, Counted: counted, Reservations: rs,
				Refusals: []tenancyv1alpha1.LedgerRefusals{{Tenant: "a", Count: 7}}}}
	}
	type want struct {
		counted            []tenancyv1alpha1.LedgerCount
		kept               []string
		confirmed, dropped int
		freed              bool
	}
	cases := map[string]struct {
		ledger *tenancyv1alpha1.ClaimLedger
		claims []ClaimView
		seen   []string
		want   want
	}{
		"a reservation whose claim appeared is counted as the claim": {
			ledger(nil, reservation("r1", "c1", "a", "", t0)),
			[]ClaimView{{Name: "c1", Reservation: "r1", Created: t0, Tenant: "a"}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, confirmed: 1}},
		"a reservation whose claim has not appeared stays": {
			ledger(nil, reservation("r1", "", "a", "", now.Add(-time.Second))), nil, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{}, kept: []string{"r1"}}},
		"a claim created and deleted before the recount": {
			ledger(nil, reservation("r1", "", "a", "", t0)), nil, []string{"r1"},
			want{counted: []tenancyv1alpha1.LedgerCount{}, confirmed: 1, freed: true}},
		"a deleted claim frees its count": {
			ledger([]tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 2}}),
			[]ClaimView{{Name: "c1", Tenant: "a"}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, freed: true}},
		"a reservation whose create failed ends after the TTL": {
			ledger(nil, reservation("r1", "", "a", "", now.Add(-ttl))), nil, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{}, dropped: 1, freed: true}},
		"a create refused as AlreadyExists ends after settling": {
			ledger([]tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, reservation("r2", "c1", "a", "", now.Add(-settle))),
			[]ClaimView{{Name: "c1", Reservation: "r1", Created: t0, Tenant: "a"}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, dropped: 1, freed: true}},
		"a name taken by a claim made after the reservation: two creates raced": {
			ledger([]tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, reservation("r2", "c1", "a", "", now.Add(-settle))),
			[]ClaimView{{Name: "c1", Reservation: "r1", Created: now.Add(-time.Second), Tenant: "a"}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, dropped: 1, freed: true}},
		"a name taken a moment ago may be a delete and recreate on its way": {
			ledger([]tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, reservation("r2", "c1", "a", "", now.Add(-time.Second))),
			[]ClaimView{{Name: "c1", Reservation: "r1", Created: t0, Tenant: "a"}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}}, kept: []string{"r2"}}},
		"a claim admitted without a reservation is counted": {
			ledger(nil), []ClaimView{{Name: "old", Created: t0}}, nil,
			want{counted: []tenancyv1alpha1.LedgerCount{{Claims: 1}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			seen := map[string]bool{}
			for _, id := range tc.seen {
				seen[id] = true
			}
			r := RecountLedger(p, RecountInput{Ledger: tc.ledger, Claims: tc.claims, Seen: func(id string) bool { return seen[id] },
				Now: now, TTL: ttl, Settle: settle})
			var kept []string
			for _, res := range r.Status.Reservations {
				kept = append(kept, res.ID)
			}
			got := want{counted: r.Status.Counted, kept: kept, confirmed: r.Confirmed, dropped: r.Dropped, freed: r.Freed}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("RecountLedger (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ledger.Status.Refusals, r.Status.Refusals); diff != "" {
				t.Errorf("refusals changed (-before +after):\n%s", diff)
			}
			if !r.Status.CountedAt.Time.Equal(now) {
				t.Errorf("countedAt %v, want %v", r.Status.CountedAt, now)
			}
		})
	}
}

// A create refused as AlreadyExists by a claim deleted since (gone by the recount) ends after
// settling too: another claim of its name was seen.
func TestRecountDropsAReservationOfANameTakenByAClaimGoneSince(t *testing.T) {
	p := builders.MakeClaimPolicy("p", "ns").MaxClaims(3).Obj()
	l := &tenancyv1alpha1.ClaimLedger{Spec: tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "p"},
		Status: tenancyv1alpha1.ClaimLedgerStatus{Reservations: []tenancyv1alpha1.Reservation{reservation("r", "c1", "", "", t0)}}}
	seenName := func(name string) bool { return name == "c1" }
	for at, want := range map[time.Duration]int{time.Second: 0, 5 * time.Second: 1} {
		r := RecountLedger(p, RecountInput{Ledger: l, Now: t0.Add(at), TTL: time.Minute, Settle: 5 * time.Second, SeenName: seenName})
		if r.Dropped != want {
			t.Errorf("%s after the reservation: dropped %d, want %d", at, r.Dropped, want)
		}
	}
}

func TestRecountOfATenantLedgerCountsOnlyItsTenant(t *testing.T) {
	p := builders.MakeClaimPolicy("p", "ns").Tenant(builders.MakeTenant("a").User("alice").MaxClaims(3)).Obj()
	l := &tenancyv1alpha1.ClaimLedger{Spec: tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "p", Tenant: "a"}}
	r := RecountLedger(p, RecountInput{Ledger: l, Now: t0, TTL: time.Minute, Claims: []ClaimView{
		{Name: "1", Tenant: "a"}, {Name: "2", Tenant: "b"}, {Name: "3"}, {Name: "4", Tenant: "a", Pool: "python"}}})
	want := []tenancyv1alpha1.LedgerCount{{Tenant: "a", Claims: 1}, {Tenant: "a", Pool: "python", Claims: 1}}
	if diff := cmp.Diff(want, r.Status.Counted); diff != "" {
		t.Errorf("counted (-want +got):\n%s", diff)
	}
}

func TestNeedsWriteLeavesConfirmationsForABatch(t *testing.T) {
	counted := metav1.NewMicroTime(t0)
	old := &tenancyv1alpha1.ClaimLedger{Status: tenancyv1alpha1.ClaimLedgerStatus{CountedAt: &counted,
		Counted: []tenancyv1alpha1.LedgerCount{{Claims: 1}}, Reservations: []tenancyv1alpha1.Reservation{reservation("r", "", "", "", t0)}}}
	confirmed := Recount{Status: tenancyv1alpha1.ClaimLedgerStatus{Counted: []tenancyv1alpha1.LedgerCount{{Claims: 2}}},
		Confirmed: 1, OldestConfirmed: t0}
	cases := map[string]struct {
		old      *tenancyv1alpha1.ClaimLedger
		r        Recount
		now      time.Time
		want     bool
		wantWait time.Duration
	}{
		"never counted":                {&tenancyv1alpha1.ClaimLedger{}, Recount{}, t0, true, 0},
		"capacity freed":               {old, Recount{Freed: true, Status: old.Status}, t0, true, 0},
		"nothing changed":              {old, Recount{Status: old.Status}, t0, false, 0},
		"one confirmation, fresh":      {old, confirmed, t0.Add(100 * time.Millisecond), false, 900 * time.Millisecond},
		"one confirmation, old enough": {old, confirmed, t0.Add(time.Second), true, 0},
		"a claim admitted unreserved":  {old, Recount{Status: tenancyv1alpha1.ClaimLedgerStatus{Counted: []tenancyv1alpha1.LedgerCount{{Claims: 3}}}}, t0, true, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, wait := NeedsWrite(builders.MakeClaimPolicy("p", "ns").Obj(), tc.old, tc.r, tc.now, 32, time.Second)
			if got != tc.want || wait != tc.wantWait {
				t.Errorf("NeedsWrite = %t, %s; want %t, %s", got, wait, tc.want, tc.wantWait)
			}
		})
	}
}
