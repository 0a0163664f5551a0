package reconcilers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
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

// controllerQueue builds the queue a controller with options o gets, as controller-runtime
// builds it (its priority queue unless told otherwise).
func controllerQueue(o controller.Options) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	limiter := o.RateLimiter
	if limiter == nil {
		limiter = newRetryLimiter()
	}
	if o.NewQueue != nil {
		return o.NewQueue("test", limiter)
	}
	if ptr.Deref(o.UsePriorityQueue, true) {
		return priorityqueue.New[reconcile.Request]("test", func(po *priorityqueue.Opts[reconcile.Request]) { po.RateLimiter = limiter })
	}
	return workqueue.NewTypedRateLimitingQueue(limiter)
}

// A leader that takes over while claims keep coming starts with every existing object from
// its informers' initial list; those are the work the old leader left unfinished (a Sandbox
// created just before it froze, without its pod yet). The fault soak found them waiting for
// minutes behind the fresh events of the load; they are served in order.
func TestInitialListIsNotStarvedByFreshEvents(t *testing.T) {
	q := controllerQueue(queueOptions(controller.Options{}))
	defer q.ShutDown()
	ctx := context.Background()
	h := &handler.EnqueueRequestForObject{}
	const left = 40
	for i := 0; i < left; i++ {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "soak", Name: fmt.Sprintf("left-%d", i)}}
		h.Create(ctx, event.CreateEvent{Object: sb, IsInInitialList: true}, q)
	}
	fresh := 0
	addFresh := func() {
		sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "soak", Name: fmt.Sprintf("fresh-%d", fresh)}}
		fresh++
		h.Create(ctx, event.CreateEvent{Object: sb}, q)
	}
	addFresh()
	served := 0
	for got := 0; got < 10*left && served < left; got++ {
		// The load: two fresh events arrive for every object a worker takes.
		addFresh()
		addFresh()
		req, _ := q.Get()
		if strings.HasPrefix(req.Name, "left-") {
			served++
		}
		q.Done(req)
		q.Forget(req)
	}
	if served < left {
		t.Fatalf("only %d of the %d objects of the initial list were served while %d fresh events came", served, left, fresh)
	}
}
