package reconcilers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestMemberEventsWakeThePool: membership changes wake the pool at once (it refills);
// readiness changes, which only its status shows, wake it after memberReadinessDelay.
func TestMemberEventsWakeThePool(t *testing.T) {
	bound := poolMember("m", "h1", true, "2")
	bound.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: "c", UID: "claim-uid", Controller: ptr.To(true)}}
	rehashed := poolMember("m", "h2", false, "2")
	placed := poolMember("m", "h1", false, "2")
	placed.Status.NodeName = "node-1"
	tests := map[string]struct {
		old, cur      client.Object
		wantImmediate int // requests queued at once
		wantDelayed   int // requests queued after memberReadinessDelay (one per object of the pool; the queue merges them)
	}{
		"nothing the pool reports changed":                   {poolMember("m", "h1", false, "1"), poolMember("m", "h1", false, "2"), 0, 0},
		"became ready: delayed":                              {poolMember("m", "h1", false, "1"), poolMember("m", "h1", true, "2"), 0, 2},
		"placed on a node, the refill's room freed: delayed": {poolMember("m", "h1", false, "1"), placed, 0, 2},
		"bound away by a claim: delayed":                     {poolMember("m", "h1", true, "1"), bound, 0, 1},
		"template hash changed":                              {poolMember("m", "h1", false, "1"), rehashed, 1, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := &recordingQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
			defer q.ShutDown()
			h := &memberEventHandler{expected: newExpectations(clocktesting.NewFakePassiveClock(planNow))}
			h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: tc.old, ObjectNew: tc.cur}, q)
			if got := q.Len(); got != tc.wantImmediate {
				t.Errorf("queued at once: %d, want %d", got, tc.wantImmediate)
			}
			if q.delayed != tc.wantDelayed {
				t.Errorf("queued after a delay: %d, want %d", q.delayed, tc.wantDelayed)
			}
		})
	}
}

// recordingQueue counts the requests added after a delay.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delayed int
}

func (q *recordingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.delayed++
	q.TypedRateLimitingInterface.AddAfter(item, d)
}
