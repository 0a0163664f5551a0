package reconcilers

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// An object that failed through an outage is retried within retryMaxDelay of the outage's
// end, however often it failed during it.
func TestRetriesOfAFailingObjectAreCapped(t *testing.T) {
	l := newRetryLimiter()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "claim"}}
	if d := l.When(req); d != retryBaseDelay {
		t.Errorf("first retry after %s, want %s", d, retryBaseDelay)
	}
	for i := 0; i < 40; i++ { // a claim failing for the length of a webhook outage
		if d := l.When(req); d > retryMaxDelay {
			t.Fatalf("retry %d after %s, more than %s", i+2, d, retryMaxDelay)
		}
	}
	if d := l.When(req); d != retryMaxDelay {
		t.Errorf("retry after 42 failures in %s, want the cap %s", d, retryMaxDelay)
	}
	l.Forget(req)
	if d := l.When(req); d != retryBaseDelay {
		t.Errorf("after a success the next failure is retried after %s, want %s", d, retryBaseDelay)
	}
}

// The first retries of many objects failing at once (every claim in flight when the API
// server restarts) are not paced behind each other.
func TestRetriesOfManyObjectsAreNotPacedTogether(t *testing.T) {
	l := newRetryLimiter()
	for i := 0; i < 1000; i++ {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: fmt.Sprintf("claim-%d", i)}}
		if d := l.When(req); d != retryBaseDelay {
			t.Fatalf("the first retry of object %d comes after %s, want %s: retries are paced across objects", i, d, retryBaseDelay)
		}
	}
}
