package load

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ReadyClaim is what the watch saw of a claim when it first showed Ready=True.
type ReadyClaim struct {
	// ReadyAt is when the event arrived: the end of both latency views.
	ReadyAt time.Time
	// webhookAt is the claim's webhook-first-observed-at; zero when absent or unparsable.
	webhookAt time.Time
	// Sandbox is status.sandbox.name.
	Sandbox string
	// Stamp is the claim's template-hash annotation.
	Stamp string
}

// ClaimWatcher watches the claims of a namespace and records when each first shows Ready=True.
// The time is taken when the event arrives, so the latency is what a client watching the
// claim experiences.
type ClaimWatcher struct {
	c  client.WithWatch
	ns string

	mu   sync.Mutex
	seen map[string]ReadyClaim
	// onReady is called, outside mu, after each claim's first Ready is recorded.
	onReady func(time.Time)

	cancel context.CancelFunc
	done   chan struct{}
}

// StartClaimWatch lists the namespace's claims and watches from there; it returns once the
// watch is established.
func StartClaimWatch(ctx context.Context, c client.WithWatch, ns string) (*ClaimWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &ClaimWatcher{c: c, ns: ns, seen: map[string]ReadyClaim{}, cancel: cancel, done: make(chan struct{})}
	rv, err := w.list(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	wi, err := w.open(ctx, rv)
	if err != nil {
		cancel()
		return nil, err
	}
	go w.run(ctx, wi, rv)
	return w, nil
}

// list records the claims that are Ready already and returns the list's resourceVersion.
func (w *ClaimWatcher) list(ctx context.Context) (string, error) {
	var list extv1beta1.SandboxClaimList
	if err := w.c.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		return "", fmt.Errorf("listing claims: %w", err)
	}
	for i := range list.Items {
		w.record(&list.Items[i], time.Now())
	}
	return list.ResourceVersion, nil
}

func (w *ClaimWatcher) open(ctx context.Context, rv string) (watch.Interface, error) {
	wi, err := w.c.Watch(ctx, &extv1beta1.SandboxClaimList{}, &client.ListOptions{
		Namespace: w.ns,
		Raw:       &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
	})
	if err != nil {
		return nil, fmt.Errorf("watching claims: %w", err)
	}
	return wi, nil
}

// run consumes events, re-opening the watch where it ended (or re-listing when that
// resourceVersion is gone) until stopped.
func (w *ClaimWatcher) run(ctx context.Context, wi watch.Interface, rv string) {
	defer close(w.done)
	for {
		for ev := range wi.ResultChan() {
			now := time.Now()
			switch ev.Type {
			case watch.Added, watch.Modified:
				if claim, ok := ev.Object.(*extv1beta1.SandboxClaim); ok {
					rv = claim.ResourceVersion
					w.record(claim, now)
				}
			case watch.Bookmark:
				if claim, ok := ev.Object.(*extv1beta1.SandboxClaim); ok {
					rv = claim.ResourceVersion
				}
			case watch.Error:
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					rv = ""
				}
			}
		}
		wi.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if rv == "" {
				if rv, err = w.list(ctx); err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
			}
			if wi, err = w.open(ctx, rv); err == nil {
				break
			}
			rv = ""
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// record notes the claim's first Ready=True.
func (w *ClaimWatcher) record(claim *extv1beta1.SandboxClaim, at time.Time) {
	if !meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		return
	}
	w.mu.Lock()
	if _, ok := w.seen[claim.Name]; ok {
		w.mu.Unlock()
		return
	}
	obs := ReadyClaim{
		ReadyAt: at,
		Sandbox: claim.Status.Sandbox.Name,
		Stamp:   claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash],
	}
	if ts, ok := claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]; ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			obs.webhookAt = t
		}
	}
	w.seen[claim.Name] = obs
	hook := w.onReady
	w.mu.Unlock()
	if hook != nil {
		hook(at)
	}
}

// OnReady makes the watcher call f, from its own goroutine, right after it records a claim's
// first Ready=True, with the time the event arrived: what must be read at that moment (the
// API server's CPU at the last Ready) is read there and not a poll later.
func (w *ClaimWatcher) OnReady(f func(at time.Time)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onReady = f
}

// Ready returns what was observed of the named claim, if it became Ready.
func (w *ClaimWatcher) Ready(name string) (ReadyClaim, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	obs, ok := w.seen[name]
	return obs, ok
}

// ReadyCount is how many claims have been seen Ready.
func (w *ClaimWatcher) ReadyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// Stop ends the watch.
func (w *ClaimWatcher) Stop() {
	w.cancel()
	<-w.done
}
