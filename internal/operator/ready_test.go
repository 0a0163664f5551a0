package operator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

type fakeCache struct{ synced chan struct{} }

// WaitForCacheSync waits for synced, as the informer cache waits for its informers, until
// ctx ends.
func (f fakeCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-f.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// A replica is not ready while its caches have not synced, and the probe answers promptly
// all the same; it is ready once they have.
func TestNotReadyUntilTheCachesSynced(t *testing.T) {
	c := fakeCache{synced: make(chan struct{})}
	check := cachesSynced(c)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "/readyz", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := check(req); !errors.Is(err, errCachesNotSynced) {
		t.Errorf("caches not synced: check says %v, want %v", err, errCachesNotSynced)
	}
	if took := time.Since(start); took > 10*cacheSyncProbeWait {
		t.Errorf("the probe took %s with the caches not synced; it must not wait for them", took)
	}
	close(c.synced)
	if err := check(req); err != nil {
		t.Errorf("caches synced: check says %v, want ready", err)
	}
}
