package load

// A sustained run: claims arrive at a steady rate for minutes, each is deleted after a random
// lifetime, and the pool refills while they arrive. A burst measures a pool that is full when
// the claims come and refills after them; steady traffic never pauses, so a refill that waits
// for a quiet period (issue 12) must still keep the pool from running dry. The run records
// each claim's latency and launch, the pool every second, and what the API server did.
//
// Its floor (SustainedConfig.Floor) is the steady state with no controller: the operator
// fills the pool and is detached, and the load generator makes each claim's three writes on a
// ready member (floorClaim's writes) and refills the pool itself, one replacement per member
// taken, each a copy of one of the operator's members: the Sandbox, its pod (placed by the
// scheduler, made Ready by kwok) and the Sandbox's Ready status. Deleting a claim is one
// DELETE in both runs: the garbage collector removes its Sandbox (controlled by the claim
// since the binding) and the Sandbox's pod, as it does for the operator.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// SustainedConfig is one sustained run.
type SustainedConfig struct {
	Namespace string
	PodSpec   corev1.PodSpec
	// PoolSize is the pool's replicas.
	PoolSize int32
	// Rate is claims created per second, for Duration.
	Rate     float64
	Duration time.Duration
	// LifetimeMin and LifetimeMax bound each claim's lifetime, from its Ready to its
	// deletion, drawn uniformly with Seed.
	LifetimeMin, LifetimeMax time.Duration
	Seed                     uint64
	// PoolCreateWait bounds the wait for the pool to be full before the run; Timeout how long
	// claims still pending when the arrivals end may take to be Ready.
	PoolCreateWait time.Duration
	Timeout        time.Duration
	// StopBehind, when positive, ends the arrivals early once they have run that long and
	// are more than a tenth behind Rate: the claims not Ready yet held every slot of the load
	// generator (ten seconds' worth of claims), so the cluster does not carry the rate on this
	// machine, and more minutes of it would only measure a growing queue. The result says
	// when (Sustained.StoppedBehindSeconds).
	StopBehind time.Duration
	// Floor runs the floor (see the file's comment); Probes.DetachOperator is needed.
	Floor bool
	// FloorRoute makes the floor's claims also make sandgate's route write after each bind,
	// as Config.FloorRoute does; with the harness's floor admission, the contract floor.
	FloorRoute bool
	// RefillWorkers bounds the floor's replacements made at once; 0 is refillWorkers. A
	// replacement waits for its pod most of its time, so a floor offered more than it serves
	// (the overload scenario's probe) needs more of them, or the bound is the load
	// generator's and not the API server's.
	RefillWorkers int
	// Open offers Rate whatever the cluster does (the overload scenario): no slot waits for a
	// claim's Ready, and a create refused with 429 is counted (Sustained.Refused), not retried
	// (openClient).
	Open bool
	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// APIServerProfile and WebhookServerProfile, when set, receive CPU profiles of
	// kube-apiserver and of the process answering the webhooks over the first ProfileSeconds
	// of the arrivals.
	APIServerProfile, WebhookServerProfile string
	ProfileSeconds                         int
}

// Validate reports the settings that cannot run.
func (c SustainedConfig) Validate() error {
	var errs []error
	if c.Rate <= 0 || c.Duration <= 0 {
		errs = append(errs, errors.New("a sustained run needs a positive rate and duration"))
	}
	if c.RefillWorkers < 0 {
		errs = append(errs, errors.New("RefillWorkers must not be negative"))
	}
	if c.StopBehind < 0 {
		errs = append(errs, errors.New("StopBehind must not be negative"))
	}
	if c.FloorRoute && !c.Floor {
		errs = append(errs, errors.New("FloorRoute is a kind of floor: it needs Floor"))
	}
	if c.LifetimeMin < 0 || c.LifetimeMax < c.LifetimeMin {
		errs = append(errs, fmt.Errorf("claim lifetimes %s–%s: the minimum must be ≥ 0 and ≤ the maximum", c.LifetimeMin, c.LifetimeMax))
	}
	if c.PoolSize < 1 {
		errs = append(errs, errors.New("a sustained run needs a pool of at least one member"))
	}
	return errors.Join(errs...)
}

