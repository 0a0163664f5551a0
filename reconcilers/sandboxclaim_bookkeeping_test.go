package reconcilers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// At most limit claims hold a slot; the others wait in line and get a slot handed to them,
// first come first served, as slots are released; a claim that drops out of line is skipped,
// and one that drops a slot handed to it passes it on.
func TestBookkeepingSlots(t *testing.T) {
	nn := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	b := newBookkeepingSlots(2)
	for _, c := range []string{"a", "b"} {
		if !b.acquire(nn(c)) {
			t.Fatalf("%s got no slot with one free", c)
		}
	}
	for _, c := range []string{"c", "d", "e"} {
		if b.acquire(nn(c)) {
			t.Fatalf("%s got a slot with none free", c)
		}
	}
	if b.acquire(nn("c")) {
		t.Fatalf("c got a slot by asking again")
	}
	b.drop(nn("d")) // d's bookkeeping is done otherwise: out of line

	if diff := cmp.Diff([]types.NamespacedName{nn("c")}, b.release()); diff != "" {
		t.Errorf("a's release handed its slot to (-want +got):\n%s", diff)
	}
	if b.acquire(nn("f")) {
		t.Errorf("f, new, took a slot before e, who waits")
	}
	if !b.acquire(nn("c")) {
		t.Errorf("c, handed a slot, was refused it")
	}
	if diff := cmp.Diff([]types.NamespacedName{nn("e")}, b.release()); diff != "" {
		t.Errorf("b's release handed its slot to (-want +got):\n%s", diff)
	}
	// e is gone before it used its slot: the slot goes on to f.
	if diff := cmp.Diff([]types.NamespacedName{nn("f")}, b.drop(nn("e"))); diff != "" {
		t.Errorf("e's drop handed its slot to (-want +got):\n%s", diff)
	}
	if !b.acquire(nn("f")) {
		t.Errorf("f, handed a slot, was refused it")
	}
	b.release() // c
	b.release() // f
	if !b.acquire(nn("g")) || !b.acquire(nn("h")) || b.acquire(nn("i")) {
		t.Errorf("with every slot released: want two free again")
	}
}

// Past their bound while claims still come, bound claims write their bookkeeping one slot at
// a time: a claim finding every slot taken writes nothing, and is woken, and writes, once a
// slot is released to it. At a pause no slot is needed.
func TestBookkeepingUnderTrafficWaitsForASlot(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(1)
	c := claim(func(w *builders.ClaimWrapper) { w.StatusSandbox("m") })
	sb := readyMember(pool, tmpl, "m", "10.0.0.1")
	bindReady(c, sb, planNow.Add(-time.Minute)) // long past its bound
	a := newFakeAPI(t, tmpl, pool, c, sb, podOf(sb))
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	r.BookkeepingDelay, r.MaxBookkeepingDelay = time.Second, 3*time.Second
	r.slots = newBookkeepingSlots(1)
	observeSandboxes(t, a, r.Index)
	poolKey := types.NamespacedName{Namespace: "ns", Name: "pool"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	if !r.slots.acquire(other) {
		t.Fatal("the other claim got no slot")
	}

	r.activity.touch(poolKey, clk.Now()) // claims arriving
	res := reconcileClaim(t, r)
	if writes := writesOf(a.Journal()); len(writes) > 0 {
		t.Errorf("every slot taken: wrote %v, want nothing", writes)
	}
	if res.RequeueAfter < r.MaxBookkeepingDelay {
		t.Errorf("requeue after %s, want no sooner than the bound (%s): it is woken when its turn comes", res.RequeueAfter, r.MaxBookkeepingDelay)
	}
	r.wakeBookkeeping(r.slots.release()) // the other claim is done
	select {
	case ev := <-r.bookkeepingWake:
		if ev.Object.GetName() != "c" {
			t.Fatalf("woke %s, want c", ev.Object.GetName())
		}
	default:
		t.Fatal("the released slot woke no one")
	}
	reconcileClaim(t, r)
	got := getClaim(t, a)
	if got.Annotations[agentsv1beta1.AnnotationSandboxName] != "m" {
		t.Errorf("after its turn came: sandbox-name %q, want m", got.Annotations[agentsv1beta1.AnnotationSandboxName])
	}
	if !r.slots.acquire(other) {
		t.Errorf("c kept its slot after writing")
	}
}

// A claim whose bookkeeping waits for a slot is deleted: the slot handed to it goes on.
func TestDeletedClaimPassesItsBookkeepingSlotOn(t *testing.T) {
	a := newFakeAPI(t)
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	r.slots = newBookkeepingSlots(1)
	held, gone, next := types.NamespacedName{Namespace: "ns", Name: "held"}, types.NamespacedName{Namespace: "ns", Name: "gone"}, types.NamespacedName{Namespace: "ns", Name: "next"}
	r.slots.acquire(held)
	r.slots.acquire(gone)
	r.slots.acquire(next)
	r.slots.release() // to gone
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: gone}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-r.bookkeepingWake:
		if ev.Object.GetName() != "next" {
			t.Errorf("woke %s, want next", ev.Object.GetName())
		}
	default:
		t.Error("the deleted claim's slot woke no one")
	}
}

