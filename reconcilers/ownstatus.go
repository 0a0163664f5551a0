package reconcilers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownStatus is the status this process last wrote to one object, kept until the cache shows
// that write. Each controller is the only writer of its kind's status (claims, Sandboxes,
// pools), so its last write is the newest status there is; but the cache may not show it
// yet when the next reconcile starts (a pod event or a requeue comes first). A status
// computed from that older copy differs from it again, if only in a condition's
// lastTransitionTime, and would be written a second time: a write of its own, and a new
// resourceVersion that fails any precondition taken from the copy in between (a claim's bind
// of a ready warm member). So every status writer computes from the newer of the two, and
// this is where "newer" is decided: by the resourceVersions.
type ownStatus[S any] struct {
	// resourceVersion is what the write returned.
	resourceVersion string
	status          *S
}

// record remembers status as just written to obj, which holds the write's response.
func (w *ownStatus[S]) record(obj client.Object, status *S) {
	w.resourceVersion, w.status = obj.GetResourceVersion(), status
}

// newer returns the status this process last wrote when the cached copy predates that write,
// and nil when the cache shows it (the write is forgotten then: from now on the cache is at
// least as new). The caller deep-copies it into the object it reconciles.
func (w *ownStatus[S]) newer(cached client.Object) *S {
	if w.status == nil {
		return nil
	}
	// The comparison fails only for a resourceVersion that is not a server's: trust the cache.
	if cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), w.resourceVersion); err == nil && cmp < 0 {
		return w.status
	}
	*w = ownStatus[S]{}
	return nil
}

// ownStatuses is ownStatus per object, for controllers that keep no other memory of their
// objects. An entry lives until the object's next reconcile finds the cache caught up, or the
// object is gone.
type ownStatuses[S any] struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*ownStatus[S]
}

// record: see ownStatus.record.
func (o *ownStatuses[S]) record(obj client.Object, status *S) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.NamespacedName]*ownStatus[S]{}
	}
	w := &ownStatus[S]{}
	w.record(obj, status)
	o.m[client.ObjectKeyFromObject(obj)] = w
}

// newer: see ownStatus.newer.
func (o *ownStatuses[S]) newer(cached client.Object) *S {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := client.ObjectKeyFromObject(cached)
	w := o.m[key]
	if w == nil {
		return nil
	}
	if s := w.newer(cached); s != nil {
		return s
	}
	delete(o.m, key)
	return nil
}

// forget drops the object's entry (it is gone).
func (o *ownStatuses[S]) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}