// ParseLifetime parses a lifetime range "5s-30s" (or one duration, "10s").
func ParseLifetime(s string) (lo, hi time.Duration, err error) {
	a, b, found := strings.Cut(s, "-")
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("parsing lifetime %q: %w", s, err)
	}
	hi = lo
	if found {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Errorf("parsing lifetime %q: %w", s, err)
		}
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("lifetime %q: want min-max with 0 ≤ min ≤ max", s)
	}
	return lo, hi, nil
}

// sustainedClaim is one claim of a sustained run.
type sustainedClaim struct {
	sent
	lifetime time.Duration
	// waited marks a floor claim that found no ready member and waited for a replacement.
	waited  bool
	deleted bool
	// deletedAt is when its delete returned (zero while it lives, or when the delete failed).
	deletedAt time.Time
	delErr    error
	// gaveUp is set when the create or the floor's writes failed.
	gaveUp atomic.Bool
}

// sustained carries a sustained run's state besides the runner's.
type sustained struct {
	r   *runner
	cfg SustainedConfig
	// cache watches the namespace's Sandboxes (and pods, for the floor's refill).
	cache cache.Cache
	// launch is each Sandbox's launch-type label as last seen: a claim's Sandbox may be gone
	// by the end of the run.
	launchMu sync.Mutex
	launch   map[string]string
	// boundTo is the claim-uid label each Sandbox (by UID) was first seen with; rebound are
	// the Sandboxes later seen with another: a binding changed, which the binding guard
	// refuses.
	boundTo map[types.UID]string
	rebound map[types.UID]bool
	// uidOf is each Sandbox name's first UID; drawnAgain the names seen with another.
	uidOf      map[string]types.UID
	drawnAgain map[string]bool

	mu     sync.Mutex
	claims []*sustainedClaim

	poolMu sync.Mutex
	pool   []report.PoolPoint

	floor *refillPool
	// settled is closed once every claim is Ready or will not be.
	settled chan struct{}
	// stoppedBehind is when the arrivals ended early (SustainedConfig.StopBehind); 0 when
	// they ran for the whole Duration.
	stoppedBehind time.Duration
}

