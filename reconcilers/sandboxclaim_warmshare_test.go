package reconcilers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// heldClaim is a claim of pool "pool" by creator, bound to a warm member: the claim and its
// Sandbox.
func heldClaim(name, creator string) (*extv1beta1.SandboxClaim, *agentsv1beta1.Sandbox) {
	c := builders.MakeClaim(name, "ns", "pool").UID(types.UID(name+"-uid")).Annotation(agentsv1beta1.AnnotationCreator, creator).Obj()
	sb := builders.MakeSandbox(name+"-sb", "ns").Label(agentsv1beta1.LabelClaimUID, string(c.UID)).
		Label(agentsv1beta1.LabelLaunchType, agentsv1beta1.LaunchTypeWarm).
		ControlledBy(c, extv1beta1.GroupVersion.WithKind(claimKind)).Obj()
	return c, sb
}

// shareTest is a pool "pool" of two ready members, a claim "c" by creator, the claims held
// (bound warm) by the creators named, and policy.
func shareTest(t *testing.T, policy *tenancyv1alpha1.ClaimPolicy, creator string, holders ...string) (*fakeAPI, *claimReconciler) {
	t.Helper()
	tmpl, pool := testTemplate(), testPool(2)
	objs := []client.Object{tmpl, pool, policy, testClaim(tmpl, func(w *builders.ClaimWrapper) { w.Annotation(agentsv1beta1.AnnotationCreator, creator) })}
	for i, m := range []string{"pool-a", "pool-b"} {
		member := readyMember(pool, tmpl, m, fmt.Sprintf("10.0.0.%d", i+1))
		objs = append(objs, member, podOf(member))
	}
	for i, h := range holders {
		c, sb := heldClaim(fmt.Sprintf("held-%d", i), h)
		objs = append(objs, c, sb)
	}
	a := newFakeAPI(t, objs...)
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	r.meter = newPolicyMeter()
	var list agentsv1beta1.SandboxList
	if err := a.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		r.Index.Observe(&list.Items[i])
		r.shares.observe(&list.Items[i], false)
	}
	return a, r
}

func shares(action tenancyv1alpha1.WarmShareAction) *tenancyv1alpha1.ClaimPolicy {
	return builders.MakeClaimPolicy("shares", "ns").WhenBeyondWarmShare(action).
		Tenant(builders.MakeTenant("prod").User("pat").WarmShare("pool", 2, -1)).
		Tenant(builders.MakeTenant("batch").User("bob").WarmShare("pool", 0, 1)).Obj()
}

// The warm-share decision at bind time, on the claim controller: a claim within its share is
// bound warm; one beyond it is served cold or waits, as its policy says, and an event says why.
func TestClaimWarmShares(t *testing.T) {
	tests := map[string]struct {
		action  tenancyv1alpha1.WarmShareAction
		creator string
		holders []string
		// want: "warm", "cold" or "wait".
		want string
		// wantWhy is in the event's note (and the Ready message of a waiting claim).
		wantWhy string
	}{
		"prod within its guarantee": {action: tenancyv1alpha1.ServeCold, creator: "pat", holders: []string{"bob"}, want: "warm"},
		"batch at its max, ServeCold": {action: tenancyv1alpha1.ServeCold, creator: "bob", holders: []string{"bob", "pat", "pat"}, want: "cold",
			wantWhy: "tenant batch holds 1 warm sandboxes of pool pool, the most its warm share allows"},
		"batch at its max, Wait": {action: tenancyv1alpha1.Wait, creator: "bob", holders: []string{"bob", "pat", "pat"}, want: "wait",
			wantWhy: "tenant batch holds 1 warm sandboxes of pool pool"},
		"the ready members are prod's guarantee": {action: tenancyv1alpha1.ServeCold, creator: "bob", want: "cold",
			wantWhy: "pool pool has 2 warm sandboxes to take (ready or starting), no more than other tenants' guaranteed warm shares still need (prod 2 more"},
		"an unnamed creator, prod's guarantee met": {action: tenancyv1alpha1.ServeCold, creator: "mallory", holders: []string{"pat", "pat"}, want: "warm"},
		"an unnamed creator, members kept for prod": {action: tenancyv1alpha1.Wait, creator: "mallory", want: "wait",
			wantWhy: "prod 2 more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, r := shareTest(t, shares(tc.action), tc.creator, tc.holders...)
			reconcileClaim(t, r)
			journal := a.Journal()
			notes := strings.Join(a.Notes(), "\n")
			c := getClaim(t, a)
			bound := claimSandboxes(t, a, c.UID)
			switch tc.want {
			case "warm":
				if len(a.Binds()) != 1 || len(bound) != 1 || bound[0].Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeWarm {
					t.Errorf("want a warm binding; binds %v, journal %v", a.Binds(), journal)
				}
			case "cold":
				if len(a.Binds()) != 0 || len(bound) != 1 || bound[0].Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeCold {
					t.Errorf("want a cold start and no bind; binds %v, journal %v", a.Binds(), journal)
				}
			case "wait":
				ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
				if len(bound) != 0 || ready == nil || ready.Reason != tenancyv1alpha1.ReasonBeyondWarmShare || !strings.Contains(ready.Message, tc.wantWhy) {
					t.Errorf("want Ready=False BeyondWarmShare saying %q and no Sandbox; Ready %+v, journal %v", tc.wantWhy, ready, journal)
				}
			}
			hasEvent := false
			for _, e := range journal {
				hasEvent = hasEvent || e == "event Normal BeyondWarmShare SandboxClaim/c"
			}
			if want := tc.wantWhy != ""; hasEvent != want || !strings.Contains(notes, tc.wantWhy) {
				t.Errorf("BeyondWarmShare event %t (notes %q), want %t saying %q", hasEvent, notes, want, tc.wantWhy)
			}
		})
	}
}

