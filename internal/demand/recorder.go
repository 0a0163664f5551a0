// Package demand records, in memory, the claims each warm pool receives and how long its
// members take to start, and estimates from them what a WarmPoolAutoscaler decides on: the
// claim rate and the claims expected during one member start-up time.
//
// # Where arrivals come from, and the merge rule
//
// A claim is seen twice: by the stamping webhook when it is admitted (the earliest signal:
// before the claim is stored, on whichever replica the Service sent the call to), and by the
// claim informer when it is created (on every replica, for every claim, but later). The
// leader's estimator merges both without counting a claim twice:
//
//   - Admitted records an arrival of the pool at the admission time, pending. It counts at
//     once, and wakes the pool's autoscalers.
//   - Created (the informer's create of a claim) carries the claim's admission time, which
//     the webhook wrote into the claim (agents.x-k8s.io/webhook-first-observed-at, to the
//     nanosecond, from the same clock). If a pending arrival of that pool has exactly that
//     time, the claim is the one this process admitted: the arrival is confirmed, not counted
//     again. Otherwise (another replica admitted it, or this process admitted it before it
//     became leader and the pending arrival expired, or no webhook ran) it is a new arrival at
//     that time (the creationTimestamp when the claim has no admission time).
//   - A pending arrival the informer does not confirm within PendingTTL is dropped: the create
//     failed after admission (a taken name, a quota), or the webhook was called again for the
//     same create (reinvocation), which stamps a new time.
//
// A follower's Admitted arrivals are never confirmed (it runs no controllers) and expire. What
// the recorder holds of a pool is what arrived in its last LongWindow (counts of 250 ms
// buckets that had arrivals) and its members' start-up samples; a pool with nothing recent and
// nothing measured is dropped every LongWindow, and a deleted pool is forgotten: a claim may
// name any pool, and tenants choose the names.
//
// # After a failover
//
// The new leader's controller starts its claim informer source, which delivers a create for
// every claim in its cache: every claim of the last LongWindow is counted again at its
// admission time at once, so the new leader's estimate is the old one's (less the claims being
// created in the second the lease changed hands, which arrive as creates right after).
// Start-up samples come back the same way, from the Ready members the Sandbox informer
// delivers (their creation and Ready transition times, to the second).
package demand

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// The estimator's windows and bounds.
const (
	// ShortWindow is the window of the fast rate, which scale-up follows.
	ShortWindow = 10 * time.Second
	// LongWindow is the window of the slow rate, which holds the estimate up after a burst,
	// and how far back arrivals are kept.
	LongWindow = 120 * time.Second
	// PendingTTL is how long an arrival admitted here waits for the informer's create.
	PendingTTL = 30 * time.Second
	// bucketWidth is the resolution of the arrival counts.
	bucketWidth = 250 * time.Millisecond
	// sweepEvery is how often the recorder drops the pools it holds nothing recent of.
	sweepEvery = LongWindow
	// expectationSlack is the part of a claim the expectation may exceed a whole number by
	// and still round down: one claim in two minutes is no reason for another member.
	expectationSlack = 0.1
)

// Recorder holds the arrivals and member start-up samples of every pool. The zero value is
// not usable: NewRecorder.
type Recorder struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	pools map[types.NamespacedName]*poolDemand
	// swept is when the pools were last swept (sweep).
	swept time.Time

	notifyMu sync.RWMutex
	notify   func(types.NamespacedName)
}

// NewRecorder returns an empty recorder reading time from clk (nil is the real clock).
func NewRecorder(clk clock.PassiveClock) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Recorder{clock: clk, pools: map[types.NamespacedName]*poolDemand{}}
}

// Now is the recorder's clock: the time Admitted records, which the webhook also writes into
// the claim.
func (r *Recorder) Now() time.Time { return r.clock.Now() }

// SetNotify sets the function Admitted calls (outside any lock) with the pool of each
// arrival: the autoscaler controller's wake-up. nil turns it off.
func (r *Recorder) SetNotify(f func(types.NamespacedName)) {
	r.notifyMu.Lock()
	defer r.notifyMu.Unlock()
	r.notify = f
}