// RunSustained runs cfg against the cluster of restCfg (an admin configuration: it reads the
// API server's /metrics).
func RunSustained(ctx context.Context, restCfg *rest.Config, cfg SustainedConfig, probes Probes) (*report.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := NewClient(openClient(restCfg, cfg.Open), cfg.Rate*3) // creates, deletes and, in the floor, refills
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: Config{
		Namespace: cfg.Namespace, PodSpec: cfg.PodSpec, WarmPoolSize: cfg.PoolSize, QPS: cfg.Rate,
		Timeout: cfg.Timeout, Progress: cfg.Progress, Floor: cfg.Floor, FloorRoute: cfg.FloorRoute,
		APIServerProfile: cfg.APIServerProfile, WebhookServerProfile: cfg.WebhookServerProfile, ProfileSeconds: cfg.ProfileSeconds,
	}, probes: probes, c: c, rest: restCfg, start: time.Now()}
	res := &report.Result{StartedAt: r.start, RefillSeconds: -1}
	s := &sustained{r: r, cfg: cfg, launch: map[string]string{}, boundTo: map[types.UID]string{}, rebound: map[types.UID]bool{},
		uidOf: map[string]types.UID{}, drawnAgain: map[string]bool{}, settled: make(chan struct{})}

	if err := r.createObjects(ctx); err != nil {
		return nil, err
	}
	fillStart := time.Now()
	if err := s.waitForPool(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the warm pool to be full: %w", err)
	}
	res.PoolFillSeconds = time.Since(fillStart).Seconds()
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	if err := s.startCache(cacheCtx, restCfg); err != nil {
		return nil, err
	}
	if cfg.Floor {
		if err := s.detach(ctx); err != nil {
			return nil, err
		}
	}
	w, err := StartClaimWatch(ctx, c, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	webhooks, err := webhookResources(ctx, c)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	res.LoadAverage = loadAverage()
	before := r.measure(ctx, res)
	window := r.startCPUWindow(ctx, w)
	runStart := time.Now()
	profiled := r.profileAPIServer(ctx)
	samplerDone := s.samplePool(cacheCtx, runStart)
	var deletes sync.WaitGroup
	lastCreate := s.fire(ctx, w, runStart, &deletes)
	s.waitForClaims(ctx, w)
	claimsCPU := window.end(ctx)
	if err := <-profiled; err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	close(s.settled)
	res.OtherWork = window.otherWork()
	res.LoadGeneratorCPUSeconds = window.selfCPU()
	lastReady := s.lastReady(w)
	if lastReady.IsZero() {
		lastReady = time.Now()
	}
	res.RunSeconds = lastReady.Sub(runStart).Seconds()
	s.progressf(w)
	r.progressf("every claim Ready or given up: deleting the claims still alive at once")
	deletes.Wait()
	// Writes that trail the deletions (garbage collection) belong to the run.
	time.Sleep(time.Second)
	stopCache()
	<-samplerDone
	if s.floor != nil {
		s.floor.stop()
	}
	after := r.measure(ctx, res)
	s.tally(res, w, runStart, lastCreate)
	r.account(res, before, after, webhooks)
	res.API.ClaimsCPUSeconds = claimsCPU
	return res, nil
}

// waitForPool waits until the pool's status shows every replica Ready, printing progress
// every five seconds.
func (s *sustained) waitForPool(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.PoolCreateWait)
	defer cancel()
	start, lastPrint := time.Now(), time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var pool extv1beta1.SandboxWarmPool
		err := s.r.c.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: poolName}, &pool)
		if err == nil && pool.Status.ReadyReplicas >= s.cfg.PoolSize && pool.Status.Replicas == s.cfg.PoolSize {
			s.r.progressf("pool filling: %d/%d ready after %s", pool.Status.ReadyReplicas, s.cfg.PoolSize, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(lastPrint) >= 5*time.Second {
			lastPrint = time.Now()
			s.r.progressf("pool filling: %d/%d ready, %d members", pool.Status.ReadyReplicas, s.cfg.PoolSize, pool.Status.Replicas)
		}
		if err := s.r.healthy(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %d/%d ready, %d members (last read: %v)", ctx.Err(), pool.Status.ReadyReplicas, s.cfg.PoolSize, pool.Status.Replicas, err)
		case <-tick.C:
		}
	}
}

// startCache starts the informers of the namespace's Sandboxes (and pods, for the floor) and
// waits for them; every Sandbox's launch type is noted as it is seen.
func (s *sustained) startCache(ctx context.Context, restCfg *rest.Config) error {
	cl, err := cache.New(restCfg, cache.Options{
		Scheme:            api.NewScheme(),
		DefaultNamespaces: map[string]cache.Config{s.cfg.Namespace: {}},
	})
	if err != nil {
		return fmt.Errorf("creating the Sandbox cache: %w", err)
	}
	inf, err := cl.GetInformer(ctx, &agentsv1beta1.Sandbox{})
	if err != nil {
		return fmt.Errorf("watching Sandboxes: %w", err)
	}
	note := func(obj any) {
		sb, ok := obj.(*agentsv1beta1.Sandbox)
		if !ok {
			return
		}
		s.launchMu.Lock()
		defer s.launchMu.Unlock()
		if lt, ok := sb.Labels[agentsv1beta1.LabelLaunchType]; ok {
			s.launch[sb.Name] = lt
		}
		s.noteBinding(sb.UID, sb.Labels[agentsv1beta1.LabelClaimUID])
		if first, ok := s.uidOf[sb.Name]; !ok {
			s.uidOf[sb.Name] = sb.UID
		} else if first != sb.UID {
			s.drawnAgain[sb.Name] = true
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
	}); err != nil {
		return fmt.Errorf("watching Sandboxes: %w", err)
	}
	if s.cfg.Floor {
		s.floor = newRefillPool(s)
		pods, err := cl.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
		if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    s.floor.podSeen,
			UpdateFunc: func(_, obj any) { s.floor.podSeen(obj) },
		}); err != nil {
			return fmt.Errorf("watching pods: %w", err)
		}
	}
	go func() { _ = cl.Start(ctx) }() // ends with ctx
	if !cl.WaitForCacheSync(ctx) {
		return errors.New("the Sandbox cache did not sync")
	}
	s.cache = cl
	return nil
}

