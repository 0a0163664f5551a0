package reconcilers

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Every controller's queue serves objects first in, first out, and its retries are capped. The fault soak
// (make soak, docs/soak.md) found both of controller-runtime's defaults losing claims under
// load:
//
//   - Its priority queue gives the objects of an informer's initial list a low priority, so
//     that a restart does not delay fresh events. When a follower takes the Lease over while
//     claims keep arriving, its controllers start with every existing object at that low
//     priority, and the fresh events of the load never leave the queue empty: the Sandboxes
//     the old leader had created just before it froze waited, podless, for more than two
//     minutes (43 of 1,083 claims not Ready after 2 minutes in a short soak). A new leader's
//     initial list is the work the old one left unfinished; it is served in order.
//   - Its rate limiter doubles a failing object's retry delay up to 1,000 s. An outage of a
//     few seconds makes every claim in flight fail again and again (a webhook unreachable for
//     19 s failed one claim's binding 24 times), so that each then waits out minutes of
//     backoff after the outage ended: claims pending at its end were served up to 80 s
//     after it. Capped at retryMaxDelay, a claim is retried within seconds of the API server
//     or the webhook coming back, and a failing object costs the API server at most one
//     request per retryMaxDelay, which API Priority and Fairness is there to bound.
const (
	retryBaseDelay = 10 * time.Millisecond
	retryMaxDelay  = 5 * time.Second
)

// queueOptions returns controller options with sandgate's queue.
func queueOptions(o controller.Options) controller.Options {
	o.UsePriorityQueue = ptr.To(true)
	o.RateLimiter = newRetryLimiter()
	o.NewQueue = newQueue
	return o
}

// newRetryLimiter backs a failing object's retries off from retryBaseDelay, doubling, to
// retryMaxDelay, and paces nothing across objects.
func newRetryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBaseDelay, retryMaxDelay)
}

// newQueue is a controller's queue: controller-runtime's priority queue, which keeps one
// entry per object (an event that arrives while a requeue is pending makes the object due
// now and drops the requeue, so that a Sandbox whose pod progressed is not reconciled again
// when its progress delay ends), with every item at the same priority, so that it serves
// them first in, first out.
func newQueue(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return samePriority{priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = limiter })}
}

// samePriority is a priority queue that ignores the low priority controller-runtime gives
// the objects of an informer's initial list.
type samePriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q samePriority) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority != nil && *o.Priority < 0 {
		o.Priority = nil
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
