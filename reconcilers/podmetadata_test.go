package reconcilers

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// TestARoutedPodIsNotUnroutedByAnOlderSandbox: the claim's route write (claim-uid on the pod,
// the warm-pool label off) is made from the Sandbox its bind patch answered; a Sandbox
// controller whose cache still shows the member unbound, while its pod cache already shows
// the route, must not write the pod back to the unbound member's metadata — neither in the
// process that wrote the route (its writers share what they wrote) nor in another one, after
// a restart or a failover (the pod itself says which Sandbox its metadata is from). Once its
// cache shows the bound Sandbox, it finishes what the claim path left (nothing of the route).
func TestARoutedPodIsNotUnroutedByAnOlderSandbox(t *testing.T) {
	for name, sharedViews := range map[string]bool{
		"same process":                          true,
		"another process (restart or failover)": false,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tmpl, pool := testTemplate(), testPool(1)
			member := readyMember(pool, tmpl, "pool-a", "10.0.0.5") // sandboxPod's IP
			member.Annotations[agentsv1beta1.AnnotationPodName] = member.Name
			pod := podOf(member)
			pod.Spec.NodeName = "node-1"
			pod.Status = sandboxPod(member, true).Status
			a := newFakeAPI(t, tmpl, pool, testClaim(tmpl), member, pod)
			key := types.NamespacedName{Namespace: "ns", Name: "pool-a"}
			unbound := &agentsv1beta1.Sandbox{}
			if err := a.Get(ctx, key, unbound); err != nil {
				t.Fatal(err)
			}

			clk := clocktesting.NewFakeClock(planNow)
			claims := newClaimReconciler(t, a, clk)
			observeSandboxes(t, a, claims.Index)
			reconcileClaim(t, claims)
			if got := getClaim(t, a); got.Status.Sandbox.Name != "pool-a" {
				t.Fatalf("the claim is not bound to pool-a: %+v", got.Status)
			}
			wantRouted := func(step string) {
				t.Helper()
				pod := &corev1.Pod{}
				if err := a.Get(ctx, key, pod); err != nil {
					t.Fatal(err)
				}
				if got := pod.Labels[agentsv1beta1.LabelClaimUID]; got != "claim-uid" {
					t.Errorf("%s: pod label %s = %q, want %q: the Ready claim is routed nowhere", step, agentsv1beta1.LabelClaimUID, got, "claim-uid")
				}
				if got, has := pod.Labels[agentsv1beta1.LabelWarmPoolSandbox]; has {
					t.Errorf("%s: pod has %s=%q again: the router takes it for an idle pool member", step, agentsv1beta1.LabelWarmPoolSandbox, got)
				}
				if got, has := pod.Annotations[AnnotationSafeToEvict]; has {
					t.Errorf("%s: the claimed pod is marked %s=%q again", step, AnnotationSafeToEvict, got)
				}
			}
			wantRouted("after the claim's route write")

			sandboxes := newSandboxReconciler(t, a, clk)
			if sharedViews {
				sandboxes.podViews = claims.podViews
			} else {
				sandboxes.podViews = newPodMetadataViews(clk)
			}
			served := sandboxes.Client
			sandboxes.Client = &laggingCache{Client: served, old: unbound}
			a.Journal()
			res, err := sandboxes.Reconcile(ctx, ctrl.Request{NamespacedName: key})
			if err != nil {
				t.Fatalf("Reconcile from the older Sandbox: %v", err)
			}
			wantRouted("after a Sandbox reconcile from the older Sandbox")
			for _, w := range writesOf(a.Journal()) {
				if w == "patch Pod/pool-a" {
					t.Errorf("the pod was patched from the older Sandbox")
				}
			}
			if res.RequeueAfter == 0 {
				t.Errorf("no requeue: the Sandbox must look again once its cache shows the bound Sandbox")
			}
			if got := testutil.ToFloat64(sandboxes.Metrics.staleViews.WithLabelValues(sandboxControllerName)); got != 1 {
				t.Errorf("stale views counted = %v, want 1", got)
			}

			// The cache catches up: the route stays, and nothing is left to write.
			sandboxes.Client = served
			if _, err := sandboxes.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatalf("Reconcile from the bound Sandbox: %v", err)
			}
			wantRouted("after a Sandbox reconcile from the bound Sandbox")
			for _, w := range writesOf(a.Journal()) {
				if w == "patch Pod/pool-a" {
					t.Errorf("the pod was patched again although the claim path wrote all of it")
				}
			}
		})
	}
}

// TestSyncPodMetadata: which view of the Sandbox may write the pod's metadata, by the
// resourceVersion the pod records and the one this process last wrote from.
func TestSyncPodMetadata(t *testing.T) {
	sbAt := func(rv string) *agentsv1beta1.Sandbox {
		sb := testSandbox()
		sb.ResourceVersion = rv
		return sb
	}
	// podFrom is sb's pod as it stood before the Sandbox took its podTemplate's "note"
	// annotation: one key to write.
	podFrom := func(recorded string) *corev1.Pod {
		pod := sandboxPod(testSandbox(), true)
		delete(pod.Annotations, "note")
		if recorded != "" {
			pod.Annotations[annotationPodMetadataFrom] = recorded
		}
		return pod
	}
	tests := map[string]struct {
		recorded, remembered, view string
		want                       podMetadataOutcome
		wantRecorded               string
	}{
		"no record (a pod of the public controller)": {view: "10", want: podMetadataWritten, wantRecorded: "10"},
		"the pod is from an older view":              {recorded: "9", view: "10", want: podMetadataWritten, wantRecorded: "10"},
		"the pod is from a newer view":               {recorded: "11", view: "10", want: podMetadataStaleView, wantRecorded: "11"},
		"this process wrote from a newer view, the pod as read predates it": {
			recorded: "5", remembered: "11", view: "10", want: podMetadataStaleView, wantRecorded: "5",
		},
		"this process wrote from this view, the pod as read predates it": {
			recorded: "5", remembered: "10", view: "10", want: podMetadataInFlight, wantRecorded: "5",
		},
		"ordered as numbers, not as strings": {recorded: "9", view: "10", want: podMetadataWritten, wantRecorded: "10"},
		"a record written by hand is not trusted": {
			recorded: "tomorrow", view: "10", want: podMetadataWritten, wantRecorded: "10",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := podFrom(tc.recorded)
			a := newFakeAPI(t, pod)
			if err := a.Get(context.Background(), client.ObjectKeyFromObject(pod), pod); err != nil {
				t.Fatal(err)
			}
			views := newPodMetadataViews(clocktesting.NewFakePassiveClock(planNow))
			if tc.remembered != "" {
				e := views.view(pod.UID)
				e.rv, e.at = tc.remembered, planNow
				e.mu.Unlock()
			}
			got, _, err := views.syncPodMetadata(context.Background(), a, sbAt(tc.view), pod)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("outcome = %v, want %v", got, tc.want)
			}
			stored := &corev1.Pod{}
			if err := a.Get(context.Background(), client.ObjectKeyFromObject(pod), stored); err != nil {
				t.Fatal(err)
			}
			if got := stored.Annotations[annotationPodMetadataFrom]; got != tc.wantRecorded {
				t.Errorf("recorded view = %q, want %q", got, tc.wantRecorded)
			}
			if _, has := stored.Annotations["note"]; has != (tc.want == podMetadataWritten) {
				t.Errorf("the template's annotation on the pod = %v, want %v", has, tc.want == podMetadataWritten)
			}
		})
	}
}
