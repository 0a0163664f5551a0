package reconcilers

import (
	"container/heap"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// memberKey is what a claim can be served from (policy.MemberKey).
type memberKey = policy.MemberKey

// Release outcomes: what a claim's attempt to bind a picked member came to.
type releaseOutcome int

const (
	// releaseBound: the member is bound now; it leaves the index when the informer shows it.
	releaseBound releaseOutcome = iota
	// releaseRejected: the API server refused the binding (409: the member changed; 403: the
	// binding guard said no; 404: it is gone). The copy the binding was made from is stale,
	// so the member stays out of reach until the informer brings a newer version of it (at
	// once, when it brought one while the binding was in flight).
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
	// While available: the node queue the member is in, its neighbours there (oldest first)
	// and when it became available (the FIFO order of the pick).
	queue      *nodeQueue
	prev, next *member
	seq        uint64
	// parkedRV is the resourceVersion a parked member waits to see superseded.
	parkedRV string
}

// The pick spreads claims over nodes, as the public controller's NodeSpread does
// (extensions/controllers/sandboxclaim_controller.go, pickSmart): a claim takes a member of
// the node that has the most available members left, which is the node picked least so far;
// between nodes with as many, the one whose oldest member became available first; on that
// node its oldest member (FIFO). Members not on a node yet are picked, oldest first, only when
// no member of the key is on one. The public controller counts a pool's queued members per
// node on every pick, O(members); here each node's available members are a FIFO list and the
// nodes a heap ordered by (count, oldest), so a pick is O(log nodes) and touches no member but
// the one it takes.

// nodeQueue is the available members of one key on one node, oldest first.
type nodeQueue struct {
	node       string
	head, tail *member
	n          int
	// index is the queue's position in its bucket's heap; -1 when not in it.
	index int
}

func (q *nodeQueue) push(m *member) {
	m.queue, m.prev, m.next = q, q.tail, nil
	if q.tail != nil {
		q.tail.next = m
	} else {
		q.head = m
	}
	q.tail = m
	q.n++
}

func (q *nodeQueue) unlink(m *member) {
	if m.prev != nil {
		m.prev.next = m.next
	} else {
		q.head = m.next
	}
	if m.next != nil {
		m.next.prev = m.prev
	} else {
		q.tail = m.prev
	}
	m.queue, m.prev, m.next = nil, nil, nil
	q.n--
}

// nodeHeap orders a bucket's node queues for the pick: most available members first, then
// the one whose oldest member is oldest.
type nodeHeap []*nodeQueue

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	return h[i].head.seq < h[j].head.seq
}
func (h nodeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *nodeHeap) Push(x any) {
	q := x.(*nodeQueue)
	q.index = len(*h)
	*h = append(*h, q)
}
func (h *nodeHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	q.index = -1
	return q
}

type bucket struct {
	// nodes are the queues of available members on a node, by node name; heap orders those
	// that are not empty; unscheduled holds the available members not on a node yet.
	nodes       map[string]*nodeQueue
	heap        nodeHeap
	unscheduled nodeQueue
	// starting holds the members not ready yet, in the order they appeared (PickStarting).
	starting  nodeQueue
	available int
	pending   int
	reserved  int
	// waiters are claims that found no member and wait for one, oldest first.
	waiters []types.NamespacedName
}

func (b *bucket) empty() bool {
	return b.available == 0 && b.pending == 0 && b.reserved == 0 && len(b.waiters) == 0
}

// add makes m available on its node, the newest there.
func (b *bucket) add(m *member, seq uint64) {
	m.seq = seq
	node := m.sb.Status.NodeName
	if node == "" {
		b.unscheduled.push(m)
		b.available++
		return
	}
	q := b.nodes[node]
	if q == nil {
		if b.nodes == nil {
			b.nodes = map[string]*nodeQueue{}
		}
		q = &nodeQueue{node: node, index: -1}
		b.nodes[node] = q
	}
	q.push(m)
	b.available++
	if q.index < 0 {
		heap.Push(&b.heap, q)
	} else {
		heap.Fix(&b.heap, q.index)
	}
}

// take removes the available member m from its node's queue.
func (b *bucket) take(m *member) {
	q := m.queue
	q.unlink(m)
	b.available--
	switch {
	case q == &b.unscheduled:
	case q.n == 0:
		heap.Remove(&b.heap, q.index)
		delete(b.nodes, q.node)
	default:
		// Its count fell, and its oldest member changed when m was it.
		heap.Fix(&b.heap, q.index)
	}
}

