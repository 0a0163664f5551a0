// Package ledger reserves new claims in ClaimLedgers for admission (docs/fair-share.md): the
// mechanism that keeps a ClaimPolicy's limits exact when every replica admits claims at once.
//
// A reservation is part of one write of the ledger conditional on its resourceVersion (a JSON
// merge patch that carries it), so of two replicas that both read a ledger one claim below its
// limit, only one write lands: the other gets 409, reads the ledger again and refuses. The
// concurrent admissions of one replica to one ledger share a write (a batch), so a burst costs
// a few writes, not one per claim, and one replica's batch never conflicts with itself.
package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

// Defaults of a Reserver's bounds.
const (
	// DefaultNotCountedWait is how long a reservation waits for a ledger the leader has not
	// counted yet (a policy created or changed a moment ago) before admission gives up (503).
	DefaultNotCountedWait = 2 * time.Second
	// DefaultFlushTimeout bounds one batch's write attempts; it is below the webhook's
	// timeout (10 s), so that the API server gets an answer, not a timeout.
	DefaultFlushTimeout = 5 * time.Second
	// DefaultRefusalFlushDelay is how long the refusals of a batch that reserved nothing wait
	// before they are written: a burst of refused claims costs a write a second, not one each.
	DefaultRefusalFlushDelay = time.Second
)

// Request is one claim to reserve in one ledger.
type Request struct {
	// Ledger names the ledger.
	Ledger types.NamespacedName
	// Policy is the ClaimPolicy the claim is checked against, as the caller's cache shows it;
	// Charge what the claim counts against in it.
	Policy *tenancyv1alpha1.ClaimPolicy
	Charge fairshare.Charge
	// Reservation is what the ledger records (At is set when it is written).
	Reservation tenancyv1alpha1.Reservation
}

// ErrStale says a reservation was not decided because the caller's copy of the policy is not
// the one the ledger is counted for (the policy changed a moment ago), or the ledger was
// retired or deleted by such a change: read the policies again and retry.
var ErrStale = errors.New("the ClaimPolicy changed")

// Result is the answer to a Request: refused (Exceeded), reserved, or an error (nothing was
// decided: admission fails the create).
type Result struct {
	Exceeded []fairshare.Exceeded
	Err      error
}

// Reserver batches the reservations of one replica's admissions per ledger.
type Reserver struct {
	// Client writes ledgers. It must not be the leader-fenced client: every replica admits.
	Client client.Client
	// Cache reads the ledger a batch starts from; APIReader the ledger after a conflict.
	Cache     client.Reader
	APIReader client.Reader
	Metrics   *fairshare.Metrics
	// Now is the clock of Reservation.At; nil means time.Now.
	Now func() time.Time
	// Bounds; zero values take the defaults above.
	NotCountedWait, FlushTimeout, RefusalFlushDelay time.Duration

	mu     sync.Mutex
	queues map[types.NamespacedName]*queue
}

type op struct {
	req Request
	// release, when set, drops the reservation of that ID instead (a claim another policy
	// refused after this one reserved it).
	release string
	done    chan Result
}

// queue is one ledger's: the requests waiting for the next batch, whether a batch is being
// written, the newest copy of the ledger this replica wrote or read, and refusals not yet
// written.
type queue struct {
	pending []*op
	running bool
	// releasing counts the releases enqueued and not written yet (refuseNow).
	releasing int
	// writing are the reservations of the batch being written, until its write is answered
	// (refuseNow).
	writing  []tenancyv1alpha1.Reservation
	latest   *tenancyv1alpha1.ClaimLedger
	refusals map[string]int64
	timer    bool
}

// Reserve reserves req or says why not. It returns when the batch it joined is written, or
// ctx ends; a reservation written after that is never confirmed by a claim and ends after
// the leader's reservation TTL.
func (r *Reserver) Reserve(ctx context.Context, req Request) Result {
	if res, ok := r.refuseNow(ctx, req); ok {
		return res
	}
	o := &op{req: req, done: make(chan Result, 1)}
	r.enqueue(req.Ledger, o)
	select {
	case res := <-o.done:
		return res
	case <-ctx.Done():
		return Result{Err: fmt.Errorf("reserving the claim in ClaimLedger %s: %w", req.Ledger, ctx.Err())}
	}
}

