//go:build integration

package fairshare_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The attacks of issue 36 on ClaimPolicies. Each attacker holds only the shipped
// sandbox-tenant-role in the namespace and acts through the API server as themselves.

// A tenant cannot raise its own limits: it may read the namespace's policies (its usage is in
// their status) and write none of them, nor their status, nor their ledgers, nor make a
// policy of its own. (The rule: sandbox-tenant-role grants reads of claimpolicies only.)
func TestAttackATenantCannotRaiseItsOwnLimits(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("mallory").MaxClaims(1)).Obj())
	mallory := e.tenant("mallory")

	p := &tenancyv1alpha1.ClaimPolicy{}
	e.g.Expect(mallory.Get(e.ctx(), e.key("quotas"), p)).To(Succeed(), "a tenant reads its usage")
	l := &tenancyv1alpha1.ClaimLedger{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key("quotas.team-a"), l)).To(Succeed())

	attacks := map[string]func() error{
		"raise the limit": func() error {
			return mergePatchAs(e, mallory, p.DeepCopy(), `{"spec":{"tenants":[{"name":"team-a","subjects":[{"kind":"User","name":"mallory"}],"maxClaims":100}]}}`)
		},
		"raise its admission rate": func() error {
			return mergePatchAs(e, mallory, p.DeepCopy(), `{"spec":{"admissionRate":{"claimsPerMinute":600000,"burst":10000}}}`)
		},
		"update the policy": func() error {
			q := p.DeepCopy()
			q.Spec.Tenants[0].MaxClaims = ptrTo(int32(100))
			return mallory.Update(e.ctx(), q)
		},
		"delete the policy": func() error { return mallory.Delete(e.ctx(), p.DeepCopy()) },
		"write its status": func() error {
			return mallory.Status().Patch(e.ctx(), p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"status":{"claims":0}}`)))
		},
		"make a policy of its own": func() error {
			return mallory.Create(e.ctx(), builders.MakeClaimPolicy("mine", e.ns).Tenant(builders.MakeTenant("me").User("mallory").MaxClaims(100)).Obj())
		},
		"empty the ledger": func() error {
			return mergePatchAs(e, mallory, l.DeepCopy(), `{"status":{"counted":null,"reservations":null}}`)
		},
		"delete the ledger": func() error { return mallory.Delete(e.ctx(), l.DeepCopy()) },
	}
	for name, attack := range attacks {
		err := attack()
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: got %v, want 403", name, err)
	}
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("one", e.ns, "pool").Obj())).To(Succeed())
	err := mallory.Create(e.ctx(), builders.MakeClaim("two", e.ns, "pool").Obj())
	e.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "the limit still holds: got %v", err)
}

func mergePatchAs(e *env, c client.Client, obj client.Object, patch string) error {
	return c.Patch(e.ctx(), obj, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

// A tenant cannot count against another tenant: the identity a claim counts by is the one
// that created it, recorded by admission; a creator, groups or reservation a client supplies
// is refused, and a tenant's claims count against its own limit however they are labelled.
// (The rules: admission sets sandgate.dev/creator, policy.sandgate.dev/creator-groups and
// policy.sandgate.dev/reservation and refuses values a client supplies.)
func TestAttackATenantCannotCountAgainstAnotherTenant(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).
		Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(1)).
		Tenant(builders.MakeTenant("team-b").Group("team-b").MaxClaims(5)).Obj())
	mallory := e.tenant("mallory-in-team-a", "team-a")
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("own", e.ns, "pool").Obj())).To(Succeed())

	for name, annotations := range map[string]map[string]string{
		"another creator":                 {agentsv1beta1.AnnotationCreator: "bob"},
		"another tenant's groups":         {tenancyv1alpha1.AnnotationCreatorGroups: "team-b"},
		"a reservation of its own making": {tenancyv1alpha1.AnnotationReservation: "0123456789abcdef01234567"},
	} {
		c := builders.MakeClaim("forged", e.ns, "pool").Obj()
		c.Annotations = annotations
		err := mallory.Create(e.ctx(), c)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: got %v, want 422", name, err)
	}
	// Labelled as the other team's, still mallory's.
	err := mallory.Create(e.ctx(), builders.MakeClaim("labelled", e.ns, "pool").Label("sandbox.users.io/team", "team-b").PodLabel("sandbox.users.io/team", "team-b").Obj())
	e.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v, want team-a's limit", err)
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(tenantStatus(st, "team-a").Claims).To(Equal(int32(1)))
		g.Expect(tenantStatus(st, "team-b").Claims).To(BeZero())
	})
}

// The deprecated v1alpha1 API is no way around a limit: its claims are converted and admitted
// as v1beta1's. (The rule: the stamping webhook matches every version, matchPolicy Equivalent.)
func TestAttackTheV1alpha1APIIsLimitedToo(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("mallory").MaxClaims(1)).Obj())
	mallory := e.tenant("mallory")
	claim := func(name string) *extv1alpha1.SandboxClaim {
		return &extv1alpha1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec: extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "tmpl"}}}
	}
	e.g.Expect(mallory.Create(e.ctx(), claim("one"))).To(Succeed())
	err := mallory.Create(e.ctx(), claim("two"))
	e.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v, want 429", err)
}

// A tenant cannot get a Sandbox beside its claims: the tenant role creates no Sandboxes (a
// user who may, and may create pods, is the platform's, beyond claim policies as beyond
// claims). (The rule: sandbox-tenant-role grants reads of sandboxes only.)
func TestAttackATenantCannotCreateASandboxDirectly(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("mallory").MaxClaims(0)).Obj())
	mallory := e.tenant("mallory")
	err := mallory.Create(e.ctx(), builders.MakeSandbox("mine", e.ns).Obj())
	e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v, want 403", err)
	e.g.Expect(err).To(MatchError(ContainSubstring(`cannot create resource "sandboxes"`)), "refused by RBAC")
}

// Deleting and recreating claims under the same names, concurrently, never lets a tenant have
// more claims than its limit, and the usage the policy shows ends equal to the claims that
// exist. (The rules: a claim counts until it is gone, and a reservation is spent only by the
// claim that carries its ID, never by a claim of the same name.)
func TestAttackDeleteAndRecreateRacesStayWithinTheLimit(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("mallory").MaxClaims(3)).Obj())
	mallory := e.tenant("mallory")

	var most atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var list extv1beta1.SandboxClaimList
			if e.Client.List(e.ctx(), &list, client.InNamespace(e.ns)) == nil {
				if n := int64(len(list.Items)); n > most.Load() {
					most.Store(n)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for worker := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 15 {
				name := fmt.Sprintf("c%d", (worker+round)%4)
				c := builders.MakeClaim(name, e.ns, "pool").Obj()
				if err := mallory.Create(e.ctx(), c); err == nil || apierrors.IsAlreadyExists(err) {
					_ = mallory.Delete(e.ctx(), c)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	e.g.Expect(most.Load()).To(BeNumerically("<=", 3), "the tenant had %d claims at once, its limit is 3", most.Load())
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(st.Claims).To(Equal(int32(e.claimsBy(g)["mallory"])))
		g.Expect(st.Reserved).To(BeZero())
	})
}

// One tenant cannot make admission slow or fail for another: a policy without namespace-wide
// limits keeps a ledger per tenant, so one tenant's reservations never share a write (or a
// conflict) with another's. Here team-b's ledger cannot be written at all (a cluster policy
// refuses every write adding a team-b reservation, the extreme of contention): team-b's
// claims fail closed, team-a's are admitted as if nothing happened. (The rule: a ledger per
// tenant, fairshare.Ledgers.)
func TestAttackOneTenantsContentionDoesNotReachAnother(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).
		Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(20)).
		Tenant(builders.MakeTenant("team-b").User("mallory").MaxClaims(20)).Obj())
	vap := ledgerUpdatePolicy("no-team-b-"+e.ns,
		"!has(object.status) || !has(object.status.reservations) || !object.status.reservations.exists(r, has(r.tenant) && r.tenant == 'team-b' && "+
			"!(has(oldObject.status) && has(oldObject.status.reservations) && oldObject.status.reservations.exists(o, o.id == r.id)))",
		"team-b's ledger is jammed")
	bindPolicy(e, vap, func(g Gomega) {
		var ls tenancyv1alpha1.ClaimLedgerList
		g.Expect(e.Client.List(e.ctx(), &ls, client.InNamespace(e.ns))).To(Succeed())
		g.Expect(ls.Items).NotTo(BeEmpty())
		l := &ls.Items[len(ls.Items)-1]
		l.Status.Reservations = append(l.Status.Reservations, tenancyv1alpha1.Reservation{ID: "probe", Tenant: "team-b", At: metav1.NowMicro()})
		g.Expect(e.Client.Update(e.ctx(), l, client.DryRunAll)).To(MatchError(ContainSubstring("jammed")))
	})
	alice, mallory := e.tenant("alice"), e.tenant("mallory")

	var wg sync.WaitGroup
	var aliceErrs, malloryAdmitted atomic.Int64
	for i := range 10 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if mallory.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("b%d", i), e.ns, "pool").Obj()) == nil {
				malloryAdmitted.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			if err := alice.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("a%d", i), e.ns, "pool").Obj()); err != nil {
				t.Errorf("alice's claim %d: %v", i, err)
				aliceErrs.Add(1)
			}
		}()
	}
	wg.Wait()
	e.g.Expect(aliceErrs.Load()).To(BeZero())
	e.g.Expect(malloryAdmitted.Load()).To(BeZero(), "team-b's claims were admitted without their reservation")
	e.eventually(func(g Gomega) { g.Expect(tenantStatus(e.status(g, "quotas"), "team-a").Claims).To(Equal(int32(10))) })
}

// A tenant cannot take the API server from the others by bursting: its claims beyond its
// admission rate are refused at once with 429, before any reservation, while another
// tenant's claims at the same moments are all admitted, and the refusals show in the policy's
// status (counted in the other tenant's ledger: team-b has no limit that keeps one). (The
// rule: spec.tenants[].admissionRate, a bucket admission takes a token from per claim.)
func TestAttackATenantsBurstBeyondItsRateIsRefusedAtOnce(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).
		Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(20)).
		Tenant(builders.MakeTenant("team-b").User("mallory").AdmissionRate(60, 3)).Obj())
	alice, mallory := e.tenant("alice"), e.tenant("mallory")

	var wg sync.WaitGroup
	var malloryAdmitted, malloryRefused atomic.Int64
	start := time.Now()
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := mallory.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("b%d", i), e.ns, "pool").Obj())
			switch {
			case err == nil:
				malloryAdmitted.Add(1)
			case apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "spec.tenants[1].admissionRate"):
				malloryRefused.Add(1)
			default:
				t.Errorf("mallory's claim %d: %v, want admitted or refused for team-b's admission rate", i, err)
			}
		}()
		if i%2 == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := alice.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("a%d", i), e.ns, "pool").Obj()); err != nil {
					t.Errorf("alice's claim %d: %v", i, err)
				}
			}()
		}
	}
	wg.Wait()
	// Three at once, then one a second: what the burst took, plus what the rate refilled.
	allowed := 3 + int64(time.Since(start).Seconds())
	e.g.Expect(malloryAdmitted.Load()).To(And(BeNumerically(">=", 3), BeNumerically("<=", allowed)), "team-b admitted beyond its rate")
	e.g.Expect(malloryAdmitted.Load() + malloryRefused.Load()).To(Equal(int64(20)))
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(tenantStatus(st, "team-b").Refusals).To(Equal(malloryRefused.Load()))
		g.Expect(tenantStatus(st, "team-a").Claims).To(Equal(int32(10)))
	})
}