// samplePool records the pool's unbound members and ready ones every second from start,
// from the Sandbox cache: in the floor nothing writes the pool's status.
func (s *sustained) samplePool(ctx context.Context, start time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ready, members := s.poolNow(ctx)
			s.poolMu.Lock()
			s.pool = append(s.pool, report.PoolPoint{AtSeconds: round3(time.Since(start).Seconds()), Ready: ready, Members: members})
			s.poolMu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// poolNow counts the pool's unbound members and the ready ones in the cache.
func (s *sustained) poolNow(ctx context.Context) (ready, members int32) {
	var list agentsv1beta1.SandboxList
	if err := s.cache.List(ctx, &list, client.InNamespace(s.cfg.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0
	}
	for i := range list.Items {
		sb := &list.Items[i]
		_, member := sb.Labels[agentsv1beta1.LabelWarmPoolSandbox]
		_, bound := sb.Labels[agentsv1beta1.LabelClaimUID]
		if !member || bound || !sb.DeletionTimestamp.IsZero() {
			continue
		}
		members++
		if isReadyMember(sb) {
			ready++
		}
	}
	return ready, members
}

// fire creates claims at the configured rate for the configured duration, each in its own
// goroutine (at most a few seconds' worth in flight), and schedules each one's deletion; it
// returns when the last create started.
func (s *sustained) fire(ctx context.Context, w *ClaimWatcher, start time.Time, deletes *sync.WaitGroup) time.Time {
	limiter := rate.NewLimiter(rate.Limit(s.cfg.Rate), 1)
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x5eed))
	// Claims not Ready yet hold a slot: ten seconds' worth, so that a pool that runs dry
	// slows the arrivals only when claims wait that long (AchievedRate tells).
	slots := max(256, int(10*s.cfg.Rate))
	if s.cfg.Open {
		slots = max(slots, int(s.cfg.Rate*s.cfg.Duration.Seconds())+1)
	}
	inFlight := make(chan struct{}, slots)
	lastProgress := time.Now()
	var last time.Time
	for i := 0; time.Since(start) < s.cfg.Duration; i++ {
		if err := limiter.Wait(ctx); err != nil {
			break
		}
		if behind(s.cfg, i, time.Since(start)) {
			s.stoppedBehind = time.Since(start)
			s.r.progressf("arrivals ended after %s: %d claims created, fewer than 90%% of %g/s; claims waiting for Ready hold every slot, so this machine does not carry the rate",
				s.stoppedBehind.Round(time.Second), i, s.cfg.Rate)
			break
		}
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		span := s.cfg.LifetimeMax - s.cfg.LifetimeMin
		c := &sustainedClaim{sent: sent{name: fmt.Sprintf("claim-%06d", i)}, lifetime: s.cfg.LifetimeMin}
		if span > 0 {
			c.lifetime += time.Duration(rng.Int64N(int64(span)))
		}
		last = time.Now()
		s.begin(ctx, w, c, inFlight, deletes)
		if time.Since(lastProgress) >= 5*time.Second {
			lastProgress = time.Now()
			s.progressf(w)
		}
	}
	return last
}