// refuseNow answers at once a request its batch could only refuse: on the newest copy of the
// ledger this replica holds (its own last write, or its cache; only the cache before this
// replica's first write), counted for the generation of the policy the claim was checked
// against, the claim is beyond a limit even if every release queued or being written drops a
// reservation that limit counts (beyondReleases). A release is the one thing a batch does
// that lowers the usage, by one per release at most; its reservations only raise it. The
// batch would decide it on a copy no older than this one, less what those releases free,
// plus the slots it takes, and refuse it too. Without this a refusal waited for the ledger
// write in flight, and its conflicts: B's refusals in the fair-share scenario took 25 ms at
// the median and 269 ms at p99 during its bursts. The refusal is counted in the ledger with
// the queue's next write, as a batch's are.
//
// The copy also holds the reservations of the batch this replica is writing (admitted, the
// write not answered yet): the claims that filled a limit are counted from the moment they
// are decided, not from their write's answer. Otherwise every claim that came while they were
// written joined the next batch and waited for that write, and its conflicts: 55 of B's 250
// refusals took 1 to 2.5 s on a loaded machine. Should that write fail (a conflict with a
// release the leader wrote meanwhile, an error), a claim refused on its account might have
// fitted: it got a 429 a retry answers, and the usage stays exact.
func (r *Reserver) refuseNow(ctx context.Context, req Request) (Result, bool) {
	if req.Policy == nil {
		return Result{}, false
	}
	r.mu.Lock()
	q := r.queue(req.Ledger)
	releasing := q.releasing
	r.mu.Unlock()
	l, writing, err := r.newestAndWriting(ctx, req.Ledger, q)
	if err != nil || l == nil || l.Status.Retired || l.Status.CountedAt == nil || l.Status.CountedGeneration != req.Policy.Generation {
		return Result{}, false
	}
	counts := fairshare.LedgerCounts(req.Policy, withReservations(l, writing))
	ex := beyondReleases(fairshare.Exceed(req.Policy, counts, req.Charge), releasing)
	if len(ex) == 0 {
		return Result{}, false
	}
	r.deferRefusals(req.Ledger, q, map[string]int64{req.Charge.Tenant: 1})
	return Result{Exceeded: ex}, true
}

