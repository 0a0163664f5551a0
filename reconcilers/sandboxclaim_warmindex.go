package reconcilers

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// memberKey is what a claim can be served from: the ready, unbound members of one pool built
// from one version of its template.
type memberKey struct {
	Namespace string
	// Pool is the pool's name.
	Pool string
	// Hash is the BlueprintHash of the template version the members were built from (their
	// LabelSandboxTemplateHash), which must equal the claim's stamp.
	Hash string
}

// Release outcomes: what a claim's attempt to bind a picked member came to.
type releaseOutcome int

const (
	// releaseBound: the member is bound now; it leaves the index when the informer shows it.
	releaseBound releaseOutcome = iota
	// releaseRejected: the API server refused the binding (409: the member changed; 403: the
	// binding guard said no; 404: it is gone). The cached copy is stale, so the member stays
	// out of reach until the informer brings a newer version of it.
	releaseRejected
	// releaseRetry: the attempt failed for a reason unrelated to the member (timeout, 5xx); it
	// may be picked again at once. Should the write have gone through after all, the
	// resourceVersion precondition makes the next attempt fail rather than bind it twice.
	releaseRetry
)

type memberState int

const (
	statePending   memberState = iota // not ready yet
	stateAvailable                    // ready and unbound: can be picked
	stateReserved                     // picked by a claim, binding in flight
	stateParked                       // waiting for a newer version from the informer
)

type member struct {
	key   memberKey
	sb    *agentsv1beta1.Sandbox
	state memberState
	// pos is the member's position in its bucket's available slice while available.
	pos int
	// parkedRV is the resourceVersion a parked member waits to see superseded.
	parkedRV string
}

type bucket struct {
	available []*member
	pending   int
	reserved  int
	// waiters are claims that found no member and wait for one, oldest first.
	waiters []types.NamespacedName
}

func (b *bucket) empty() bool {
	return len(b.available) == 0 && b.pending == 0 && b.reserved == 0 && len(b.waiters) == 0
}

// warmIndex is the in-memory index of warm pool members that serves claims without a List:
// per memberKey the ready, unbound members, in a slice a pick pops from in O(1). It is fed by
// the Sandbox informer (Observe, Forget), in event order, and is consistent with the cache as
// of the last event plus the reservations of bindings in flight. It never decides a binding:
// the resourceVersion precondition of the bind patch (and the binding guard) does; the index
// only keeps claims from racing for the same member.
type warmIndex struct {
	mu      sync.Mutex
	buckets map[memberKey]*bucket
	members map[types.NamespacedName]*member
	// pools counts the unbound members of each pool, of every version and state.
	pools map[types.NamespacedName]int
	// waiting maps a waiting claim to the key it waits on, so that a claim waits in one
	// bucket at most once; stale waiter entries are skipped lazily.
	waiting map[types.NamespacedName]memberKey
}

// newWarmIndex returns an empty index.
func newWarmIndex() *warmIndex {
	return &warmIndex{
		buckets: map[memberKey]*bucket{},
		members: map[types.NamespacedName]*member{},
		pools:   map[types.NamespacedName]int{},
		waiting: map[types.NamespacedName]memberKey{},
	}
}

// memberKeyOf says whether sb is an unbound pool member, under which key, and whether it is
// ready. A member is controlled by its pool, carries the pool's label and a template hash,
// and has no claim; anything else (a bound or deleting Sandbox, a user's look-alike without
// the pool's controller reference) is not in the index.
func memberKeyOf(sb *agentsv1beta1.Sandbox) (key memberKey, isMember, ready bool) {
	ref := policy.ControllerOf(sb, policy.PoolKind)
	if ref == nil {
		return memberKey{}, false, false
	}
	hash := sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]
	if sb.Labels[agentsv1beta1.LabelWarmPoolSandbox] == "" || hash == "" || sb.Labels[agentsv1beta1.LabelClaimUID] != "" ||
		!sb.DeletionTimestamp.IsZero() {
		return memberKey{}, false, false
	}
	ready = meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return memberKey{Namespace: sb.Namespace, Pool: ref.Name, Hash: hash}, true, ready
}

