package reconcilers

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

var policyKey = types.NamespacedName{Namespace: "ns", Name: "quotas"}

func newPolicyReconciler(t *testing.T, a *fakeAPI, clk clock.PassiveClock) *claimPolicyReconciler {
	t.Helper()
	r := &claimPolicyReconciler{Client: a, Metrics: newTestMetrics(t), Clock: clk, ReservationTTL: time.Minute,
		meter: newPolicyMeter(), shares: newWarmShares()}
	r.seen = newSeenReservations(r.ReservationTTL + reservationSettle)
	r.statusWritten = map[types.NamespacedName]time.Time{}
	r.remainders = map[meterKey]float64{}
	return r
}

func reconcilePolicy(t *testing.T, r *claimPolicyReconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: policyKey})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func ledgers(t *testing.T, a *fakeAPI) map[string]*tenancyv1alpha1.ClaimLedger {
	t.Helper()
	var list tenancyv1alpha1.ClaimLedgerList
	if err := a.List(context.Background(), &list, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	out := map[string]*tenancyv1alpha1.ClaimLedger{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func getPolicy(t *testing.T, a *fakeAPI) *tenancyv1alpha1.ClaimPolicy {
	t.Helper()
	p := &tenancyv1alpha1.ClaimPolicy{}
	if err := a.Get(context.Background(), policyKey, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func claimBy(name, creator, pool, reservation string) *extv1beta1.SandboxClaim {
	w := builders.MakeClaim(name, "ns", pool).UID(types.UID(name+"-uid")).Annotation(agentsv1beta1.AnnotationCreator, creator).Created(planNow.Add(-time.Hour))
	if reservation != "" {
		w.Annotation(tenancyv1alpha1.AnnotationReservation, reservation)
	}
	return w.Obj()
}

func teamQuotas() *tenancyv1alpha1.ClaimPolicy {
	p := builders.MakeClaimPolicy("quotas", "ns").
		Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(3)).
		Tenant(builders.MakeTenant("team-b").User("bob").PerPool("pool", 2)).Obj()
	p.UID, p.Generation = "policy-uid", 1
	return p
}

func counts(l *tenancyv1alpha1.ClaimLedger) []tenancyv1alpha1.LedgerCount { return l.Status.Counted }

func reservationIDs(l *tenancyv1alpha1.ClaimLedger) []string {
	var out []string
	for _, r := range l.Status.Reservations {
		out = append(out, r.ID)
	}
	sort.Strings(out)
	return out
}

// A new policy gets a ledger per tenant with a limit, counted from the claims that exist,
// owned by the policy; its status shows the usage and says the claims are counted.
func TestAPolicyGetsItsLedgersCounted(t *testing.T) {
	a := newFakeAPI(t, teamQuotas(), claimBy("a1", "alice", "pool", ""), claimBy("a2", "alice", "other", ""),
		claimBy("b1", "bob", "pool", ""), claimBy("m1", "mallory", "pool", ""))
	r := newPolicyReconciler(t, a, clocktesting.NewFakeClock(planNow))
	reconcilePolicy(t, r)
	got := ledgers(t, a)
	if len(got) != 2 || got["quotas.team-a"] == nil || got["quotas.team-b"] == nil {
		t.Fatalf("ledgers %v, want quotas.team-a and quotas.team-b", got)
	}
	// Pool "pool" is named by a limit (team-b's), so it is counted apart, for every tenant.
	if diff := cmp.Diff([]tenancyv1alpha1.LedgerCount{{Tenant: "team-a", Claims: 1}, {Tenant: "team-a", Pool: "pool", Claims: 1}}, counts(got["quotas.team-a"])); diff != "" {
		t.Errorf("team-a's count (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]tenancyv1alpha1.LedgerCount{{Tenant: "team-b", Pool: "pool", Claims: 1}}, counts(got["quotas.team-b"])); diff != "" {
		t.Errorf("team-b's count (-want +got):\n%s", diff)
	}
	if l := got["quotas.team-a"]; l.Status.CountedGeneration != 1 || !metav1.IsControlledBy(l, teamQuotas()) {
		t.Errorf("ledger %+v: want counted for generation 1, controlled by the policy", l)
	}
	p := getPolicy(t, a)
	if p.Status.Claims != 4 || p.Status.Tenants[0].Claims != 2 || p.Status.Tenants[1].Claims != 1 || p.Status.Unnamed.Claims != 1 {
		t.Errorf("status %+v: want 4 claims, team-a 2, team-b 1, unnamed 1", p.Status)
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, tenancyv1alpha1.ConditionCounted) {
		t.Errorf("conditions %+v: want Counted", p.Status.Conditions)
	}
	if meta.IsStatusConditionTrue(p.Status.Conditions, tenancyv1alpha1.ConditionPoolsFound) {
		t.Errorf("conditions %+v: want PoolsFound False, pool does not exist", p.Status.Conditions)
	}
}

// Each claim counts once: as its reservation until the leader sees it, then as itself. A
// confirmation alone is written only with others (or once old enough); a freed slot at once.
func TestARecountSpendsReservationsAndFreesSlots(t *testing.T) {
	clk := clocktesting.NewFakeClock(planNow)
	a := newFakeAPI(t, teamQuotas(), claimBy("a1", "alice", "pool", ""))
	r := newPolicyReconciler(t, a, clk)
	reconcilePolicy(t, r)
	l := ledgers(t, a)["quotas.team-a"]
	// Admission reserves two claims.
	l.Status.Reservations = []tenancyv1alpha1.Reservation{
		{ID: "r1", Claim: "a2", Tenant: "team-a", Pool: "pool", At: metav1.NewMicroTime(clk.Now())},
		{ID: "r2", Claim: "a3", Tenant: "team-a", Pool: "pool", At: metav1.NewMicroTime(clk.Now())},
	}
	if err := a.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	// One of them is created.
	if err := a.Create(context.Background(), claimBy("a2", "alice", "pool", "r1")); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	res := reconcilePolicy(t, r)
	if got := reservationIDs(ledgers(t, a)["quotas.team-a"]); len(got) != 2 || res.RequeueAfter == 0 {
		t.Errorf("reservations %v, requeue %v: a lone confirmation waits for a batch", got, res.RequeueAfter)
	}
	// The status counts the claim once all the same: a1, a2 (whose reservation the ledger
	// still holds) and r2's claim on its way.
	var claims extv1beta1.SandboxClaimList
	if err := a.List(context.Background(), &claims); err != nil {
		t.Fatal(err)
	}
	st := r.usage(getPolicy(t, a), claims.Items, []tenancyv1alpha1.ClaimLedger{*ledgers(t, a)["quotas.team-a"]})
	if ts := st.Tenants[0]; ts.Claims != 3 || ts.Reserved != 1 {
		t.Errorf("team-a's usage %+v, want 3 claims of which 1 reserved", ts.Usage)
	}
	clk.Step(confirmDelay)
	reconcilePolicy(t, r)
	l = ledgers(t, a)["quotas.team-a"]
	if diff := cmp.Diff([]string{"r2"}, reservationIDs(l)); diff != "" {
		t.Errorf("reservations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]tenancyv1alpha1.LedgerCount{{Tenant: "team-a", Pool: "pool", Claims: 2}}, counts(l)); diff != "" {
		t.Errorf("count (-want +got):\n%s", diff)
	}
	// The reservation whose create never completed ends after the TTL.
	clk.Step(r.ReservationTTL)
	reconcilePolicy(t, r)
	if got := reservationIDs(ledgers(t, a)["quotas.team-a"]); len(got) != 0 {
		t.Errorf("reservations %v after the TTL, want none", got)
	}
	if st := getPolicy(t, a).Status; st.Claims != 2 || st.Reserved != 0 {
		t.Errorf("status usage %+v after the TTL, want 2 claims, none reserved", st.Usage)
	}
	// A claim deleted frees its slot at once.
	if err := a.Delete(context.Background(), claimBy("a1", "alice", "pool", "")); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	reconcilePolicy(t, r)
	if diff := cmp.Diff([]tenancyv1alpha1.LedgerCount{{Tenant: "team-a", Pool: "pool", Claims: 1}}, counts(ledgers(t, a)["quotas.team-a"])); diff != "" {
		t.Errorf("count after a deletion (-want +got):\n%s", diff)
	}
}

// Adding a namespace-wide limit moves the counting into one ledger: the tenants' ledgers are
// retired first, their reservations moved, then they are deleted.
func TestAPolicyChangeMovesReservationsToItsNewLedger(t *testing.T) {
	clk := clocktesting.NewFakeClock(planNow)
	a := newFakeAPI(t, teamQuotas())
	r := newPolicyReconciler(t, a, clk)
	reconcilePolicy(t, r)
	l := ledgers(t, a)["quotas.team-b"]
	l.Status.Reservations = []tenancyv1alpha1.Reservation{{ID: "rb", Claim: "b1", Tenant: "team-b", Pool: "pool", At: metav1.NewMicroTime(clk.Now())}}
	if err := a.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	p := getPolicy(t, a)
	p.Spec.MaxClaims = ptrTo(int32(10))
	p.Generation = 2
	if err := a.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	a.Journal()
	reconcilePolicy(t, r)
	got := ledgers(t, a)
	if len(got) != 1 || got["quotas"] == nil {
		t.Fatalf("ledgers %v, want quotas alone", got)
	}
	if diff := cmp.Diff([]string{"rb"}, reservationIDs(got["quotas"])); diff != "" {
		t.Errorf("the new ledger's reservations (-want +got):\n%s", diff)
	}
	want := []string{"patch ClaimLedger/quotas.team-a", "patch ClaimLedger/quotas.team-b", "create ClaimLedger/quotas",
		"delete ClaimLedger/quotas.team-a", "delete ClaimLedger/quotas.team-b"}
	if diff := cmp.Diff(want, writesOf(a.Journal())[:5]); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// The status meters what each tenant was served, and the time its claims existed.
func TestAPolicyStatusMeters(t *testing.T) {
	clk := clocktesting.NewFakeClock(planNow)
	a := newFakeAPI(t, teamQuotas(), claimBy("a1", "alice", "pool", ""), claimBy("a2", "alice", "pool", ""))
	r := newPolicyReconciler(t, a, clk)
	reconcilePolicy(t, r)
	r.meter.served("ns", "quotas", "team-a", true)
	r.meter.served("ns", "quotas", "team-a", false)
	r.meter.served("ns", "quotas", "", true)
	clk.Step(90 * time.Second)
	reconcilePolicy(t, r)
	p := getPolicy(t, a)
	got := p.Status.Tenants[0].Metering
	if diff := cmp.Diff(tenancyv1alpha1.Metering{WarmHits: 1, ColdStarts: 1, ClaimSeconds: 180}, got); diff != "" {
		t.Errorf("team-a's metering (-want +got):\n%s", diff)
	}
	if p.Status.Unnamed.WarmHits != 1 {
		t.Errorf("unnamed metering %+v, want one warm hit", p.Status.Unnamed.Metering)
	}
	if pending := r.meter.pending(policyKey); len(pending) != 0 {
		t.Errorf("counts %v left after the status holds them", pending)
	}
}

// A limit lowered below the claims that exist ends none of them; the status says so.
func TestAPolicyStatusSaysWhenUsageIsAboveALimit(t *testing.T) {
	p := teamQuotas()
	p.Spec.Tenants[0].MaxClaims = ptrTo(int32(1))
	a := newFakeAPI(t, p, claimBy("a1", "alice", "pool", ""), claimBy("a2", "alice", "pool", ""))
	r := newPolicyReconciler(t, a, clocktesting.NewFakeClock(planNow))
	reconcilePolicy(t, r)
	c := meta.FindStatusCondition(getPolicy(t, a).Status.Conditions, tenancyv1alpha1.ConditionWithinLimits)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tenancyv1alpha1.ReasonUsageAboveLimit ||
		c.Message != "new claims are refused until usage is below the limit; the claims above it were admitted before it was lowered and are not ended: spec.tenants[0].maxClaims (team-a): 2 claims, limit 1" {
		t.Errorf("WithinLimits %+v", c)
	}
}

func ptrTo[T any](v T) *T { return &v }
