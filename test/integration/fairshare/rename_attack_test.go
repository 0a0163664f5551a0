//go:build integration

package fairshare_test

import (
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// Claim renames: the attacks that try to move a claim to another tenant, or out of its
// tenant's count, after admission counted it.

// A claim cannot change tenant after its create. A tenant holding sandbox-tenant-role cannot
// write a claim at all; a namespace editor named as a tenant (sandbox-editor-role, aggregated
// into `edit`: the identity the other suites' attack tests use) may write its claims' labels
// and annotations, but not the identity admission recorded, nor the reservation: moving its
// claim to team-b's groups would free team-a's slot while the claim stays. (The rule:
// ValidateClaimUpdate keeps policy.sandgate.dev/creator-groups and policy.sandgate.dev/
// reservation as admission wrote them, as it keeps sandgate.dev/creator.)
func TestAttackAClaimCannotChangeTenantAfterItsCreate(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).
		Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(1)).
		Tenant(builders.MakeTenant("team-b").Group("team-b").MaxClaims(5)).Obj())
	mallory := e.userWithRole(framework.EditorRole, "mallory-editor", "team-a")
	trudy := e.tenant("trudy-tenant", "team-a")
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("own", e.ns, "pool").Obj())).To(Succeed())
	own := &extv1beta1.SandboxClaim{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key("own"), own)).To(Succeed())
	e.g.Expect(own.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.AnnotationCreatorGroups, ContainSubstring("team-a")))

	patch := func(annotations string) string { return `{"metadata":{"annotations":` + annotations + `}}` }
	for name, p := range map[string]string{
		"another tenant's groups": patch(`{"policy.sandgate.dev/creator-groups":"team-b"}`),
		"no groups":               patch(`{"policy.sandgate.dev/creator-groups":null}`),
		"another reservation":     patch(`{"policy.sandgate.dev/reservation":"0123456789abcdef01234567"}`),
		"no reservation":          patch(`{"policy.sandgate.dev/reservation":null}`),
		"another creator":         patch(`{"sandgate.dev/creator":"bob"}`),
	} {
		err := mergePatchAs(e, trudy, own.DeepCopy(), p)
		e.g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "tenant, %s: got %v, want 403", name, err)
		err = mergePatchAs(e, mallory, own.DeepCopy(), p)
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "editor, %s: got %v, want 422", name, err)
	}
	// Labels and annotations of its own are the claim's to change: they move nothing.
	e.g.Expect(mergePatchAs(e, mallory, own.DeepCopy(), `{"metadata":{"labels":{"team":"team-b"},"annotations":{"team":"team-b"}}}`)).To(Succeed())

	err := mallory.Create(e.ctx(), builders.MakeClaim("second", e.ns, "pool").Obj())
	e.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "team-a's claim still counts: got %v", err)
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(tenantStatus(st, "team-a").Claims).To(Equal(int32(1)))
		g.Expect(tenantStatus(st, "team-b").Claims).To(BeZero())
	})
}

// A reservation cannot be replayed through generateName. A tenant at its limit of one creates
// a claim with generateName, reads the reservation admission gave it, deletes the claim, and
// creates claims with generateName carrying that reservation, as a reinvocation of the first
// create's admission would: before the leader drops the spent reservation (here it never
// does: a cluster policy holds the ledger's reservations, as a leader lost to a fail-over
// would), every such claim would be taken for that one create. None is admitted. (The rule:
// admission names a claim that has only generateName itself, before it reserves it, so a
// reservation names its claim, and only a create of that very name is its reinvocation.)
func TestAttackAReservationCannotBeReplayedThroughGenerateName(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	// Two, one of which the probe below holds.
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("mallory").MaxClaims(2)).Obj())
	vap := ledgerUpdatePolicy("keep-reservations-"+e.ns,
		"!has(oldObject.status) || !has(oldObject.status.reservations) || oldObject.status.reservations.all(o, "+
			"has(object.status) && has(object.status.reservations) && object.status.reservations.exists(r, r.id == o.id))",
		"the ledger's reservations are kept")
	bindPolicy(e, vap, func(g Gomega) {
		l := &tenancyv1alpha1.ClaimLedger{}
		g.Expect(e.Client.Get(e.ctx(), e.key("quotas.team-a"), l)).To(Succeed())
		if len(l.Status.Reservations) == 0 {
			l.Status.Reservations = []tenancyv1alpha1.Reservation{{ID: "probe", Tenant: "team-a", At: metav1.NowMicro()}}
			g.Expect(e.Client.Update(e.ctx(), l)).To(Succeed())
		}
		l.Status.Reservations = nil
		g.Expect(e.Client.Update(e.ctx(), l, client.DryRunAll)).To(MatchError(ContainSubstring("kept")))
	})
	mallory := e.tenant("mallory")

	first := builders.MakeClaim("", e.ns, "pool").Obj()
	first.GenerateName = "gen-"
	e.g.Expect(mallory.Create(e.ctx(), first)).To(Succeed())
	id := first.Annotations[tenancyv1alpha1.AnnotationReservation]
	e.g.Expect(id).NotTo(BeEmpty(), "the create's answer carries its reservation")
	e.g.Expect(mallory.Delete(e.ctx(), first)).To(Succeed())
	// The operator's cache has seen the delete once it has seen a claim created after it.
	marker := builders.MakeClaim("marker", e.ns, "no-such-pool").Obj()
	e.create(marker)
	e.eventually(func(g Gomega) {
		g.Expect(e.claim(g, "marker").Status.Conditions).NotTo(BeEmpty())
	})

	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []string
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := builders.MakeClaim("", e.ns, "pool").Annotation(tenancyv1alpha1.AnnotationReservation, id).Obj()
			c.GenerateName = "gen-"
			err := mallory.Create(e.ctx(), c)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, c.Name)
			case !apierrors.IsInvalid(err):
				t.Errorf("replay %d: %v, want 422", i, err)
			}
		}()
	}
	wg.Wait()
	e.g.Expect(admitted).To(BeEmpty(), "claims admitted on a spent reservation")
	e.g.Expect(e.claimsBy(e.g)["mallory"]).To(BeZero())
}