// poolDemand is one pool's arrivals and start-up samples. Its size follows what arrived in the
// last LongWindow, not the pool: a claim may name any pool, one that does not exist too, and
// a pool the recorder holds nothing recent of is dropped (sweep).
type poolDemand struct {
	// buckets count the arrivals of the last LongWindow by bucketWidth, in time order;
	// only buckets with arrivals are held.
	buckets []bucket
	// pending are the arrivals admitted here that the informer has not confirmed, by
	// admission time (nanoseconds), with the order they expire in.
	pending      map[int64]int
	pendingOrder []int64
	startup      startupSamples
}

// bucket is the number of arrivals in the bucketWidth numbered abs since the epoch.
type bucket struct {
	abs int64
	n   int32
}

func (r *Recorder) pool(nn types.NamespacedName) *poolDemand {
	p := r.pools[nn]
	if p == nil {
		p = &poolDemand{pending: map[int64]int{}}
		r.pools[nn] = p
	}
	return p
}

// sweep drops, every sweepEvery, the pools with no arrival in the last LongWindow, nothing
// pending and no member measured or starting: what tenants' claims naming pools that never
// had a member leave behind. A measured pool is dropped when it is deleted (Forget).
func (r *Recorder) sweep(now time.Time) {
	if now.Sub(r.swept) < sweepEvery {
		return
	}
	r.swept = now
	for nn, p := range r.pools {
		p.expire(now)
		p.prune(now)
		if len(p.buckets) == 0 && len(p.pending) == 0 && len(p.startup.samples) == 0 && len(p.startup.starting) == 0 {
			delete(r.pools, nn)
		}
	}
}

// Admitted records a claim of pool admitted at at (the webhook's time: Now), pending until
// the informer's create confirms it.
func (r *Recorder) Admitted(pool types.NamespacedName, at time.Time) {
	r.mu.Lock()
	now := r.clock.Now()
	r.sweep(now)
	p := r.pool(pool)
	p.expire(now)
	p.add(at, now, 1)
	key := at.UnixNano()
	p.pending[key]++
	p.pendingOrder = append(p.pendingOrder, key)
	r.mu.Unlock()

	r.notifyMu.RLock()
	notify := r.notify
	r.notifyMu.RUnlock()
	if notify != nil {
		notify(pool)
	}
}

// Created records the informer's create of a claim of pool admitted at at (its admission
// time, or its creationTimestamp when it has none): it confirms the pending arrival of that
// exact time if there is one, else it counts a new arrival. It reports whether the arrival
// was new to the recorder.
func (r *Recorder) Created(pool types.NamespacedName, at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	r.sweep(now)
	p := r.pool(pool)
	p.expire(now)
	key := at.UnixNano()
	if n := p.pending[key]; n > 0 {
		if n == 1 {
			delete(p.pending, key)
		} else {
			p.pending[key] = n - 1
		}
		return false
	}
	return p.add(at, now, 1)
}

// add counts n arrivals at at (a time after now counts as now: another replica's clock or a
// creationTimestamp may run ahead); arrivals older than LongWindow are not kept. It reports
// whether they were counted.
func (p *poolDemand) add(at, now time.Time, n int32) bool {
	if at.After(now) {
		at = now
	}
	if !at.After(now.Add(-LongWindow)) {
		return false
	}
	p.prune(now)
	abs := at.UnixNano() / int64(bucketWidth)
	// Arrivals come in time order but for a few (another replica's, a new leader's listing).
	i, found := slices.BinarySearchFunc(p.buckets, abs, func(b bucket, abs int64) int { return cmp.Compare(b.abs, abs) })
	if found {
		p.buckets[i].n += n
	} else {
		p.buckets = slices.Insert(p.buckets, i, bucket{abs: abs, n: n})
	}
	return true
}

// prune drops the buckets that left the long window.
func (p *poolDemand) prune(now time.Time) {
	first := now.Add(-LongWindow).UnixNano() / int64(bucketWidth)
	i := 0
	for i < len(p.buckets) && p.buckets[i].abs <= first {
		i++
	}
	p.buckets = p.buckets[i:]
}

