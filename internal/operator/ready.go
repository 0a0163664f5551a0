package operator

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// cacheSyncProbeWait bounds how long one readiness probe waits for the informer caches: a
// probe answers promptly, ready or not.
const cacheSyncProbeWait = 100 * time.Millisecond

// errCachesNotSynced is the readiness failure of a replica whose informer caches have not
// synced yet.
var errCachesNotSynced = errors.New("the informer caches have not synced yet")

// syncWaiter is what cachesSynced needs of the manager's cache.
type syncWaiter interface {
	WaitForCacheSync(ctx context.Context) bool
}

// cachesSynced is the readiness check of the informer caches. The webhooks decide from the
// cache, and until it has synced they wait for it: at 20,000 Sandboxes for seconds, against
// the API server's 10 s webhook timeout. A replica is not ready until then, so that a Service
// sends admission to the replicas that answer at once.
func cachesSynced(c syncWaiter) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncProbeWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errCachesNotSynced
		}
		return nil
	}
}
