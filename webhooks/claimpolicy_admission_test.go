package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/ledger"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// noWrites fails every write: what a namespace without a policy must never see.
type noWrites struct{ client.Client }

var errWrite = errors.New("no write expected")

func (noWrites) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errWrite
}
func (noWrites) Create(context.Context, client.Object, ...client.CreateOption) error { return errWrite }

// countedLedger is a ledger the leader counted, holding n claims of tenant under pool key pool.
func countedLedger(name, tenant, pool string, n int32) *tenancyv1alpha1.ClaimLedger {
	at := metav1.NewMicroTime(time.Now())
	return &tenancyv1alpha1.ClaimLedger{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{tenancyv1alpha1.LabelLedgerPolicy: "quotas"}},
		Spec:       tenancyv1alpha1.ClaimLedgerSpec{PolicyName: "quotas", Tenant: tenant},
		Status: tenancyv1alpha1.ClaimLedgerStatus{CountedAt: &at,
			Counted: []tenancyv1alpha1.LedgerCount{{Tenant: tenant, Pool: pool, Claims: n}}},
	}
}

func quotas() *tenancyv1alpha1.ClaimPolicy {
	return builders.MakeClaimPolicy("quotas", "ns").
		Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(2)).
		Tenant(builders.MakeTenant("team-b").User("bob").PerPool("pool", 1)).Obj()
}

func claimPolicies(c client.Client, writer client.Client) *webhooks.ClaimPolicies {
	return &webhooks.ClaimPolicies{Cache: c, APIReader: c,
		Reserver: &ledger.Reserver{Client: writer, Cache: c, APIReader: c, NotCountedWait: 50 * time.Millisecond}}
}

func admissionRequest(user string, groups []string, dryRun bool) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns",
		UserInfo: authenticationv1.UserInfo{Username: user, Groups: groups}, DryRun: ptr.To(dryRun)}}
}

func newClaim(name string) *extv1beta1.SandboxClaim {
	c := builders.MakeClaim(name, "ns", "pool").Obj()
	c.Annotations = map[string]string{}
	return c
}

func TestANamespaceWithoutAPolicyCostsNoWrite(t *testing.T) {
	c := fakeClient()
	a := claimPolicies(c, noWrites{c})
	claim := newClaim("c")
	if err := a.Admit(context.Background(), admissionRequest("alice", []string{"team-a"}, false), claim); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if len(claim.Annotations) != 0 {
		t.Errorf("annotations %v: a namespace without a policy records nothing", claim.Annotations)
	}
}

func TestAClaimWithinItsLimitsIsReservedAndRecordsItsCreator(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-a", "team-a", "", 1))
	a := claimPolicies(c, c)
	claim := newClaim("c")
	if err := a.Admit(context.Background(), admissionRequest("alice", []string{"system:authenticated", "team-a"}, false), claim); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	id := claim.Annotations[tenancyv1alpha1.AnnotationReservation]
	if id == "" || claim.Annotations[tenancyv1alpha1.AnnotationCreatorGroups] != "system:authenticated,team-a" {
		t.Fatalf("annotations %v: want the reservation and the creator's groups", claim.Annotations)
	}
	l := &tenancyv1alpha1.ClaimLedger{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "quotas.team-a"}, l); err != nil {
		t.Fatal(err)
	}
	if len(l.Status.Reservations) != 1 {
		t.Fatalf("reservations %+v, want one", l.Status.Reservations)
	}
	got := l.Status.Reservations[0]
	got.At = metav1.MicroTime{}
	want := tenancyv1alpha1.Reservation{ID: id, Claim: "c", Tenant: "team-a", Pool: "pool", Creator: "alice"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reservation (-want +got):\n%s", diff)
	}

	// The same create, admitted again after a later mutating webhook changed it
	// (reinvocationPolicy IfNeeded): not reserved twice.
	if err := a.Admit(context.Background(), admissionRequest("alice", []string{"system:authenticated", "team-a"}, false), claim); err != nil {
		t.Fatalf("Admit again: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "quotas.team-a"}, l); err != nil {
		t.Fatal(err)
	}
	if len(l.Status.Reservations) != 1 {
		t.Errorf("reservations %+v after a reinvocation, want still one", l.Status.Reservations)
	}
}

