package reconcilers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestPodVersionWaiters: a claim's reconcile waits until the pod informer delivers the pod at
// the resourceVersion its route write made, and no longer; what the cache already holds
// answers at once.
func TestPodVersionWaiters(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	podAt := func(rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: rv}}
	}
	cache := newFakeAPI(t, podAt(""))
	held := &corev1.Pod{}
	if err := cache.Get(context.Background(), key, held); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	w := newPodVersionWaiters()
	if !w.wait(ctx, cache, key, held.ResourceVersion, time.Millisecond) {
		t.Errorf("the cache holds the version waited for: want no wait")
	}

	later := "1" + held.ResourceVersion // a longer number: later
	if w.wait(ctx, cache, key, later, 10*time.Millisecond) {
		t.Errorf("a version the informer never delivered: want the wait to time out")
	}
	if len(w.m) != 0 {
		t.Errorf("waiters left after the timeout: %v", w.m)
	}

	done := make(chan bool)
	go func() { done <- w.wait(ctx, cache, key, later, time.Minute) }()
	for {
		w.mu.Lock()
		n := len(w.m[key])
		w.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.observe(podAt(held.ResourceVersion)) // an older delivery releases nothing
	select {
	case <-done:
		t.Fatal("released by an older version of the pod")
	case <-time.After(10 * time.Millisecond):
	}
	podVersionHandler{waiters: w}.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: held, ObjectNew: podAt(later)}, nil)
	if !<-done {
		t.Errorf("the delivery of the version waited for did not release the wait")
	}
}
