package reconcilers

import (
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// expectationsTTL bounds how long an owner waits for the informer to show its writes before
// the cache is trusted again: a lost watch event must not stall it.
const expectationsTTL = time.Minute

// expectations is the one record of "this process wrote it, the cache does not show it yet",
// for every controller: per owner (a pool, a Sandbox, a template, a claim), the writes it made
// whose watch events have not arrived. A reconcile that finds its owner's expectations
// unsatisfied does not act on the cache (which would repeat a create or a delete), and a watch
// event an owner expects is no news to it (it does not wake it again).
//
// Items name a write and its object: "create Pod/sb-1", "delete Sandbox/pool-x7k2q". They are
// recorded before the write is sent, because its watch event may arrive before the call
// returns, and taken back when the write fails.
type expectations struct {
	clock  clock.PassiveClock
	mu     sync.Mutex
	owners map[types.NamespacedName]*expected
	// lapsed are the owners whose expectations the TTL dropped before the cache showed them:
	// the cache is that far behind, so what it does not show may exist all the same. Until
	// the owner's next expected write, its creates are checked against the API server first
	// (lapsed), not sent to fail with 409 AlreadyExists.
	lapsed sets.Set[types.NamespacedName]
}

type expected struct {
	items sets.Set[string]
	// since is when an item was last added.
	since time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, owners: map[types.NamespacedName]*expected{}, lapsed: sets.New[types.NamespacedName]()}
}

// Items of the writes the controllers expect to see.
func createItem(kind, name string) string { return "create " + kind + "/" + name }

// Only Sandboxes are deleted (pool members) and bound (to claims) on expectation.
func deleteItem(sandbox string) string { return "delete " + sandboxKind + "/" + sandbox }
func bindItem(sandbox string) string   { return "bind " + sandboxKind + "/" + sandbox }

// createOf is the create item of obj, its kind taken from its Go type.
func createOf(obj client.Object) string { return createItem(kindOf(obj), obj.GetName()) }

// kindOf is the kind of a typed object, from its Go type (the client leaves TypeMeta empty).
func kindOf(obj client.Object) string {
	return reflect.TypeOf(obj).Elem().Name()
}

// expect records writes of owner about to be sent.
func (e *expectations) expect(owner types.NamespacedName, items ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.owners[owner]
	if x == nil {
		x = &expected{items: sets.New[string]()}
		e.owners[owner] = x
	}
	x.items.Insert(items...)
	x.since = e.clock.Now()
	e.lapsed.Delete(owner)
}

// observe marks an item seen (or its write failed) and reports whether owner expected it.
func (e *expectations) observe(owner types.NamespacedName, item string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.owners[owner]
	if x == nil || !x.items.Has(item) {
		return false
	}
	x.items.Delete(item)
	if x.items.Len() == 0 {
		delete(e.owners, owner)
	}
	return true
}

// satisfied reports whether the cache shows every write of owner, or it has waited too long
// (then the expectations are dropped).
func (e *expectations) satisfied(owner types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.owners[owner]
	return x == nil || e.lapseLocked(owner, x)
}

// inFlight reports whether owner wrote item and the cache has not shown it yet: a reconcile
// that finds the object missing from the cache must not write it again (a create would be
// answered 409 AlreadyExists). Past the TTL, owner's expectations lapse as in satisfied.
func (e *expectations) inFlight(owner types.NamespacedName, item string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.owners[owner]
	return x != nil && x.items.Has(item) && !e.lapseLocked(owner, x)
}

// lapseLocked drops owner's expectations x, and marks owner lapsed, when they are older than
// the TTL; it reports whether they were. e.mu is held.
func (e *expectations) lapseLocked(owner types.NamespacedName, x *expected) bool {
	if e.clock.Since(x.since) <= expectationsTTL {
		return false
	}
	delete(e.owners, owner)
	e.lapsed.Insert(owner)
	return true
}

// hasLapsed reports whether owner's expectations were dropped by the TTL, unmet, and no write
// of owner was expected since.
func (e *expectations) hasLapsed(owner types.NamespacedName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lapsed.Has(owner)
}

// pending lists owner's expected items, sorted.
func (e *expectations) pending(owner types.NamespacedName) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.owners[owner]; x != nil {
		return slices.Sorted(slices.Values(x.items.UnsortedList()))
	}
	return nil
}

// forget drops owner's expectations (the owner is gone).
func (e *expectations) forget(owner types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.owners, owner)
	e.lapsed.Delete(owner)
}