// begin records c among the run's claims and runs its life (sustained.claim) in a goroutine
// of deletes.
func (s *sustained) begin(ctx context.Context, w *ClaimWatcher, c *sustainedClaim, inFlight <-chan struct{}, deletes *sync.WaitGroup) {
	s.mu.Lock()
	s.claims = append(s.claims, c)
	s.mu.Unlock()
	deletes.Add(1)
	go func() {
		defer deletes.Done()
		s.claim(ctx, w, c, inFlight)
	}()
}

// behind reports whether arrivals that created created claims in elapsed should end early
// (SustainedConfig.StopBehind).
func behind(cfg SustainedConfig, created int, elapsed time.Duration) bool {
	return cfg.StopBehind > 0 && elapsed >= cfg.StopBehind && float64(created) < 0.9*cfg.Rate*elapsed.Seconds()
}

// claim makes one claim, waits for its Ready, lives its lifetime and deletes it; inFlight is
// released once it is Ready (or never will be).
func (s *sustained) claim(ctx context.Context, w *ClaimWatcher, c *sustainedClaim, inFlight <-chan struct{}) {
	released := false
	release := func() {
		if !released {
			released = true
			<-inFlight
		}
	}
	defer release()
	if s.floor != nil {
		s.floorClaim(ctx, c)
	} else {
		s.r.create(ctx, &c.sent)
	}
	if c.createErr != nil || c.floorErr != nil {
		c.gaveUp.Store(true)
	}
	if c.createErr != nil {
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		if _, ok := w.Ready(c.name); ok {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-s.settled: // never Ready: deleted all the same
			break wait
		case <-tick.C:
		}
	}
	release()
	// A lifetime shapes the traffic while claims arrive; once every claim is Ready the run's
	// latencies are measured, and the claims still alive are deleted at once rather than
	// waited for (up to LifetimeMax of idle run per cluster).
	select {
	case <-ctx.Done():
		return
	case <-time.After(c.lifetime):
	case <-s.settled:
	}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.cfg.Namespace, Name: c.name}}
	err := s.r.c.Delete(ctx, claim, client.PropagationPolicy(metav1.DeletePropagationBackground))
	s.mu.Lock()
	c.deleted, c.delErr = err == nil, client.IgnoreNotFound(err)
	if c.deleted {
		c.deletedAt = time.Now()
	}
	s.mu.Unlock()
}

// heldSandbox is a Sandbox a Ready claim named, from its Ready until its deletion (zero:
// never deleted).
type heldSandbox struct {
	sandbox, claim string
	from, until    time.Time
}

// heldTwice counts the Sandboxes two Ready claims named at the same time: one claim became
// Ready naming it before the other, which named it too, was deleted. Two claims naming one
// Sandbox name one after the other are not: a pool member is named <pool>-<5 random
// characters>, and a name freed when its Sandbox was deleted with its claim may be drawn again
// for a new member (about one run in thirty of a thousand members). A Sandbox bound again
// after its claim was deleted is counted by the cache's view of its claim-uid label instead
// (noteBinding).
func heldTwice(held []heldSandbox) []string {
	by := map[string][]heldSandbox{}
	for _, h := range held {
		by[h.sandbox] = append(by[h.sandbox], h)
	}
	var out []string
	for name, hs := range by {
		sort.Slice(hs, func(i, j int) bool { return hs[i].from.Before(hs[j].from) })
		for i := 1; i < len(hs); i++ {
			if prev := hs[i-1]; prev.until.IsZero() || hs[i].from.Before(prev.until) {
				out = append(out, fmt.Sprintf("Sandbox %s named by Ready claims %s (Ready %s, deleted %s) and %s (Ready %s)", name,
					prev.claim, prev.from.Format(time.StampMilli), orNever(prev.until), hs[i].claim, hs[i].from.Format(time.StampMilli)))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func orNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.StampMilli)
}

// noteBinding records the claim a Sandbox is bound to as the cache shows it; s.launchMu is
// held.
func (s *sustained) noteBinding(uid types.UID, claim string) {
	if claim == "" {
		return
	}
	switch first, seen := s.boundTo[uid]; {
	case !seen:
		s.boundTo[uid] = claim
	case first != claim:
		s.rebound[uid] = true
	}
}

// waitForClaims waits, after the arrivals, until every created claim is Ready or Timeout
// passes.
func (s *sustained) waitForClaims(ctx context.Context, w *ClaimWatcher) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := 0
		for _, c := range s.snapshot() {
			if _, ok := w.Ready(c.name); !ok && !c.failed() {
				pending++
			}
		}
		if pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			s.r.progressf("%d claims not Ready %s after the last create", pending, s.cfg.Timeout)
			return
		case <-tick.C:
			if err := s.r.healthy(); err != nil {
				s.r.progressf("giving up on the pending claims: %v", err)
				return
			}
		}
	}
}

