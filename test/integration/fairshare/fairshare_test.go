//go:build integration

package fairshare_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// A claim beyond its tenant's limit is refused, as a client of the API server receives it:
// 429 Too Many Requests (apierrors.IsTooManyRequests, what retry logic recognises), without a
// Retry-After (client-go would retry by itself inside Create, the public SDK's create would
// hang), at the first attempt (the ledger counts one refusal), with a message that names the
// policy, the limit, the usage and what to do.
func TestAClaimBeyondALimitIsRefusedWith429AndAMessage(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(2).Obj())
	e.policy(builders.MakeClaimPolicy("team-quotas", e.ns).
		Tenant(builders.MakeTenant("team-a").Group("team-a").MaxClaims(2)).Obj())
	alice := e.tenant("alice-in-team-a", "team-a")

	for i := range 2 {
		e.g.Expect(alice.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("c%d", i), e.ns, "pool").Obj())).To(Succeed())
	}
	err := alice.Create(e.ctx(), builders.MakeClaim("c2", e.ns, "pool").Obj())
	e.g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "got %v, want 429", err)
	s := errStatus(err)
	e.g.Expect(s.Code).To(Equal(int32(http.StatusTooManyRequests)))
	_, delay := apierrors.SuggestsClientDelay(err)
	e.g.Expect(delay).To(BeFalse(), "a Retry-After makes client-go retry inside Create")
	for _, want := range []string{
		`admission webhook "stamp.sandboxclaims.extensions.agents.x-k8s.io" denied the request`,
		"refused by ClaimPolicy " + e.ns + "/team-quotas",
		"tenant team-a's claims are at their limit, 2 of 2 (spec.tenants[0].maxClaims)",
		"delete one of them, or ask your platform team to raise the limit",
	} {
		e.g.Expect(s.Message).To(ContainSubstring(want))
	}
	e.g.Expect(s.Details).NotTo(BeNil())
	e.g.Expect(s.Details.Causes).To(ConsistOf(HaveField("Field", "metadata.annotations[sandgate.dev/creator]")))
	e.g.Expect(apierrors.IsNotFound(e.Client.Get(e.ctx(), e.key("c2"), &extv1beta1.SandboxClaim{}))).To(BeTrue(), "the refused claim exists")
	e.eventually(func(g Gomega) {
		st := e.status(g, "team-quotas")
		a := tenantStatus(st, "team-a")
		g.Expect(a.Claims).To(Equal(int32(2)))
		g.Expect(a.Refusals).To(Equal(int64(1)), "one create, one refusal: the client did not retry")
	})
}

// Two tenants burst at once against two webhook replicas (the API server's requests go to
// each in turn): the namespace's limit of 15 and each tenant's of 10 are never passed, and
// the usage the status shows is the claims that exist, its refusals the refusals the clients
// got (a write of one replica that overwrote the other's would lose some).
func TestUsageIsExactUnderABurstOfTwoTenantsAgainstTwoReplicas(t *testing.T) {
	e := setup(t)
	r := e.startReplicas(nil)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(5).Obj())
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).MaxClaims(15).
		Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(10)).
		Tenant(builders.MakeTenant("team-b").User("bob").MaxClaims(10)).Obj())
	tenants := map[string]client.Client{"alice": e.tenant("alice"), "bob": e.tenant("bob")}

	const perTenant = 60
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for user, c := range tenants {
		for i := range perTenant {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := c.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("%s-%d", user, i), e.ns, "pool").Obj())
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					admitted[user]++
				case !apierrors.IsTooManyRequests(err):
					t.Errorf("%s's claim %d: %v, want admitted or 429", user, i, err)
				}
			}()
		}
	}
	wg.Wait()
	e.g.Expect(admitted["alice"]+admitted["bob"]).To(Equal(15), "admitted %v: the namespace's limit is 15", admitted)
	e.g.Expect(admitted["alice"]).To(BeNumerically("<=", 10))
	e.g.Expect(admitted["bob"]).To(BeNumerically("<=", 10))
	e.g.Expect(r.served[0].Load()).To(BeNumerically(">", 0), "replica 0 admitted nothing")
	e.g.Expect(r.served[1].Load()).To(BeNumerically(">", 0), "replica 1 admitted nothing")
	e.eventually(func(g Gomega) {
		exist := e.claimsBy(g)
		g.Expect(exist).To(Equal(map[string]int{"alice": admitted["alice"], "bob": admitted["bob"]}))
		st := e.status(g, "quotas")
		g.Expect(st.Claims).To(Equal(int32(15)))
		g.Expect(st.Reserved).To(BeZero(), "every reservation became a counted claim")
		g.Expect(tenantStatus(st, "team-a").Claims).To(Equal(int32(admitted["alice"])))
		g.Expect(tenantStatus(st, "team-b").Claims).To(Equal(int32(admitted["bob"])))
		g.Expect(tenantStatus(st, "team-a").Refusals + tenantStatus(st, "team-b").Refusals).To(Equal(int64(2*perTenant - 15)))
	})
}

