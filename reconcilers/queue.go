package reconcilers

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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
// when its progress delay ends), serving the objects of one priority first in, first out:
// the claim path at priorityClaimPath, the work nobody waits on at priorityBackground
// (addWithPriority).
func newQueue(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return samePriority{priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) { o.RateLimiter = limiter })}
}

// samePriority is a priority queue that ignores the low priority controller-runtime gives
// the objects of an informer's initial list (handler.LowPriority): those are served as
// fresh events are. The priorities sandgate's handlers give are kept.
type samePriority struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q samePriority) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority != nil && *o.Priority == handler.LowPriority {
		o.Priority = nil
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// Priorities of the items of a controller's queue. A claim's path comes first; work that no
// claim waits on (a pool's members before a claim binds them, a bound claim's bookkeeping)
// waits behind it in the same queue and the same workers. Measured with the public
// rapid-burst recipe (bursts of 300 claims at 300/s, back to back, into a pool of 600): the
// third burst found the pool refilling 600 members, and the Sandboxes its claims
// cold-started queued behind them in the Sandbox controller's first-in-first-out queue (a
// mean wait of 6.9 s there), while the first two bursts' claims, their bookkeeping due,
// filled the claim controller's queue ahead of the third burst's (700 to 800 items; a mean of
// 5.6 s from admission to the first reconcile). Its p99 was 31 s against 3.9 s for the first
// burst. The queue keeps an object's highest pending priority: a member a claim binds while
// it waits is served as the claim's at once.
const (
	priorityClaimPath  = 0
	priorityBackground = -10
)

// addWithPriority adds req to q at priority, after the given delay (0 for now); a queue
// without priorities (tests' plain queues) just adds it.
func addWithPriority(q queue, req reconcile.Request, priority int, after time.Duration) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority, After: after}, req)
		return
	}
	if after > 0 {
		q.AddAfter(req, after)
		return
	}
	q.Add(req)
}
