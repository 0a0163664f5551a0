package reconcilers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Ready means routable, for every watcher of pods. The claim path writes a bound pod's route
// (report) before the claim's Ready status, but the API server delivers pod and claim events
// through separate watch caches: a client that watches its claim could see Ready, ask the
// sandbox-router at once and find the router's pod informer still without the route (the
// router then falls back to DNS: 502). Measured on the SDK suite, quiet machine: the route
// written 14 revisions before the Ready status, the pod event delivered 9 ms after the claim's.
// So the claim reports Ready only once this process's own pod informer shows the route: every
// pod watcher is served from the same watch cache, which has then sent the event out.

// routeVisibleWait bounds how long a claim's reconcile waits for its pod informer to show the
// route it wrote; past it the claim is looked at again shortly (retryAfterCacheCatchesUp).
const routeVisibleWait = time.Second

// podVersionWaiters lets a reconcile wait until the pod informer delivers a pod at a
// resourceVersion at least the one it wrote.
type podVersionWaiters struct {
	mu sync.Mutex
	m  map[types.NamespacedName][]podVersionWaiter
}

type podVersionWaiter struct {
	rv   string
	done chan struct{}
}

func newPodVersionWaiters() *podVersionWaiters {
	return &podVersionWaiters{m: map[types.NamespacedName][]podVersionWaiter{}}
}

// wait returns true once the pod informer has delivered pod key at resourceVersion rv or
// later (cache answers for what it already holds), false after timeout or when ctx ends.
func (w *podVersionWaiters) wait(ctx context.Context, cache client.Reader, key types.NamespacedName, rv string, timeout time.Duration) bool {
	if rv == "" {
		return true
	}
	me := podVersionWaiter{rv: rv, done: make(chan struct{})}
	w.mu.Lock()
	w.m[key] = append(w.m[key], me)
	w.mu.Unlock()
	defer w.drop(key, me)
	// Registered first, then the cache read: the informer updates its store before it calls
	// the handlers, so a delivery this read misses signals the waiter.
	pod := &corev1.Pod{}
	if err := cache.Get(ctx, key, pod); err == nil && !newerVersion(rv, pod.ResourceVersion) {
		return true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-me.done:
		return true
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (w *podVersionWaiters) drop(key types.NamespacedName, me podVersionWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.m[key]
	for i, x := range ws {
		if x.done == me.done {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(w.m, key)
	} else {
		w.m[key] = ws
	}
}

// observe releases the waiters of pod whose resourceVersion it reaches.
func (w *podVersionWaiters) observe(obj client.Object) {
	key := client.ObjectKeyFromObject(obj)
	w.mu.Lock()
	defer w.mu.Unlock()
	ws, ok := w.m[key]
	if !ok {
		return
	}
	kept := ws[:0]
	for _, x := range ws {
		if newerVersion(x.rv, obj.GetResourceVersion()) {
			kept = append(kept, x)
			continue
		}
		close(x.done)
	}
	if len(kept) == 0 {
		delete(w.m, key)
	} else {
		w.m[key] = kept
	}
}

// podVersionHandler feeds the waiters from the pod informer; it enqueues nothing.
type podVersionHandler struct{ waiters *podVersionWaiters }

func (h podVersionHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], _ queue) {
	h.waiters.observe(e.Object)
}

func (h podVersionHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], _ queue) {
	h.waiters.observe(e.ObjectNew)
}

func (podVersionHandler) Delete(context.Context, event.TypedDeleteEvent[client.Object], queue) {}

func (podVersionHandler) Generic(context.Context, event.TypedGenericEvent[client.Object], queue) {}