// A claim deleted while it is being bound gives its slot back: the tenant at its limit of one
// creates and deletes at once, again and again, and each next create is admitted once the
// previous claim is gone.
func TestNoSlotLeaksWhenAClaimIsDeletedWhileBeingBound(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(3).Obj())
	e.waitPoolReady("pool", 3)
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(1)).Obj())
	alice := e.tenant("alice")
	for i := range 5 {
		c := builders.MakeClaim(fmt.Sprintf("c%d", i), e.ns, "pool").Obj()
		e.eventually(func(g Gomega) { g.Expect(alice.Create(e.ctx(), c)).To(Succeed()) })
		e.g.Expect(alice.Delete(e.ctx(), c)).To(Succeed())
	}
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(st.Claims).To(BeZero(), "status %+v", st)
		g.Expect(e.claimsBy(g)).To(BeEmpty())
	})
	// The status stops counting a claim the moment the leader's cache shows it gone; admission
	// counts by the ledger, which the leader recounts and writes a moment later. Within the
	// timeout, far below the reservation TTL (2 minutes), the slot is back: a leaked one is not.
	e.eventually(func(g Gomega) {
		g.Expect(alice.Create(e.ctx(), builders.MakeClaim("last", e.ns, "pool").Obj())).To(Succeed())
	})
}

// A create refused after admission reserved it (here by a ValidatingAdmissionPolicy of the
// cluster, as a ResourceQuota or another webhook would) holds its slot until the reservation
// TTL ends it, never longer.
func TestASlotReservedForACreateRefusedLaterComesBack(t *testing.T) {
	e := setup(t)
	e.startManager(func(o *operator.Options) { o.ClaimReservationTTL = 3 * time.Second })
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(1).Obj())
	e.policy(builders.MakeClaimPolicy("quotas", e.ns).Tenant(builders.MakeTenant("team-a").User("alice").MaxClaims(1)).Obj())
	refuseLabelled(e, "refused-later", "sandbox.users.io/refuse")
	alice := e.tenant("alice")

	refused := builders.MakeClaim("refused", e.ns, "pool").Label("sandbox.users.io/refuse", "yes").Obj()
	err := alice.Create(e.ctx(), refused)
	e.g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "got %v, want the cluster's policy to refuse it", err)
	e.eventually(func(g Gomega) {
		g.Expect(e.status(g, "quotas").Reserved).To(Equal(int32(1)), "admission reserved it before the later refusal")
	})
	e.eventually(func(g Gomega) {
		g.Expect(alice.Create(e.ctx(), builders.MakeClaim("next", e.ns, "pool").Obj())).To(Succeed())
	})
	e.eventually(func(g Gomega) {
		st := e.status(g, "quotas")
		g.Expect(st.Claims).To(Equal(int32(1)))
		g.Expect(st.Reserved).To(BeZero())
	})
}

// refuseLabelled installs a ValidatingAdmissionPolicy refusing new claims of the namespace
// that carry label key: a refusal that comes after sandgate's mutating webhook.
func refuseLabelled(e *env, name, key string) {
	e.t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + e.ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"extensions.agents.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"sandboxclaims"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels)", key),
				Message:    "refused by the cluster's own policy",
			}},
		},
	}
	bindPolicy(e, policy, func(g Gomega) {
		probe := builders.MakeClaim("probe", e.ns, "pool").Label(key, "yes").Obj()
		g.Expect(e.Client.Create(e.ctx(), probe, client.DryRunAll)).To(MatchError(ContainSubstring("refused by the cluster's own policy")))
	})
}