// next is the member the pick takes: see the NodeSpread comment above.
func (b *bucket) next() *member {
	if len(b.heap) > 0 {
		return b.heap[0].head
	}
	return b.unscheduled.head
}

// warmIndex is the in-memory index of warm pool members that serves claims without a List:
// per memberKey the ready, unbound members, per node, which a pick takes from in
// O(log nodes) (see the NodeSpread comment above). It is fed by
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
	// seq numbers the members in the order they became available.
	seq uint64
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

// Observe takes the informer's current version of a Sandbox. When this makes a member
// available, or adds a member that is starting, it returns the claim that has waited longest
// for one with its key, if any, for the caller to wake: a claim takes a starting member
// rather than wait for it (PickStarting).
func (x *warmIndex) Observe(sb *agentsv1beta1.Sandbox) (wake types.NamespacedName, ok bool) {
	nn := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	key, isMember, ready := policy.MemberKeyOf(sb)
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
	added := m == nil
	if added {
		m = &member{key: key, state: stateParked} // counted nowhere until setState
		x.members[nn] = m
		x.pools[poolName(key)]++
	}
	m.sb = sb
	if m.state == stateReserved {
		return types.NamespacedName{}, false // the claim holding it decides
	}
	if !ready {
		x.setState(m, statePending)
		if added && startable(sb) {
			return x.popWaiter(key)
		}
		return types.NamespacedName{}, false
	}
	switch m.state {
	case stateParked:
		if m.parkedRV == sb.ResourceVersion {
			return types.NamespacedName{}, false // a resync: nothing new
		}
	case stateAvailable:
		if m.queue.node != sb.Status.NodeName {
			// Scheduled (or moved) since: it joins its node's queue.
			x.setState(m, statePending)
			x.setState(m, stateAvailable)
		}
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
	if b == nil || b.available == 0 {
		return nil, false
	}
	m := b.next()
	x.setState(m, stateReserved)
	return m.sb, true
}

// PickStarting reserves the member of key that is not ready yet and appeared first, of
// those not known to be stuck (startable), and returns the cached Sandbox (shared: do not
// modify it). A claim that finds no ready member takes one that is starting rather than start
// another Sandbox beside it: its start is under way, and once the claim binds it, it is the
// claim's and is served before the pool's other members (sandboxPriorities). The public
// controller adopts a member that is not ready as well when none is. Every PickStarting that
// returns a member must be followed by one Release of it.
func (x *warmIndex) PickStarting(key memberKey) (*agentsv1beta1.Sandbox, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.buckets[key]
	if b == nil || b.pending == 0 {
		return nil, false
	}
	for m := b.starting.head; m != nil; m = m.next {
		if startable(m.sb) {
			x.setState(m, stateReserved)
			return m.sb, true
		}
	}
	return nil, false
}

// startable reports whether a member that is not ready can be taken by a claim: not when its
// pod is known not to fit anywhere (PodScheduled False), which the claim would inherit; a
// cold start then is no better, but may find room where the member did not, and the claim
// keeps its grace (DefaultColdStartGrace) to see the member through first.
func startable(sb *agentsv1beta1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionPodScheduled)
	return c == nil || c.Status != metav1.ConditionFalse
}

// Release ends the reservation of a picked member with the outcome of the binding attempt.
// sb is the Sandbox Pick or PickStarting returned.
func (x *warmIndex) Release(sb *agentsv1beta1.Sandbox, outcome releaseOutcome) {
	nn := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	m := x.members[nn]
	if m == nil || m.state != stateReserved {
		return // the informer removed it meanwhile
	}
	// A refused binding was made against a version the informer has superseded meanwhile
	// (Observe keeps the newest copy while the member is reserved, a pool relabelling its
	// members for one): that newer version is what a next attempt binds from, and no event
	// will bring one newer still. Parked on the stale version, it would stay out of reach.
	if outcome == releaseRetry || (outcome == releaseRejected && m.sb.ResourceVersion != sb.ResourceVersion) {
		if _, _, ready := policy.MemberKeyOf(m.sb); ready {
			x.setState(m, stateAvailable)
		} else {
			x.setState(m, statePending)
		}
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
		return b.available, b.pending
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
		b.starting.unlink(m)
		b.pending--
	case stateReserved:
		b.reserved--
	case stateAvailable:
		b.take(m)
	}
	m.state = s
	switch s {
	case statePending:
		b.starting.push(m)
		b.pending++
	case stateReserved:
		b.reserved++
	case stateAvailable:
		x.seq++
		b.add(m, x.seq)
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
