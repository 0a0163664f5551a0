package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/soak/check"
)

// bindingWatch follows every Sandbox from the start of the load and reports a claim that, at
// any moment the watch saw, controlled two live Sandboxes. The audit log can miss a write (an
// API server killed after the write reached etcd and before the event was written); the watch
// sees what etcd holds.
type bindingWatch struct {
	c client.WithWatch

	mu sync.Mutex
	// bound is, per claim UID, the live Sandboxes it controls.
	bound map[types.UID]map[string]bool
	// byName is each Sandbox's claim, to follow a Sandbox that changes or goes.
	byName     map[string]types.UID
	violations []check.Violation
	reported   map[types.UID]bool

	cancel context.CancelFunc
	done   chan struct{}
}

// watchBindings starts following the Sandboxes of every namespace.
func watchBindings(ctx context.Context, c client.WithWatch) (*bindingWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &bindingWatch{c: c, bound: map[types.UID]map[string]bool{}, byName: map[string]types.UID{},
		reported: map[types.UID]bool{}, cancel: cancel, done: make(chan struct{})}
	rv, err := w.list(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go w.run(ctx, rv)
	return w, nil
}

func (w *bindingWatch) list(ctx context.Context) (string, error) {
	var list agentsv1beta1.SandboxList
	if err := w.c.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing sandboxes: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bound, w.byName = map[types.UID]map[string]bool{}, map[string]types.UID{}
	for i := range list.Items {
		w.observe(&list.Items[i], false)
	}
	return list.ResourceVersion, nil
}

func (w *bindingWatch) run(ctx context.Context, rv string) {
	defer close(w.done)
	for ctx.Err() == nil {
		wi, err := w.c.Watch(ctx, &agentsv1beta1.SandboxList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if rv, err = w.relist(ctx); err != nil {
				return
			}
			continue
		}
		for ev := range wi.ResultChan() {
			sb, ok := ev.Object.(*agentsv1beta1.Sandbox)
			switch {
			case ev.Type == watch.Error:
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					rv = ""
				}
			case !ok:
			case ev.Type == watch.Bookmark:
				rv = sb.ResourceVersion
			default:
				rv = sb.ResourceVersion
				w.mu.Lock()
				w.observe(sb, ev.Type == watch.Deleted)
				w.mu.Unlock()
			}
		}
		wi.Stop()
		if rv == "" {
			if rv, err = w.relist(ctx); err != nil {
				return
			}
		}
	}
}

// relist lists again until it succeeds or ctx ends (the API server may be restarting).
func (w *bindingWatch) relist(ctx context.Context) (string, error) {
	for {
		rv, err := w.list(ctx)
		if err == nil {
			return rv, nil
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			return "", ctx.Err()
		}
	}
}

// observe records a Sandbox as the watch shows it; w.mu is held.
func (w *bindingWatch) observe(sb *agentsv1beta1.Sandbox, deleted bool) {
	key := sb.Namespace + "/" + sb.Name
	if old, ok := w.byName[key]; ok {
		delete(w.bound[old], key)
		delete(w.byName, key)
	}
	ref := policy.ControllerOf(sb, policy.ClaimKind)
	if deleted || ref == nil || !sb.DeletionTimestamp.IsZero() {
		return
	}
	if w.bound[ref.UID] == nil {
		w.bound[ref.UID] = map[string]bool{}
	}
	w.bound[ref.UID][key] = true
	w.byName[key] = ref.UID
	if len(w.bound[ref.UID]) > 1 && !w.reported[ref.UID] {
		w.reported[ref.UID] = true
		names := make([]string, 0, len(w.bound[ref.UID]))
		for n := range w.bound[ref.UID] {
			names = append(names, n)
		}
		sort.Strings(names)
		w.violations = append(w.violations, check.Violation{
			Invariant: check.InvariantClaimOneBinding,
			Object:    "SandboxClaim " + sb.Namespace + "/" + ref.Name,
			Detail:    "the watch of Sandboxes saw it control " + strings.Join(names, " and ") + " at once",
			At:        time.Now(),
		})
	}
}

// stop ends the watch and returns what it found.
func (w *bindingWatch) stop() []check.Violation {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]check.Violation(nil), w.violations...)
}