// failed reports a claim whose create (or floor writes) failed: it will not become Ready.
func (c *sustainedClaim) failed() bool { return c.gaveUp.Load() }

func (s *sustained) snapshot() []*sustainedClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*sustainedClaim(nil), s.claims...)
}

func (s *sustained) lastReady(w *ClaimWatcher) time.Time {
	var last time.Time
	for _, c := range s.snapshot() {
		if obs, ok := w.Ready(c.name); ok && obs.ReadyAt.After(last) {
			last = obs.ReadyAt
		}
	}
	return last
}

// warm reports whether the Ready claim c was served warm: its Sandbox carries launch-type
// warm and, in the floor, the claim did not wait for a replacement.
func (s *sustained) warm(c *sustainedClaim, obs ReadyClaim) (warm, known bool) {
	s.launchMu.Lock()
	lt, ok := s.launch[obs.Sandbox]
	s.launchMu.Unlock()
	return ok && lt == agentsv1beta1.LaunchTypeWarm && !c.waited, ok
}

// counts says how many claims the run created so far, how many of them are Ready, and the
// percentage of those served warm.
func (s *sustained) counts(w *ClaimWatcher) (created, ready int, warmPercent float64) {
	warm := 0
	for _, c := range s.snapshot() {
		created++
		if obs, ok := w.Ready(c.name); ok {
			ready++
			if ok, _ := s.warm(c, obs); ok {
				warm++
			}
		}
	}
	if ready > 0 {
		warmPercent = 100 * float64(warm) / float64(ready)
	}
	return created, ready, warmPercent
}

// progressf prints the run so far.
func (s *sustained) progressf(w *ClaimWatcher) {
	created, ready, share := s.counts(w)
	s.poolMu.Lock()
	var p report.PoolPoint
	if n := len(s.pool); n > 0 {
		p = s.pool[n-1]
	}
	s.poolMu.Unlock()
	extra := ""
	if s.floor != nil {
		extra = fmt.Sprintf(", %d refilled", s.floor.refilled.Load())
	}
	s.r.progressf("sustained: %d claims created, %d Ready, %.1f%% warm; pool %d ready of %d members%s", created, ready, share, p.Ready, p.Members, extra)
}