// withReservations is l with the reservations of add it does not hold yet (by ID), in a
// copy; l itself when there are none to add.
func withReservations(l *tenancyv1alpha1.ClaimLedger, add []tenancyv1alpha1.Reservation) *tenancyv1alpha1.ClaimLedger {
	var missing []tenancyv1alpha1.Reservation
	for _, a := range add {
		if !slices.ContainsFunc(l.Status.Reservations, func(x tenancyv1alpha1.Reservation) bool { return x.ID == a.ID }) {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return l
	}
	out := l.DeepCopy()
	out.Status.Reservations = append(out.Status.Reservations, missing...)
	return out
}

// beyondReleases keeps the limits of exceeded that one more claim would still exceed after
// releases releases were written: each drops at most one reservation, so it lowers the usage
// of a limit by one at most, whichever tenant and pool it counts. A limit kept is exceeded
// whatever the releases drop; none kept means a release might make room.
func beyondReleases(exceeded []fairshare.Exceeded, releases int) []fairshare.Exceeded {
	var out []fairshare.Exceeded
	for _, e := range exceeded {
		if int64(e.Used)-int64(releases) >= int64(e.Max) {
			out = append(out, e)
		}
	}
	return out
}

// CountRefusal counts a claim of tenant refused without a reservation (for an admission rate)
// in the ledger, written with its next write, at the latest RefusalFlushDelay from now.
func (r *Reserver) CountRefusal(ledger types.NamespacedName, tenant string) {
	r.mu.Lock()
	q := r.queue(ledger)
	r.mu.Unlock()
	r.deferRefusals(ledger, q, map[string]int64{tenant: 1})
}

// Release drops reservation id from the ledger with the next batch (best effort: the leader
// drops it after its TTL otherwise).
func (r *Reserver) Release(ledger types.NamespacedName, id string) {
	r.enqueue(ledger, &op{release: id, done: make(chan Result, 1)})
}

// queue is the ledger's queue, made when it has none; r.mu is held.
func (r *Reserver) queue(key types.NamespacedName) *queue {
	if r.queues == nil {
		r.queues = map[types.NamespacedName]*queue{}
	}
	q := r.queues[key]
	if q == nil {
		q = &queue{}
		r.queues[key] = q
	}
	return q
}

func (r *Reserver) enqueue(key types.NamespacedName, o *op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue(key)
	q.pending = append(q.pending, o)
	if o.release != "" {
		q.releasing++
	}
	if !q.running {
		q.running = true
		go r.drain(key, q)
	}
}

// drain writes batches until the queue is empty.
func (r *Reserver) drain(key types.NamespacedName, q *queue) {
	for {
		r.mu.Lock()
		batch := q.pending
		q.pending = nil
		var refusals map[string]int64
		if len(batch) > 0 || !q.timer {
			refusals, q.refusals = q.refusals, nil
		}
		if len(batch) == 0 && len(refusals) == 0 {
			q.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.flush(key, q, batch, refusals)
		releases := 0
		for _, o := range batch {
			if o.release != "" {
				releases++
			}
		}
		r.mu.Lock()
		q.releasing -= releases
		r.mu.Unlock()
	}
}

// flush decides a batch against the ledger and writes it, again after each conflict.
func (r *Reserver) flush(key types.NamespacedName, q *queue, batch []*op, refusals map[string]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), durationOr(r.FlushTimeout, DefaultFlushTimeout))
	defer cancel()
	base, err := r.base(ctx, key, q, batch)
	if err != nil {
		r.fail(key, q, batch, refusals, err)
		return
	}
	defer r.setWriting(q, nil)
	for {
		p := r.plan(base, batch, refusals)
		if len(p.refused) > 0 && p.changed {
			// The batch's refusals stand as decided, counting the reservations before them:
			// they are answered now, not after the write of those reservations and its
			// conflicts (the same bargain as refuseNow's), and counted with that write.
			batch = answerRefused(batch, p.results)
			refusals = addCounts(refusals, p.refused)
			p = r.plan(base, batch, refusals)
		}
		if !p.write {
			// Nothing reserved or released: the refusals stand as decided (on this replica's
			// newest copy), and are counted in the ledger a moment later, with others.
			deliver(batch, p.results)
			r.deferRefusals(key, q, p.refused)
			return
		}
		if !p.changed && len(batch) > 0 {
			// Nothing reserved or released either, but refusals of earlier batches are due
			// to be counted: the batch's refusals stand as decided, as above, and are
			// answered before that write, not after it and its conflicts. The write counts
			// them with the others.
			deliver(batch, p.results)
			batch, refusals = nil, addCounts(refusals, p.refused)
			p = r.plan(base, nil, refusals)
		}
		l := &tenancyv1alpha1.ClaimLedger{}
		l.Namespace, l.Name = key.Namespace, key.Name
		r.setWriting(q, p.added)
		err := r.Client.Patch(ctx, l, client.RawPatch(types.MergePatchType, p.patch))
		switch {
		case err == nil:
			r.Metrics.LedgerWrite(fairshare.WriterAdmission, fairshare.ResultSuccess)
			r.mu.Lock()
			q.latest, q.writing = l, nil // one step: a refusal sees them in one or the other
			r.mu.Unlock()
			deliver(batch, p.results)
			return
		case apierrors.IsNotFound(err):
			// Deleted by a change of the policy since this replica's copy.
			r.forgetQueue(key)
			r.fail(key, q, batch, refusals, fmt.Errorf("ClaimLedger %s is gone: %w", key, ErrStale))
			return
		case apierrors.IsConflict(err):
			// Another replica (or the leader) wrote the ledger since base: decide again on
			// what the API server has now.
			r.Metrics.LedgerWrite(fairshare.WriterAdmission, fairshare.ResultConflict)
			fresh := &tenancyv1alpha1.ClaimLedger{}
			if gerr := r.APIReader.Get(ctx, key, fresh); gerr != nil {
				r.fail(key, q, batch, refusals, fmt.Errorf("reading ClaimLedger %s after a conflict: %w", key, gerr))
				return
			}
			base = fresh
		default:
			r.Metrics.LedgerWrite(fairshare.WriterAdmission, fairshare.ResultError)
			r.fail(key, q, batch, refusals, fmt.Errorf("writing ClaimLedger %s: %w", key, err))
			return
		}
	}
}

// plan is what a batch does to a ledger.
type plan struct {
	// write says the ledger is to be written: changed (a reservation made or dropped), or
	// refusals to count.
	write, changed bool
	patch          []byte
	results        []Result
	refused        map[string]int64
	// added are the reservations the batch makes.
	added []tenancyv1alpha1.Reservation
}