// A claim with only generateName is named by admission, as the API server would name it, and
// its reservation names it: a reinvocation of its create carries that name. A claim without a
// name carrying the reservation (a client replaying it) is refused, and so is a claim of
// another name.
func TestAClaimWithGenerateNameIsNamedAndItsReservationCannotBeReplayed(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-a", "team-a", "", 0))
	a := claimPolicies(c, c)
	req := admissionRequest("alice", []string{"team-a"}, false)
	claim := newClaim("")
	claim.GenerateName = "gen-"
	if err := a.Admit(context.Background(), req, claim); err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if !strings.HasPrefix(claim.Name, "gen-") || len(claim.Name) != len("gen-")+5 {
		t.Fatalf("name %q, want gen- and five characters", claim.Name)
	}
	l := &tenancyv1alpha1.ClaimLedger{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "quotas.team-a"}, l); err != nil {
		t.Fatal(err)
	}
	if len(l.Status.Reservations) != 1 || l.Status.Reservations[0].Claim != claim.Name {
		t.Fatalf("reservations %+v, want one naming %s", l.Status.Reservations, claim.Name)
	}
	id := claim.Annotations[tenancyv1alpha1.AnnotationReservation]
	if err := a.Admit(context.Background(), req, claim.DeepCopy()); err != nil {
		t.Errorf("the create admitted again (a reinvocation): %v", err)
	}
	for _, name := range []string{"", "other"} {
		replay := newClaim(name)
		replay.GenerateName = "gen-"
		replay.Annotations[tenancyv1alpha1.AnnotationReservation] = id
		if err := a.Admit(context.Background(), req, replay); !apierrors.IsInvalid(err) {
			t.Errorf("a claim named %q carrying the reservation: %v, want 422", name, err)
		}
	}
	long := newClaim("")
	long.GenerateName = strings.Repeat("a", 70)
	if err := a.Admit(context.Background(), req, long); err != nil || len(long.Name) != 63 {
		t.Errorf("a long generateName: %v, name %q: want a name of 63 characters", err, long.Name)
	}
}

// A claim beyond a limit is refused with 429 Too Many Requests: no Retry-After (client-go
// would retry inside Create), a message that names the policy, the limit, the usage and what
// to do, and a cause per limit.
func TestAClaimBeyondALimitIsRefusedWith429(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-a", "team-a", "", 2))
	a := claimPolicies(c, c)
	err := a.Admit(context.Background(), admissionRequest("alice", []string{"team-a"}, false), newClaim("c"))
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("Admit = %v, want an API status", err)
	}
	s := status.Status()
	if s.Code != http.StatusTooManyRequests || s.Reason != metav1.StatusReasonTooManyRequests || s.Details == nil || s.Details.RetryAfterSeconds != 0 {
		t.Errorf("status %+v: want 429 TooManyRequests without retryAfterSeconds", s)
	}
	for _, want := range []string{"is refused by ClaimPolicy ns/quotas", "tenant team-a's claims are at their limit, 2 of 2 (spec.tenants[0].maxClaims)",
		"delete one of them, or ask your platform team to raise the limit"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message %q lacks %q", s.Message, want)
		}
	}
	wantCauses := []metav1.StatusCause{{Type: "FieldValueForbidden", Field: "metadata.annotations[sandgate.dev/creator]",
		Message: "tenant team-a's claims are at their limit, 2 of 2 (ClaimPolicy quotas, spec.tenants[0].maxClaims)"}}
	if diff := cmp.Diff(wantCauses, s.Details.Causes); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("apierrors.IsTooManyRequests(%v) = false: a client's retry logic would not recognise it", err)
	}
}

// failingWrites is a writer whose every patch fails with err.
type failingWrites struct {
	noWrites
	err error
}

func (w failingWrites) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return w.err
}

