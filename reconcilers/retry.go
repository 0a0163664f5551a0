package reconcilers

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retries of a reconcile that failed back off per object from retryBaseDelay, doubling, up
// to retryMaxDelay, and are not paced across objects.
//
// controller-runtime's default limiter doubles up to 1,000 s and paces every retry of a
// controller through one bucket of 10 a second. An outage of a few seconds makes every claim
// in flight fail again and again (the fault soak, make soak: a webhook unreachable for 19 s
// failed one claim's binding 24 times), so that when the outage ends each waits out a backoff
// of minutes, and the retries that are due wait their turn in the bucket: claims pending at
// the end of the outage were served up to 80 s after it. Capped at retryMaxDelay, a claim is
// retried within seconds of the API server or the webhook coming back, and a failing object
// costs the API server at most one request per retryMaxDelay: what API Priority and Fairness
// is there to bound.
const (
	retryBaseDelay = 10 * time.Millisecond
	retryMaxDelay  = 5 * time.Second
)

// newRetryLimiter returns the rate limiter of a controller's queue.
func newRetryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](retryBaseDelay, retryMaxDelay)
}