// plan decides each request of the batch in order against base, counting the reservations
// admitted before it in the same batch, and builds the ledger's patch. A request made with
// another generation of the policy than the ledger is counted for, or against a retired
// ledger, is answered ErrStale.
func (r *Reserver) plan(base *tenancyv1alpha1.ClaimLedger, batch []*op, carried map[string]int64) plan {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	at := metav1.NewMicroTime(now())
	reservations := slices.Clone(base.Status.Reservations)
	p := plan{results: make([]Result, len(batch)), refused: map[string]int64{}}
	changed := false
	for i, o := range batch {
		if o.release != "" {
			if j := slices.IndexFunc(reservations, func(x tenancyv1alpha1.Reservation) bool { return x.ID == o.release }); j >= 0 {
				reservations = slices.Delete(reservations, j, j+1)
				changed = true
			}
			continue
		}
		if base.Status.Retired || o.req.Policy.Generation != base.Status.CountedGeneration {
			p.results[i] = Result{Err: fmt.Errorf("ClaimLedger %s/%s is counted for generation %d of ClaimPolicy %s (retired: %t), the claim was checked against generation %d: %w",
				base.Namespace, base.Name, base.Status.CountedGeneration, o.req.Policy.Name, base.Status.Retired, o.req.Policy.Generation, ErrStale)}
			continue
		}
		counts := fairshare.LedgerCounts(o.req.Policy, &tenancyv1alpha1.ClaimLedger{Status: tenancyv1alpha1.ClaimLedgerStatus{
			Counted: base.Status.Counted, Reservations: reservations}})
		if ex := fairshare.Exceed(o.req.Policy, counts, o.req.Charge); len(ex) > 0 {
			p.results[i] = Result{Exceeded: ex}
			p.refused[o.req.Charge.Tenant]++
			continue
		}
		res := o.req.Reservation
		res.At = at
		reservations = append(reservations, res)
		p.added = append(p.added, res)
		changed = true
	}
	p.changed = changed
	if !changed && len(carried) == 0 {
		return p
	}
	p.write = true
	refusals := addRefusals(base.Status.Refusals, carried, p.refused)
	body := map[string]any{
		"metadata": map[string]any{"resourceVersion": base.ResourceVersion},
		"status":   map[string]any{"reservations": reservations, "refusals": refusals},
	}
	p.patch, _ = json.Marshal(body) // maps of strings and API types always encode
	return p
}

// addRefusals adds the counts of every map to the ledger's.
func addRefusals(ledger []tenancyv1alpha1.LedgerRefusals, add ...map[string]int64) []tenancyv1alpha1.LedgerRefusals {
	out := slices.Clone(ledger)
	for _, m := range add {
		for tenant, n := range m {
			if j := slices.IndexFunc(out, func(x tenancyv1alpha1.LedgerRefusals) bool { return x.Tenant == tenant }); j >= 0 {
				out[j].Count += n
			} else {
				out = append(out, tenancyv1alpha1.LedgerRefusals{Tenant: tenant, Count: n})
			}
		}
	}
	slices.SortFunc(out, func(a, b tenancyv1alpha1.LedgerRefusals) int {
		switch {
		case a.Tenant < b.Tenant:
			return -1
		case a.Tenant > b.Tenant:
			return 1
		}
		return 0
	})
	return out
}

// addCounts is the counts of a and b by tenant, in a new map.
func addCounts(a, b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(a)+len(b))
	for _, m := range []map[string]int64{a, b} {
		for t, n := range m {
			out[t] += n
		}
	}
	return out
}

// deferRefusals keeps refusals to be written with the ledger's next write, at the latest
// RefusalFlushDelay from now.
func (r *Reserver) deferRefusals(key types.NamespacedName, q *queue, refused map[string]int64) {
	if len(refused) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if q.refusals == nil {
		q.refusals = map[string]int64{}
	}
	for t, n := range refused {
		q.refusals[t] += n
	}
	if q.timer {
		return
	}
	q.timer = true
	time.AfterFunc(durationOr(r.RefusalFlushDelay, DefaultRefusalFlushDelay), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		q.timer = false
		if !q.running && len(q.refusals) > 0 {
			q.running = true
			go r.drain(key, q)
		}
	})
}