// timeoutError is a network error that timed out, as a dial or read past its deadline.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestAClaimWhoseUsageCouldNotBeRecordedInTimeIsToldToRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantCode int32
	}{
		{"the API server's timeout", apierrors.NewTimeoutError("the write did not complete in time", 1), http.StatusServiceUnavailable},
		{"the API server's own server timeout", apierrors.NewServerTimeout(tenancyv1alpha1.GroupVersion.WithResource("claimledgers").GroupResource(), "patch", 1), http.StatusServiceUnavailable},
		{"the API server too busy", apierrors.NewTooManyRequests("busy", 1), http.StatusServiceUnavailable},
		{"the write's deadline", fmt.Errorf("patching: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{"a network timeout", &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: timeoutError{}}, http.StatusServiceUnavailable},
		{"anything else: the server's failure", errWrite, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeClient(quotas(), countedLedger("quotas.team-a", "team-a", "", 0))
			a := claimPolicies(c, failingWrites{err: tc.err})
			err := a.Admit(context.Background(), admissionRequest("alice", []string{"team-a"}, false), newClaim("c"))
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("Admit = %v, want an API status", err)
			}
			s := status.Status()
			if s.Code != tc.wantCode {
				t.Fatalf("status %+v: want code %d", s, tc.wantCode)
			}
			if tc.wantCode != http.StatusServiceUnavailable {
				return
			}
			if s.Details != nil && s.Details.RetryAfterSeconds != 0 {
				t.Errorf("retryAfterSeconds %d: client-go would retry inside the create, every client in step", s.Details.RetryAfterSeconds)
			}
			if !strings.Contains(s.Message, "could not be recorded in ClaimLedger ns/quotas.team-a in time") || !strings.Contains(s.Message, "retry") {
				t.Errorf("message %q: want the ledger and that a retry may succeed", s.Message)
			}
		})
	}
}

func TestAdmissionRecordsNothingAClientSupplies(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-a", "team-a", "", 0))
	a := claimPolicies(c, c)
	for name, annotations := range map[string]map[string]string{
		"another claim's reservation": {tenancyv1alpha1.AnnotationReservation: "0123456789abcdef01234567"},
		"someone else's groups":       {tenancyv1alpha1.AnnotationCreatorGroups: "team-b"},
	} {
		t.Run(name, func(t *testing.T) {
			claim := newClaim("c")
			claim.Annotations = annotations
			if err := a.Admit(context.Background(), admissionRequest("alice", []string{"team-a"}, false), claim); code(err) != 422 {
				t.Errorf("Admit = %v, want 422", err)
			}
		})
	}
}

func TestADryRunReservesNothingAndIsRefusedAsACreateWouldBe(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-b", "team-b", "pool", 1))
	a := claimPolicies(c, noWrites{c})
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, true), newClaim("c")); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a dry run beyond the limit: %v, want 429", err)
	}
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, true), builders.MakeClaim("c", "ns", "other").Obj()); err != nil {
		t.Errorf("a dry run within the limits: %v, want admitted without a write", err)
	}
}

// The stamping webhook calls admission of ClaimPolicies last, for new claims it admits.
func TestTheClaimStamperChecksClaimPolicies(t *testing.T) {
	c := fakeClient(quotas(), countedLedger("quotas.team-b", "team-b", "pool", 1))
	w := &webhooks.ClaimWebhook{APIReader: c, OperatorUser: operatorUser, Policies: claimPolicies(c, c)}
	err := w.Default(requestAs(authenticationv1.UserInfo{Username: "bob"}, admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj())
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("Default = %v, want 429", err)
	}
	claim := builders.MakeClaim("c", "ns", "pool").Obj()
	if err := w.Default(requestAs(authenticationv1.UserInfo{Username: "carol"}, admissionv1.Create), claim); err != nil {
		t.Fatalf("Default for a creator no limit applies to: %v", err)
	}
	if claim.Annotations[agentsv1beta1.AnnotationCreator] != "carol" {
		t.Errorf("annotations %v", claim.Annotations)
	}
}

func rates() *tenancyv1alpha1.ClaimPolicy {
	return builders.MakeClaimPolicy("quotas", "ns").
		Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(2)).
		Tenant(builders.MakeTenant("team-b").User("bob").PerPool("pool", 1).AdmissionRate(60, 1)).Obj()
}