// bindPolicy creates a ValidatingAdmissionPolicy bound to the test's namespace (deleted when
// the test ends) and waits until the API server enforces it, as enforced says.
// ledgerUpdatePolicy is a ValidatingAdmissionPolicy, for bindPolicy, that refuses every update
// of a ClaimLedger for which expression is false, with message.
func ledgerUpdatePolicy(name, expression, message string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"policy.sandgate.dev"}, APIVersions: []string{"*"}, Resources: []string{"claimledgers"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
}

func bindPolicy(e *env, policy *admissionregistrationv1.ValidatingAdmissionPolicy, enforced func(g Gomega)) {
	e.t.Helper()
	e.create(policy)
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}}},
		},
	}
	e.create(binding)
	e.t.Cleanup(func() {
		_ = e.Client.Delete(e.ctx(), binding)
		_ = e.Client.Delete(e.ctx(), policy)
	})
	// The API server applies a policy once its informer has it: a moment after the create.
	e.eventually(enforced)
}

// A tenant beyond its warm share is served cold at once (ServeCold), and the event says why;
// under Wait it waits with Ready=False BeyondWarmShare, and takes a warm member once it holds
// fewer.
func TestATenantBeyondItsWarmShareIsServedColdWithTheReason(t *testing.T) {
	e := setup(t)
	e.startManager(nil)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(4).Obj())
	e.waitPoolReady("pool", 4)
	e.policy(builders.MakeClaimPolicy("shares", e.ns).
		Tenant(builders.MakeTenant("prod").User("pat").WarmShare("pool", 2, -1)).
		Tenant(builders.MakeTenant("batch").User("bob").WarmShare("pool", 0, 1)).Obj())
	bob := e.tenant("bob")

	e.g.Expect(bob.Create(e.ctx(), builders.MakeClaim("first", e.ns, "pool").Obj())).To(Succeed())
	e.g.Expect(bob.Create(e.ctx(), builders.MakeClaim("second", e.ns, "pool").Obj())).To(Succeed())
	launch := func(g Gomega, claim string) string {
		c := e.claim(g, claim)
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady)).To(BeTrue())
		sb := e.boundSandbox(g, c)
		g.Expect(sb).NotTo(BeNil())
		return sb.Labels[agentsv1beta1.LabelLaunchType]
	}
	e.eventually(func(g Gomega) {
		g.Expect(launch(g, "first")).To(Equal(agentsv1beta1.LaunchTypeWarm))
		g.Expect(launch(g, "second")).To(Equal(agentsv1beta1.LaunchTypeCold))
		g.Expect(e.claimEvents(g, "second")).To(ContainElement(tenancyv1alpha1.ReasonBeyondWarmShare))
		g.Expect(e.claimEvents(g, "first")).NotTo(ContainElement(tenancyv1alpha1.ReasonBeyondWarmShare))
	})
	e.eventually(func(g Gomega) {
		batch := tenantStatus(e.status(g, "shares"), "batch")
		g.Expect(batch.WarmHits).To(Equal(int64(1)))
		g.Expect(batch.ColdStarts).To(Equal(int64(1)))
		g.Expect(batch.Pools).To(ConsistOf(HaveField("WarmHeld", int32(1))))
	})

	// Wait: the next claim beyond the share waits, and is served warm once first is gone.
	p := &tenancyv1alpha1.ClaimPolicy{}
	e.g.Expect(e.Client.Get(e.ctx(), e.key("shares"), p)).To(Succeed())
	e.g.Expect(mergePatch(e, p, `{"spec":{"whenBeyondWarmShare":"Wait"}}`)).To(Succeed())
	e.waitCounted("shares")
	e.g.Expect(bob.Create(e.ctx(), builders.MakeClaim("third", e.ns, "pool").Obj())).To(Succeed())
	e.eventually(func(g Gomega) {
		c := e.claim(g, "third")
		ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(tenancyv1alpha1.ReasonBeyondWarmShare))
		g.Expect(ready.Message).To(ContainSubstring("tenant batch holds 1 warm sandboxes of pool pool, the most its warm share allows"))
		g.Expect(e.boundSandbox(g, c)).To(BeNil())
	})
	e.g.Expect(bob.Delete(e.ctx(), e.claim(e.g, "first"))).To(Succeed())
	e.eventually(func(g Gomega) { g.Expect(launch(g, "third")).To(Equal(agentsv1beta1.LaunchTypeWarm)) })
}

func mergePatch(e *env, obj client.Object, patch string) error {
	return e.Client.Patch(e.ctx(), obj, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

func ptrTo[T any](v T) *T { return &v }