// tally fills in the claims, samples, latency and the sustained figures.
func (s *sustained) tally(res *report.Result, w *ClaimWatcher, start, lastCreate time.Time) {
	claims := s.snapshot()
	sus := &report.Sustained{
		Rate: s.cfg.Rate, DurationSeconds: s.cfg.Duration.Seconds(),
		LifetimeMinSeconds: s.cfg.LifetimeMin.Seconds(), LifetimeMaxSeconds: s.cfg.LifetimeMax.Seconds(), Seed: s.cfg.Seed,
		StoppedBehindSeconds: round2(s.stoppedBehind.Seconds()),
	}
	var first time.Time
	for _, c := range claims {
		if c.createErr == nil && (first.IsZero() || c.createdAt.Before(first)) {
			first = c.createdAt
		}
	}
	var clientView, serverView, call []time.Duration
	s.mu.Lock()
	defer s.mu.Unlock()
	var held []heldSandbox
	for _, c := range claims {
		if hint, ok := refused(c.createErr); ok {
			sus.Refused++
			sus.RetryAfterSeconds = max(sus.RetryAfterSeconds, hint)
			continue
		}
		if c.createErr != nil {
			res.Claims.CreateErrors++
			if len(res.Errors) < 10 {
				res.Errors = append(res.Errors, fmt.Sprintf("creating claim %s: %v", c.name, c.createErr))
			}
			continue
		}
		res.Claims.Created++
		call = append(call, c.callTook)
		for _, err := range append(c.floorBindErrs, c.floorErr, c.delErr) {
			if err != nil && len(res.Errors) < 10 {
				res.Errors = append(res.Errors, fmt.Sprintf("claim %s: %v", c.name, err))
			}
		}
		if c.deleted {
			sus.ClaimsDeleted++
		}
		if c.delErr != nil {
			sus.DeleteErrors++
		}
		obs, ok := w.Ready(c.name)
		if !ok {
			res.Claims.NeverReady++
			continue
		}
		res.Claims.Ready++
		if obs.Sandbox != "" {
			held = append(held, heldSandbox{sandbox: obs.Sandbox, claim: c.name, from: obs.ReadyAt, until: c.deletedAt})
		}
		clientView = append(clientView, obs.ReadyAt.Sub(c.createdAt))
		if !obs.webhookAt.IsZero() {
			serverView = append(serverView, obs.ReadyAt.Sub(obs.webhookAt))
		}
		warm, known := s.warm(c, obs)
		switch {
		case !known:
			res.Claims.UnknownLaunch++
		case warm:
			res.Claims.WarmHits++
		default:
			res.Claims.ColdStarts++
		}
		res.Samples = append(res.Samples, report.Sample{
			AtSeconds: round3(c.createdAt.Sub(first).Seconds()),
			Ms:        round3(float64(obs.ReadyAt.Sub(c.createdAt)) / float64(time.Millisecond)),
			Warm:      warm,
		})
	}
	twice := heldTwice(held)
	s.launchMu.Lock()
	sus.BoundTwice, sus.NamesDrawnAgain = len(twice)+len(s.rebound), len(s.drawnAgain)
	for uid := range s.rebound {
		twice = append(twice, fmt.Sprintf("Sandbox %s bound to claim %s, later to another", uid, s.boundTo[uid]))
	}
	s.launchMu.Unlock()
	res.Errors = append(res.Errors, twice...) // every one: each is a broken promise
	res.Latency = report.Latency{Client: stats.Summarize(clientView), Server: stats.Summarize(serverView), CreateCall: stats.Summarize(call)}
	if !lastCreate.IsZero() && lastCreate.After(first) {
		sus.AchievedRate = round2(float64(len(claims)) / lastCreate.Sub(first).Seconds())
	}
	sus.WarmShare = report.WarmShare(res.Samples)
	sus.Windows = report.Windows(res.Samples, report.WindowSeconds)
	s.poolMu.Lock()
	sus.Pool = append([]report.PoolPoint(nil), s.pool...)
	s.poolMu.Unlock()
	until := lastCreate.Sub(start).Seconds()
	sus.RefillKeptUp, sus.MinReady, sus.DrySeconds = report.RefillKeptUp(sus.Pool, report.RefillGraceSeconds, until)
	if s.floor != nil {
		sus.Refilled = int(s.floor.refilled.Load())
		for _, err := range s.floor.errors() {
			if len(res.Errors) < 10 {
				res.Errors = append(res.Errors, err.Error())
			}
		}
	}
	res.Sustained = sus
}