// A claim beyond its tenant's admission rate is refused at once, before any reservation, with
// 429 saying the rate and when the next claim may come (no retryAfterSeconds, as for limits);
// the refusal is counted in the tenant's ledger. Another tenant's claims are not slowed.
func TestAClaimBeyondItsTenantsRateIsRefusedWith429(t *testing.T) {
	c := fakeClient(rates(), countedLedger("quotas.team-b", "team-b", "", 0), countedLedger("quotas.team-a", "team-a", "", 0))
	a := claimPolicies(c, c)
	a.Reserver.RefusalFlushDelay = time.Millisecond
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, false), newClaim("b-1")); err != nil {
		t.Fatalf("the first claim, within the burst: %v", err)
	}
	err := a.Admit(context.Background(), admissionRequest("bob", nil, false), builders.MakeClaim("b-2", "ns", "other").Obj())
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsTooManyRequests(err) {
		t.Fatalf("the second claim: %v, want 429", err)
	}
	s := status.Status()
	if s.Details == nil || s.Details.RetryAfterSeconds != 0 {
		t.Errorf("status %+v: want details without retryAfterSeconds", s)
	}
	for _, want := range []string{`"b-2" is refused by ClaimPolicy ns/quotas`, "tenant team-b's claims are admitted at most 60 a minute, 1 at once, and the next may be admitted in 1.0s",
		"(spec.tenants[1].admissionRate)", "ask your platform team to raise the rate"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("message %q lacks %q", s.Message, want)
		}
	}
	if len(s.Details.Causes) != 1 || s.Details.Causes[0].Field != "metadata.annotations[sandgate.dev/creator]" {
		t.Errorf("causes %+v: want one naming the creator", s.Details.Causes)
	}
	if err := a.Admit(context.Background(), admissionRequest("alice", []string{"team-a"}, false), newClaim("a-1")); err != nil {
		t.Errorf("team-a's claim while team-b is beyond its rate: %v", err)
	}
	// The refusal reaches the ledger, where the policy's status reads it.
	l := &tenancyv1alpha1.ClaimLedger{}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "quotas.team-b"}, l); err != nil {
			t.Fatal(err)
		}
		if len(l.Status.Refusals) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff([]tenancyv1alpha1.LedgerRefusals{{Tenant: "team-b", Count: 1}}, l.Status.Refusals); diff != "" {
		t.Errorf("the ledger's refusals (-want +got):\n%s", diff)
	}
}

// A claim refused for a limit after it took its rate's token gives it back: a tenant at its
// limit does not also use up its rate.
func TestAClaimRefusedForALimitGivesItsRateTokenBack(t *testing.T) {
	c := fakeClient(rates(), countedLedger("quotas.team-b", "team-b", "pool", 1))
	a := claimPolicies(c, c)
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, false), newClaim("b-1")); !apierrors.IsTooManyRequests(err) ||
		!strings.Contains(err.Error(), "spec.tenants[1].perPool[0].maxClaims") {
		t.Fatalf("a claim beyond the tenant's limit of pool: %v, want refused for it", err)
	}
	other := newClaim("b-2")
	other.Spec.WarmPoolRef.Name = "other"
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, false), other); err != nil {
		t.Errorf("a claim of another pool next: %v, want admitted with the token the refused claim gave back", err)
	}
}

// A dry run beyond the rate is refused as a create would be, and takes no token.
func TestADryRunTakesNoRateToken(t *testing.T) {
	c := fakeClient(rates(), countedLedger("quotas.team-b", "team-b", "", 0))
	a := claimPolicies(c, c)
	for i := range 3 {
		if err := a.Admit(context.Background(), admissionRequest("bob", nil, true), newClaim("b")); err != nil {
			t.Fatalf("dry run %d: %v", i, err)
		}
	}
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, false), newClaim("b-1")); err != nil {
		t.Fatalf("a create after dry runs: %v, want the burst's token still there", err)
	}
	if err := a.Admit(context.Background(), admissionRequest("bob", nil, true), newClaim("b-2")); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a dry run beyond the rate: %v, want 429", err)
	}
}