// Observe takes the informer's current version of a Sandbox. When this makes a member
// available, it returns the claim that has waited longest for one with its key, if any, for
// the caller to wake.
func (x *warmIndex) Observe(sb *agentsv1beta1.Sandbox) (wake types.NamespacedName, ok bool) {
	nn := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	key, isMember, ready := memberKeyOf(sb)
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.members[nn]
	if m != nil && (!isMember || m.key != key) {
		x.remove(nn, m)
		m = nil
	}
	if !isMember {
		return types.NamespacedName{}, false
	}
	if m == nil {
		m = &member{key: key, pos: -1, state: statePending}
		x.members[nn] = m
		x.bucket(key).pending++
		x.pools[poolName(key)]++
	}
	m.sb = sb
	if !ready {
		x.setState(m, statePending)
		return types.NamespacedName{}, false
	}
	switch m.state {
	case stateReserved:
		return types.NamespacedName{}, false // the claim holding it decides
	case stateParked:
		if m.parkedRV == sb.ResourceVersion {
			return types.NamespacedName{}, false // a resync: nothing new
		}
	case stateAvailable:
		return types.NamespacedName{}, false
	}
	x.setState(m, stateAvailable)
	return x.popWaiter(key)
}

// Forget drops a deleted Sandbox.
func (x *warmIndex) Forget(namespace, name string) {
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	x.mu.Lock()
	defer x.mu.Unlock()
	if m := x.members[nn]; m != nil {
		x.remove(nn, m)
	}
}

// Pick reserves an available member of key and returns the cached Sandbox (shared: do not
// modify it). Every Pick must be followed by one Release of the returned Sandbox.
func (x *warmIndex) Pick(key memberKey) (*agentsv1beta1.Sandbox, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.buckets[key]
	if b == nil || len(b.available) == 0 {
		return nil, false
	}
	m := b.available[len(b.available)-1]
	x.setState(m, stateReserved)
	return m.sb, true
}

// Release ends the reservation of a picked member with the outcome of the binding attempt.
// sb is the Sandbox Pick returned.
func (x *warmIndex) Release(sb *agentsv1beta1.Sandbox, outcome releaseOutcome) {
	nn := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.members[nn]
	if m == nil || m.state != stateReserved {
		return // the informer removed it meanwhile
	}
	if outcome == releaseRetry {
		x.setState(m, stateAvailable)
		return
	}
	m.parkedRV = sb.ResourceVersion
	x.setState(m, stateParked)
}

// Counts returns how many members of key are available and how many are not ready yet.
func (x *warmIndex) Counts(key memberKey) (available, pending int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.buckets[key]; b != nil {
		return len(b.available), b.pending
	}
	return 0, 0
}

// PoolMembers returns how many unbound members the pool has, of any version, ready or not.
func (x *warmIndex) PoolMembers(namespace, pool string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pools[types.NamespacedName{Namespace: namespace, Name: pool}]
}

func poolName(key memberKey) types.NamespacedName {
	return types.NamespacedName{Namespace: key.Namespace, Name: key.Pool}
}

// Wait registers claim as waiting for a member of key: the next member that becomes
// available is reported by Observe for the claim to be woken. Waiting again replaces an
// earlier registration.
func (x *warmIndex) Wait(key memberKey, claim types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.waiting[claim]; ok && old == key {
		return
	}
	x.waiting[claim] = key
	b := x.bucket(key)
	b.waiters = append(b.waiters, claim)
}

// StopWaiting removes claim's registration, if any.
func (x *warmIndex) StopWaiting(claim types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.waiting, claim)
}

func (x *warmIndex) popWaiter(key memberKey) (types.NamespacedName, bool) {
	b := x.buckets[key]
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		b.waiters[0] = types.NamespacedName{}
		b.waiters = b.waiters[1:]
		if k, ok := x.waiting[w]; ok && k == key {
			delete(x.waiting, w)
			return w, true
		}
	}
	return types.NamespacedName{}, false
}

func (x *warmIndex) bucket(key memberKey) *bucket {
	b := x.buckets[key]
	if b == nil {
		b = &bucket{}
		x.buckets[key] = b
	}
	return b
}

// setState moves m between states, keeping its bucket's slice and counters right.
func (x *warmIndex) setState(m *member, s memberState) {
	if m.state == s {
		return
	}
	b := x.bucket(m.key)
	switch m.state {
	case statePending:
		b.pending--
	case stateReserved:
		b.reserved--
	case stateAvailable:
		last := len(b.available) - 1
		moved := b.available[last]
		b.available[m.pos] = moved
		moved.pos = m.pos
		b.available[last] = nil
		b.available = b.available[:last]
		m.pos = -1
	}
	m.state = s
	switch s {
	case statePending:
		b.pending++
	case stateReserved:
		b.reserved++
	case stateAvailable:
		m.pos = len(b.available)
		b.available = append(b.available, m)
	}
}

func (x *warmIndex) remove(nn types.NamespacedName, m *member) {
	x.setState(m, stateParked) // parked counts nowhere
	delete(x.members, nn)
	if pn := poolName(m.key); x.pools[pn] <= 1 {
		delete(x.pools, pn)
	} else {
		x.pools[pn]--
	}
	if b := x.buckets[m.key]; b != nil && b.empty() {
		delete(x.buckets, m.key)
	}
}