// fail answers every request of the batch with err, and keeps the refusals for a later write.
func (r *Reserver) fail(key types.NamespacedName, q *queue, batch []*op, refusals map[string]int64, err error) {
	ctrl.Log.WithName("claim-ledger").V(1).Info("reservation batch failed", "ledger", key.String(), "requests", len(batch), "error", err.Error())
	results := make([]Result, len(batch))
	for i := range results {
		results[i] = Result{Err: err}
	}
	deliver(batch, results)
	r.deferRefusals(key, q, refusals)
}

func deliver(batch []*op, results []Result) {
	for i, o := range batch {
		o.done <- results[i]
	}
}

// answerRefused answers the requests of the batch that results refuse and returns the rest.
func answerRefused(batch []*op, results []Result) []*op {
	var rest []*op
	for i, o := range batch {
		if len(results[i].Exceeded) > 0 {
			o.done <- results[i]
			continue
		}
		rest = append(rest, o)
	}
	return rest
}

// base is the copy of the ledger a batch starts from: this replica's newest, from its own
// last write or its cache. A ledger the leader has not counted yet for the newest generation
// of the policy the batch's requests were checked against (or that does not exist yet) is
// waited for, NotCountedWait at most.
func (r *Reserver) base(ctx context.Context, key types.NamespacedName, q *queue, batch []*op) (*tenancyv1alpha1.ClaimLedger, error) {
	var generation int64
	for _, o := range batch {
		if o.req.Policy != nil {
			generation = max(generation, o.req.Policy.Generation)
		}
	}
	deadline := time.Now().Add(durationOr(r.NotCountedWait, DefaultNotCountedWait))
	for {
		l, err := r.newest(ctx, key, q)
		if err != nil {
			return nil, err
		}
		if l != nil && (l.Status.Retired || (l.Status.CountedAt != nil && l.Status.CountedGeneration >= generation)) {
			return l.DeepCopy(), nil
		}
		if time.Now().After(deadline) {
			return nil, notCounted(key, batch)
		}
		select {
		case <-ctx.Done():
			return nil, notCounted(key, batch)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newest is this replica's newest copy of the ledger: its own last write (q.latest) or its
// cache, whichever is newer; nil when it has neither.
func (r *Reserver) newest(ctx context.Context, key types.NamespacedName, q *queue) (*tenancyv1alpha1.ClaimLedger, error) {
	l, _, err := r.newestAndWriting(ctx, key, q)
	return l, err
}

// newestAndWriting is newest, and the reservations of the batch being written, read at
// the same moment: a write answered meanwhile has moved them into the newest copy.
func (r *Reserver) newestAndWriting(ctx context.Context, key types.NamespacedName, q *queue) (*tenancyv1alpha1.ClaimLedger, []tenancyv1alpha1.Reservation, error) {
	cached := &tenancyv1alpha1.ClaimLedger{}
	if err := r.Cache.Get(ctx, key, cached); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("reading ClaimLedger %s: %w", key, err)
		}
		cached = nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return newer(q.latest, cached), q.writing, nil
}

// setWriting records the reservations of the batch being written (nil: none).
func (r *Reserver) setWriting(q *queue, added []tenancyv1alpha1.Reservation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q.writing = added
}

// forgetQueue drops the queue of a deleted ledger (its last copy with it).
func (r *Reserver) forgetQueue(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.queues[key]; q != nil {
		q.latest = nil
	}
}

// notCounted is the 503 of a claim whose policy's ledger the leader has not counted yet.
func notCounted(key types.NamespacedName, batch []*op) error {
	policy := key.Name
	for _, o := range batch {
		if o.req.Policy != nil {
			policy = o.req.Policy.Name
			break
		}
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf(
		"the claims of ClaimPolicy %s/%s are not counted yet (ClaimLedger %s): the operator's leader counts them when a policy is created or changed; retry in a moment",
		key.Namespace, policy, key.Name))
}

// newer returns the newer of two copies of one object by resourceVersion (etcd's revision, a
// number), either when the other is nil, and b when a version is not a number.
func newer(a, b *tenancyv1alpha1.ClaimLedger) *tenancyv1alpha1.ClaimLedger {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	av, aerr := strconv.ParseUint(a.ResourceVersion, 10, 64)
	bv, berr := strconv.ParseUint(b.ResourceVersion, 10, 64)
	if aerr == nil && berr == nil && av > bv {
		return a
	}
	return b
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
