package reconcilers

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

var keyH1 = memberKey{Namespace: "ns", Pool: "p", Hash: "h1"}

// pickAll picks every available member of key and returns their names, sorted.
func pickAll(x *warmIndex, key memberKey) []string {
	var names []string
	for {
		sb, ok := x.Pick(key)
		if !ok {
			sort.Strings(names)
			return names
		}
		names = append(names, sb.Name)
	}
}

func TestWarmIndexMembership(t *testing.T) {
	bound := poolMember("bound", "h1", true, "1")
	bound.Labels[agentsv1beta1.LabelClaimUID] = "claim"
	deleting := poolMember("deleting", "h1", true, "1")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	notOwned := poolMember("look-alike", "h1", true, "1")
	notOwned.OwnerReferences = nil
	noHash := poolMember("no-hash", "", true, "1")
	boundA := poolMember("a", "h1", true, "2")
	boundA.Labels[agentsv1beta1.LabelClaimUID] = "claim"

	tests := map[string]struct {
		objects     []*agentsv1beta1.Sandbox
		forget      []string
		key         memberKey
		wantPicked  []string
		wantPending int
	}{
		"ready members of the key are available": {
			objects:    []*agentsv1beta1.Sandbox{poolMember("a", "h1", true, "1"), poolMember("b", "h1", true, "1")},
			key:        keyH1,
			wantPicked: []string{"a", "b"},
		},
		"members of another template version are not": {
			objects:    []*agentsv1beta1.Sandbox{poolMember("a", "h2", true, "1")},
			key:        keyH1,
			wantPicked: nil,
		},
		"not-ready members count as pending": {
			objects:     []*agentsv1beta1.Sandbox{poolMember("a", "h1", false, "1"), poolMember("b", "h1", true, "1")},
			key:         keyH1,
			wantPicked:  []string{"b"},
			wantPending: 1,
		},
		"bound, deleting, unowned and unhashed sandboxes are not members": {
			objects:    []*agentsv1beta1.Sandbox{bound, deleting, notOwned, noHash},
			key:        keyH1,
			wantPicked: nil,
		},
		"a member that becomes ready moves from pending to available": {
			objects:    []*agentsv1beta1.Sandbox{poolMember("a", "h1", false, "1"), poolMember("a", "h1", true, "2")},
			key:        keyH1,
			wantPicked: []string{"a"},
		},
		"a member that stops being ready is taken out": {
			objects:     []*agentsv1beta1.Sandbox{poolMember("a", "h1", true, "1"), poolMember("a", "h1", false, "2")},
			key:         keyH1,
			wantPicked:  nil,
			wantPending: 1,
		},
		"a member that gets bound is taken out": {
			objects:    []*agentsv1beta1.Sandbox{poolMember("a", "h1", true, "1"), boundA},
			key:        keyH1,
			wantPicked: nil,
		},
		"a deleted member is forgotten": {
			objects:     []*agentsv1beta1.Sandbox{poolMember("a", "h1", true, "1"), poolMember("b", "h1", false, "1")},
			forget:      []string{"a", "b"},
			key:         keyH1,
			wantPicked:  nil,
			wantPending: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			x := newWarmIndex()
			for _, sb := range tc.objects {
				x.Observe(sb)
			}
			for _, name := range tc.forget {
				x.Forget("ns", name)
			}
			available, pending := x.Counts(tc.key)
			if available != len(tc.wantPicked) || pending != tc.wantPending {
				t.Errorf("Counts = %d available, %d pending; want %d, %d", available, pending, len(tc.wantPicked), tc.wantPending)
			}
			if diff := cmp.Diff(tc.wantPicked, pickAll(x, tc.key)); diff != "" {
				t.Errorf("picked (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarmIndexReservation(t *testing.T) {
	tests := map[string]struct {
		outcome releaseOutcome
		// during is observed while the member is reserved, then after the release (nil:
		// nothing).
		during, then  *agentsv1beta1.Sandbox
		wantAvailable bool
		wantStarting  bool
	}{
		// A pool relabelled the member while a claim's binding was in flight: the 409 is
		// about a version the index already has, and no newer one is coming.
		"a member rejected for a version the informer superseded meanwhile is available again": {
			outcome: releaseRejected, during: poolMember("a", "h1", true, "2"), wantAvailable: true,
		},
		"a member rejected for a superseded version that is not ready is starting again": {
			outcome: releaseRejected, during: poolMember("a", "h1", false, "2"), wantStarting: true,
		},
		"retry makes the member available again": {
			outcome: releaseRetry, wantAvailable: true,
		},
		"a rejected member waits for a newer version": {
			outcome: releaseRejected, wantAvailable: false,
		},
		"a rejected member resynced at the same version stays out": {
			outcome: releaseRejected, then: poolMember("a", "h1", true, "1"), wantAvailable: false,
		},
		"a rejected member comes back with a newer version": {
			outcome: releaseRejected, then: poolMember("a", "h1", true, "2"), wantAvailable: true,
		},
		"a bound member never comes back at the version it was bound from": {
			outcome: releaseBound, then: poolMember("a", "h1", true, "1"), wantAvailable: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			x := newWarmIndex()
			x.Observe(poolMember("a", "h1", true, "1"))
			sb, ok := x.Pick(keyH1)
			if !ok {
				t.Fatal("Pick found nothing")
			}
			if _, again := x.Pick(keyH1); again {
				t.Fatal("a reserved member was picked twice")
			}
			// While reserved, informer updates do not make it available to others.
			x.Observe(poolMember("a", "h1", true, "1"))
			if _, again := x.Pick(keyH1); again {
				t.Fatal("a reserved member became available through an update")
			}
			if tc.during != nil {
				x.Observe(tc.during)
			}
			x.Release(sb, tc.outcome)
			if tc.then != nil {
				x.Observe(tc.then)
			}
			available, pending := x.Counts(keyH1)
			if got := available == 1; got != tc.wantAvailable {
				t.Errorf("available after release = %v, want %v", got, tc.wantAvailable)
			}
			if got := pending == 1; got != tc.wantStarting {
				t.Errorf("starting after release = %v, want %v", got, tc.wantStarting)
			}
		})
	}
}

func TestWarmIndexWaiters(t *testing.T) {
	x := newWarmIndex()
	first := types.NamespacedName{Namespace: "ns", Name: "first"}
	second := types.NamespacedName{Namespace: "ns", Name: "second"}
	gone := types.NamespacedName{Namespace: "ns", Name: "gone"}
	x.Wait(keyH1, gone)
	x.Wait(keyH1, first)
	x.Wait(keyH1, first) // waiting twice keeps one place
	x.Wait(keyH1, second)
	x.StopWaiting(gone)

	var woken []string
	for i, ready := range []bool{false, true, true, true} {
		if w, ok := x.Observe(poolMember(fmt.Sprint("m", i), "h1", ready, "1")); ok {
			woken = append(woken, w.Name)
		}
	}
	if diff := cmp.Diff([]string{"first", "second"}, woken); diff != "" {
		t.Errorf("woken claims (-want +got):\n%s", diff)
	}
	if w, ok := x.Observe(poolMember("other-version", "h2", true, "1")); ok {
		t.Errorf("a member of another key woke %v", w)
	}
}

// onNode is a ready member of keyH1 on node ("" for none).
func onNode(name, node string) *agentsv1beta1.Sandbox {
	sb := poolMember(name, "h1", true, "1")
	sb.Status.NodeName = node
	return sb
}

// The pick spreads claims over nodes as the public controller's NodeSpread does: the node with
// the most available members first, between equals the one whose oldest member is oldest, on
// it its oldest member; members on no node only when none is on one.
func TestWarmIndexSpreadsOverNodes(t *testing.T) {
	x := newWarmIndex()
	for _, sb := range []*agentsv1beta1.Sandbox{
		onNode("a1", "a"), onNode("a2", "a"), onNode("a3", "a"), onNode("b1", "b"), onNode("b2", "b"), onNode("c1", "c"), onNode("u1", ""),
	} {
		x.Observe(sb)
	}
	var got []string
	for {
		sb, ok := x.Pick(keyH1)
		if !ok {
			break
		}
		got = append(got, sb.Name)
	}
	want := []string{"a1", "a2", "b1", "a3", "b2", "c1", "u1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
}

// A member that reaches a node while available, and one released for retry, join the back of
// their node's queue.
func TestWarmIndexFollowsNodes(t *testing.T) {
	x := newWarmIndex()
	x.Observe(onNode("a1", "a"))
	x.Observe(onNode("x", ""))
	x.Observe(onNode("b1", "b"))
	x.Observe(onNode("x", "b")) // scheduled since: b has two now
	sb, _ := x.Pick(keyH1)
	if sb.Name != "b1" {
		t.Fatalf("picked %s, want b1 (b has the most members, b1 is its oldest)", sb.Name)
	}
	x.Release(sb, releaseRetry) // back in b's queue, behind x
	var got []string
	for {
		sb, ok := x.Pick(keyH1)
		if !ok {
			break
		}
		got = append(got, sb.Name)
	}
	if diff := cmp.Diff([]string{"x", "a1", "b1"}, got); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
	if available, _ := x.Counts(keyH1); available != 0 {
		t.Errorf("%d available after picking all, want 0", available)
	}
}

// BenchmarkWarmIndex picks a member and releases it for retry, the index's hot path, at two
// pool sizes spread over nodes: the cost per operation does not grow with the pool (a pick is
// O(log nodes)).
func BenchmarkWarmIndex(b *testing.B) {
	for _, size := range []struct{ members, nodes int }{{100, 10}, {10000, 100}} {
		fill := func(x *warmIndex) {
			for i := range size.members {
				x.Observe(onNode(fmt.Sprint("m", i), fmt.Sprint("node-", i%size.nodes)))
			}
		}
		b.Run(fmt.Sprintf("pick-release/pool=%d/nodes=%d", size.members, size.nodes), func(b *testing.B) {
			x := newWarmIndex()
			fill(x)
			b.ResetTimer()
			for b.Loop() {
				sb, ok := x.Pick(keyH1)
				if !ok {
					b.Fatal("pool exhausted")
				}
				x.Release(sb, releaseRetry)
			}
		})
		b.Run(fmt.Sprintf("pick-bind-observe/pool=%d/nodes=%d", size.members, size.nodes), func(b *testing.B) {
			// A binding cycle: pick, bind, the informer shows the member bound, the pool adds a
			// replacement.
			x := newWarmIndex()
			fill(x)
			n := size.members
			b.ResetTimer()
			for b.Loop() {
				sb, ok := x.Pick(keyH1)
				if !ok {
					b.Fatal("pool exhausted")
				}
				x.Release(sb, releaseBound)
				x.Forget(sb.Namespace, sb.Name)
				x.Observe(onNode(fmt.Sprint("m", n), sb.Status.NodeName))
				n++
			}
		})
	}
}

// starting is a member of keyH1 that is not ready, its pod's scheduling as scheduled says
// ("" for no condition yet: no pod, or not looked at by the scheduler).
func starting(name, rv string, scheduled metav1.ConditionStatus) *agentsv1beta1.Sandbox {
	sb := poolMember(name, "h1", false, rv)
	if scheduled != "" {
		sb.Status.Conditions = append(sb.Status.Conditions, metav1.Condition{Type: agentsv1beta1.ConditionPodScheduled, Status: scheduled})
	}
	return sb
}

// A claim that finds no ready member takes the member that started first, of those not known
// to be stuck; never one whose pod fits nowhere, and never a ready one (Pick's).
func TestWarmIndexPickStarting(t *testing.T) {
	x := newWarmIndex()
	x.Observe(starting("first", "1", ""))
	x.Observe(starting("stuck", "1", metav1.ConditionFalse))
	x.Observe(starting("scheduled", "1", metav1.ConditionTrue))
	x.Observe(poolMember("ready", "h1", true, "1"))

	var got []string
	for {
		sb, ok := x.PickStarting(keyH1)
		if !ok {
			break
		}
		got = append(got, sb.Name)
	}
	if diff := cmp.Diff([]string{"first", "scheduled"}, got); diff != "" {
		t.Errorf("starting picks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ready"}, pickAll(x, keyH1)); diff != "" {
		t.Errorf("ready picks (-want +got):\n%s", diff)
	}
	if available, pending := x.Counts(keyH1); available != 0 || pending != 1 {
		t.Errorf("Counts = %d available, %d pending; want 0, 1 (the stuck member, which claims still wait for)", available, pending)
	}
}

// A starting member a claim reserved stays the claim's while its bind is in flight, whatever
// the informer shows of it meanwhile; released for a retry it is there again, ready or not as
// it is now.
func TestWarmIndexStartingReservation(t *testing.T) {
	for name, tc := range map[string]struct {
		then          *agentsv1beta1.Sandbox
		wantStarting  bool
		wantAvailable bool
	}{
		"still starting: back among the starting": {then: starting("a", "2", metav1.ConditionTrue), wantStarting: true},
		"ready meanwhile: available":              {then: poolMember("a", "h1", true, "2"), wantAvailable: true},
	} {
		t.Run(name, func(t *testing.T) {
			x := newWarmIndex()
			x.Observe(starting("a", "1", ""))
			sb, ok := x.PickStarting(keyH1)
			if !ok {
				t.Fatal("PickStarting found nothing")
			}
			x.Observe(tc.then)
			if _, again := x.PickStarting(keyH1); again {
				t.Fatal("a reserved starting member was picked again after an update")
			}
			if _, again := x.Pick(keyH1); again {
				t.Fatal("a reserved starting member became available through an update")
			}
			x.Release(sb, releaseRetry)
			_, gotStarting := x.PickStarting(keyH1)
			available, _ := x.Counts(keyH1)
			if gotStarting != tc.wantStarting || (available == 1) != tc.wantAvailable {
				t.Errorf("after the release: starting %v, available %v; want %v, %v", gotStarting, available == 1, tc.wantStarting, tc.wantAvailable)
			}
		})
	}
}

// A member the pool creates wakes the claim that has waited longest, which takes it while it
// starts; one whose pod fits nowhere wakes nobody.
func TestWarmIndexNewStartingMemberWakesAWaiter(t *testing.T) {
	x := newWarmIndex()
	first := types.NamespacedName{Namespace: "ns", Name: "first"}
	second := types.NamespacedName{Namespace: "ns", Name: "second"}
	x.Wait(keyH1, first)
	x.Wait(keyH1, second)
	if w, ok := x.Observe(starting("stuck", "1", metav1.ConditionFalse)); ok {
		t.Errorf("a member that fits nowhere woke %v", w)
	}
	if w, ok := x.Observe(starting("new", "1", "")); !ok || w != first {
		t.Errorf("a new starting member woke %v (%v), want %v", w, ok, first)
	}
	if w, ok := x.Observe(starting("new", "2", metav1.ConditionTrue)); ok {
		t.Errorf("an update of a starting member woke %v: only its arrival or its readiness wakes a claim", w)
	}
	if w, ok := x.Observe(poolMember("new", "h1", true, "3")); !ok || w != second {
		t.Errorf("a member becoming ready woke %v (%v), want %v", w, ok, second)
	}
}