// A served claim's bookkeeping is queued behind the claims still to be served: its requeues
// carry the background priority.
func TestServedClaimBookkeepingIsBackground(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(1)
	member := readyMember(pool, tmpl, "pool-a", "10.0.0.1")
	a := newFakeAPI(t, tmpl, pool, testClaim(tmpl), member, podOf(member))
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	r.BookkeepingDelay = time.Second
	observeSandboxes(t, a, r.Index)
	// A claim of the pool is still arriving: the bookkeeping waits for the pause.
	r.activity.touch(types.NamespacedName{Namespace: "ns", Name: "pool"}, planNow)

	if res := reconcileClaim(t, r); res.Priority != nil {
		t.Errorf("the reconcile that served the claim requeues at priority %d, want its own kept", *res.Priority)
	}
	observeSandboxes(t, a, r.Index)
	for i := range 2 {
		res := reconcileClaim(t, r)
		if res.RequeueAfter <= 0 || res.Priority == nil || *res.Priority != priorityBackground {
			t.Errorf("reconcile %d of the served claim: requeue after %s at priority %v, want a requeue at %d", i+2, res.RequeueAfter, res.Priority, priorityBackground)
		}
	}
}

// A claim deleted while its cache still shows it: its bookkeeping's annotation patch answers
// 404, and the reconcile writes nothing more (no ReconcilerError status, itself a second 404)
// and forgets the claim.
func TestBookkeepingOfAClaimDeletedMeanwhileWritesNoStatus(t *testing.T) {
	tmpl, pool := testTemplate(), testPool(1)
	c := claim(func(w *builders.ClaimWrapper) { w.StatusSandbox("m") })
	sb := readyMember(pool, tmpl, "m", "10.0.0.1")
	bindReady(c, sb, planNow.Add(-time.Minute)) // long past its bound: its bookkeeping is due
	a := newFakeAPI(t, tmpl, pool, c, sb, podOf(sb))
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	observeSandboxes(t, a, r.Index)
	a.FailOnce("patch SandboxClaim/c", apierrors.NewNotFound(schema.GroupResource{Group: "extensions.agents.x-k8s.io", Resource: "sandboxclaims"}, "c"))

	res := reconcileClaim(t, r)
	if diff := cmp.Diff([]string{"patch SandboxClaim/c (not_found)"}, writesOf(a.Journal())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeued after %s, want nothing more for a claim that is gone", res.RequeueAfter)
	}
	r.mu.Lock()
	_, remembered := r.claims[client.ObjectKeyFromObject(c)]
	r.mu.Unlock()
	if remembered {
		t.Error("the claim's memory was kept")
	}
}