// A claim that waits for its share takes a warm member once its tenant holds fewer: the
// claim that held one is gone.
func TestAClaimWaitingForItsShareIsServedWhenAHolderGoes(t *testing.T) {
	a, r := shareTest(t, shares(tenancyv1alpha1.Wait), "bob", "bob", "pat", "pat")
	reconcileClaim(t, r)
	if len(claimSandboxes(t, a, "claim-uid")) != 0 {
		t.Fatal("served beyond its share")
	}
	held := &extv1beta1.SandboxClaim{}
	if err := a.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "held-0"}, held); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	r.forget(types.NamespacedName{Namespace: "ns", Name: "held-0"})
	select {
	case e := <-r.bookkeepingWake:
		if e.Object.GetName() != "c" {
			t.Errorf("woke %s, want the waiting claim c", e.Object.GetName())
		}
	default:
		t.Fatal("the waiting claim was not woken when a holder went")
	}
	reconcileClaim(t, r)
	if bound := claimSandboxes(t, a, "claim-uid"); len(bound) != 1 || bound[0].Labels[agentsv1beta1.LabelLaunchType] != agentsv1beta1.LaunchTypeWarm {
		t.Errorf("bound %v, want one warm member", bound)
	}
}

// Two workers deciding claims of one tenant at once: the second sees the first's bind before
// the cache does, so a share's max is never passed.
func TestABindInFlightCountsAgainstTheShare(t *testing.T) {
	_, r := shareTest(t, builders.MakeClaimPolicy("shares", "ns").Tenant(builders.MakeTenant("batch").User("bob").WarmShare("pool", 0, 1)).Obj(), "bob")
	first := &claimStep{claim: builders.MakeClaim("first", "ns", "pool").UID("first-uid").Annotation(agentsv1beta1.AnnotationCreator, "bob").Obj()}
	second := &claimStep{claim: builders.MakeClaim("second", "ns", "pool").UID("second-uid").Annotation(agentsv1beta1.AnnotationCreator, "bob").Obj(), mem: &claimMemory{}}
	key := memberKey{Namespace: "ns", Pool: "pool", Hash: testClaim(testTemplate()).Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]}
	// Both claims must be in the cache for their holdings to count.
	if err := r.Client.Create(context.Background(), first.claim); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Create(context.Background(), second.claim); err != nil {
		t.Fatal(err)
	}
	_, nw, done, err := r.decideWarmShare(context.Background(), first, key)
	if err != nil || nw != nil {
		t.Fatalf("first claim: %v, %+v; want warm", err, nw)
	}
	_, nw, _, err = r.decideWarmShare(context.Background(), second, key)
	if err != nil || nw == nil {
		t.Fatalf("second claim while the first binds: %v, %+v; want not warm", err, nw)
	}
	done(false) // the first found no member after all
	if _, nw, _, err = r.decideWarmShare(context.Background(), second, key); err != nil || nw != nil {
		t.Errorf("second claim after the first's bind failed: %v, %+v; want warm", err, nw)
	}
}

// A claim beyond its guarantee whose pool's ready members another tenant's guarantee keeps
// takes a member that is starting, and leaves the ready ones to that tenant: prod's next
// claims are served at once, not after a member's start-up.
func TestAClaimBeyondItsGuaranteeTakesAStartingMemberFirst(t *testing.T) {
	a, r := shareTest(t, shares(tenancyv1alpha1.ServeCold), "bob")
	starting := startingMember(testPool(2), testTemplate(), "pool-c")
	if err := a.Create(context.Background(), starting); err != nil {
		t.Fatal(err)
	}
	r.Index.Observe(starting)
	reconcileClaim(t, r)
	binds := a.Binds()
	if len(binds) != 1 || binds[0].Sandbox != "pool-c" {
		t.Fatalf("binds %+v, want the starting member pool-c only; journal %v", binds, a.Journal())
	}
	if available, _ := r.Index.Counts(memberKey{Namespace: "ns", Pool: "pool", Hash: testClaim(testTemplate()).Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]}); available != 2 {
		t.Errorf("%d ready members left, want prod's 2", available)
	}
}
