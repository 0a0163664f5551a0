package reconcilers

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Requeue helpers every controller's Reconcile uses to say when it runs again.

// retryAfterCacheCatchesUp is how soon a reconcile that lost a race with its own cache runs
// again.
const retryAfterCacheCatchesUp = 200 * time.Millisecond

// quiet turns errors that only mean "the cache is behind" into a short requeue, so they do
// not show up as reconciler errors; every other error is returned for backoff and logging.
func quiet(result ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
		return requeueWithin(result, retryAfterCacheCatchesUp), nil
	}
	return result, err
}

// requeueWithin returns result with a requeue no later than d: the sooner of its own and d.
// A d of 0 asks for nothing.
func requeueWithin(result ctrl.Result, d time.Duration) ctrl.Result {
	if d > 0 && (result.RequeueAfter == 0 || d < result.RequeueAfter) {
		result.RequeueAfter = d
	}
	return result
}
