package reconcilers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// A bound claim's bookkeeping (its sandbox-name annotation and SandboxAdopted event,
// recordSandboxName) waits for its pool's claims to pause, at most MaxBookkeepingDelay after
// the claim's Ready. Claims that never pause bring every claim's bookkeeping due at that bound:
// the public rapid-burst recipe's first two bursts (600 claims) came due together as the third
// burst began, and took the claim controller's workers with their writes (an annotation patch
// each, and an event) for five seconds, in which not one claim of the third burst was served.
// So past the bound, while claims still come, at most bookkeepingSlots.limit claims write their
// bookkeeping at a time; the others wait their turn, first come first served, and are woken
// when a slot is handed to them: waiting costs no reconcile. Once claims pause, the watcher of
// the pause wakes every waiting claim, and none needs a slot.

// bookkeepingSlots hands out the slots of bookkeeping written under traffic.
type bookkeepingSlots struct {
	mu    sync.Mutex
	limit int
	// busy counts the slots in use, handed-over ones included.
	busy int
	// queue holds the waiting claims in order; queued says which entries are live (an entry
	// dropped is skipped when its turn comes).
	queue  []types.NamespacedName
	queued map[types.NamespacedName]bool
	// granted are the claims a released slot was handed to, not yet back to use it.
	granted map[types.NamespacedName]bool
}

func newBookkeepingSlots(limit int) *bookkeepingSlots {
	return &bookkeepingSlots{limit: max(1, limit), queued: map[types.NamespacedName]bool{}, granted: map[types.NamespacedName]bool{}}
}

// acquire reports whether claim may write its bookkeeping now: a slot was handed to it, or one
// is free and no claim waits before it. Otherwise claim waits in line and is returned by the
// release that hands it a slot, for the caller to wake.
func (b *bookkeepingSlots) acquire(claim types.NamespacedName) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.granted[claim] {
		delete(b.granted, claim)
		return true
	}
	if b.busy < b.limit && len(b.queued) == 0 {
		b.busy++
		return true
	}
	if !b.queued[claim] {
		b.queued[claim] = true
		b.queue = append(b.queue, claim)
	}
	return false
}

// release frees a slot after a write: it goes to the claim that waited longest, which is
// returned to be woken.
func (b *bookkeepingSlots) release() []types.NamespacedName {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handOverLocked()
}

func (b *bookkeepingSlots) handOverLocked() []types.NamespacedName {
	for len(b.queue) > 0 {
		next := b.queue[0]
		b.queue[0] = types.NamespacedName{}
		b.queue = b.queue[1:]
		if !b.queued[next] {
			continue // dropped while it waited
		}
		delete(b.queued, next)
		b.granted[next] = true
		return []types.NamespacedName{next}
	}
	b.busy--
	return nil
}

// drop takes claim out of line, and passes a slot handed to it on: its bookkeeping is done,
// or is written at a pause, or it is gone. It returns the claim to wake in its place.
func (b *bookkeepingSlots) drop(claim types.NamespacedName) []types.NamespacedName {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.queued, claim)
	if b.granted[claim] {
		delete(b.granted, claim)
		return b.handOverLocked()
	}
	return nil
}