// expire drops the pending arrivals older than PendingTTL, uncounting them.
func (p *poolDemand) expire(now time.Time) {
	cutoff := now.Add(-PendingTTL).UnixNano()
	drop := 0
	for _, key := range p.pendingOrder {
		if key > cutoff {
			break
		}
		drop++
		if n := p.pending[key]; n > 0 {
			if n == 1 {
				delete(p.pending, key)
			} else {
				p.pending[key] = n - 1
			}
			p.remove(key)
		}
	}
	p.pendingOrder = p.pendingOrder[drop:]
}

// remove uncounts one arrival at the time key (nanoseconds), if its bucket is still held.
func (p *poolDemand) remove(key int64) {
	abs := key / int64(bucketWidth)
	i, found := slices.BinarySearchFunc(p.buckets, abs, func(b bucket, abs int64) int { return cmp.Compare(b.abs, abs) })
	if !found {
		return
	}
	if p.buckets[i].n--; p.buckets[i].n <= 0 {
		p.buckets = slices.Delete(p.buckets, i, i+1)
	}
}

// count is the number of arrivals in the window w ending at now.
func (p *poolDemand) count(now time.Time, w time.Duration) int {
	last := now.UnixNano() / int64(bucketWidth)
	first := last - int64(w/bucketWidth) + 1
	total := 0
	for i := len(p.buckets) - 1; i >= 0 && p.buckets[i].abs >= first; i-- {
		if p.buckets[i].abs <= last {
			total += int(p.buckets[i].n)
		}
	}
	return total
}

// Forget drops everything recorded of pool (the pool is gone).
func (r *Recorder) Forget(pool types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pools, pool)
}

// Estimate is what the recorder knows of one pool's demand at one moment.
type Estimate struct {
	// ShortWindowClaims and LongWindowClaims are the arrivals of the last ShortWindow and
	// LongWindow.
	ShortWindowClaims, LongWindowClaims int
	// Rate is the claim rate planned with (claims per second): the higher of the two
	// windows' rates, so that a burst raises it at once and it comes down slowly.
	Rate float64
	// Startup is the member start-up time planned with, and StartupSamples the members it was
	// measured on (0: DefaultStartup).
	Startup        time.Duration
	StartupSamples int
	// Expected is the claims that arrive while a new member starts: Rate × Startup, rounded
	// up (less expectationSlack), or the claims that arrived during the last Startup when
	// more (StartupWindowClaims).
	Expected int
	// StartupWindowClaims are the arrivals of the last Startup. A burst comes faster than
	// any window's average: 300 claims in one second are 30/s over ShortWindow, 60 claims
	// expected during a 2 s start-up, while the pool needs 300 members to answer the next
	// such second. What arrived during one start-up is what to plan the next one with.
	StartupWindowClaims int
}

// Estimate returns pool's demand now.
func (r *Recorder) Estimate(pool types.NamespacedName) Estimate {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pool(pool)
	now := r.clock.Now()
	p.expire(now)
	e := Estimate{ShortWindowClaims: p.count(now, ShortWindow), LongWindowClaims: p.count(now, LongWindow)}
	e.Rate = max(float64(e.ShortWindowClaims)/ShortWindow.Seconds(), float64(e.LongWindowClaims)/LongWindow.Seconds())
	e.Startup, e.StartupSamples = p.startup.percentile()
	e.StartupWindowClaims = p.count(now, max(e.Startup, bucketWidth))
	e.Expected = max(ExpectedDuring(e.Rate, e.Startup), e.StartupWindowClaims)
	return e
}

// ExpectedDuring is the number of claims arriving at rate (per second) during d, rounded up
// once it exceeds a whole number by more than expectationSlack.
func ExpectedDuring(rate float64, d time.Duration) int {
	x := rate * d.Seconds()
	if x <= 0 || math.IsNaN(x) {
		return 0
	}
	if math.IsInf(x, 1) || x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(math.Ceil(x - expectationSlack))
}
