package webhooks

// Admission-time load shedding of new claims (issue 37). Past the rate a cluster sustains,
// every claim admitted beyond it waits behind the others, and the writes and watch events of a
// growing backlog take the API server's CPU from the claims being served: the cluster serves
// fewer claims a second than it could, and each of them late. The stamping webhook refuses new
// claims instead while the claims it admitted are served too late, with 429 Too Many Requests
// and a retry delay, as the API server's own Priority and Fairness does: the claims it admits
// are served at the rate the cluster sustains, and the refused ones are told when to come back
// (docs/design.md, "Past the sustainable rate").
//
// "Too late" is a test of a standing queue: more than half the claims that became Ready in the
// last ServedWindow (or, when none did, the last one served, for a while) spent longer than
// MaxWait in the control plane. Half, not CoDel's fastest: a claim that takes a member the pool
// just refilled is served in a fraction of a second past any backlog of cold starts, and one
// such claim in the window opened the gate to a flood (measured: twice the sustainable rate
// admitted at 1.9 times the rate served, p50 15 s). A claim's time in the control plane is its
// time from admission to Ready less the part of it its pod spent starting on its node (from the
// pod seen on a node to the pod seen Ready): the operator's queues, its writes, the API
// server's answers, the scheduler's queue count; an image pull, a slow container or a simulated
// start-up does not. A backlog waits in the first, never in the second: a pool run dry on a
// cluster whose pods take 8 s to start serves every claim 8 s late with nothing backed up, and
// the old rule, which timed the whole way, refused that steady cold load (issue 37's
// realistic-profile run). A burst the cluster absorbs still serves most claims in time; a rate
// beyond it leaves most late. In a lull (none served in the window) the claims waiting are
// timed too, the same way: a flood whose first claims took the pool's warm members and whose
// cold rest is not served at all is behind, however fast the last claim served was. A claim
// that never becomes Ready (a pod that never starts, a missing template) is never served: it
// moves nothing while others are served, in a lull it can refuse only creators holding at
// least their fair share of the claims waiting (mostly its own), and past the lull's horizon
// the gate opens whatever waits: no tenant can hold the gate shut for others that way. Who is
// refused first is decided by the claims waiting (admitted, not yet Ready): a creator holding
// fewer of them than its fair share is still admitted.

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimShed refuses new claims while the claims admitted are served too late (see the file's
// comment). Its state, the claims waiting, the claims served lately and the start-ups of the
// Sandboxes' pods, is fed by the manager's claim and pod informers (Handler, PodHandler);
// every replica keeps its own from the same informers' view.
type ClaimShed struct {
	// MaxWait is how long half the claims served lately may spend in the control plane (their
	// time from admission to Ready less their pods' start-up on their nodes) before new claims
	// are refused; 0 turns shedding off.
	MaxWait time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu      sync.Mutex
	waiting map[types.NamespacedName]WaitingClaim
	served  []Served
	// last is the last claim served, whenever.
	last Served
	// starts are the start-ups of the Sandboxes' pods, by the Sandbox (namespace and name).
	starts map[types.NamespacedName]podStart
	// sandboxOf names the Sandbox of each claim that has one (its controller), by the claim.
	sandboxOf map[types.NamespacedName]string
	// wasReady are the claims seen Ready once: one that is not Ready any more (expired with
	// its claim retained, its pod lost) was served, and waits for nothing admission gave it.
	wasReady map[types.NamespacedName]struct{}
}

// ServedWindow is how far back the claims served count: long enough to hold a few claims at
// any rate worth shedding, short enough that the gate opens within seconds of the backlog
// clearing.
const ServedWindow = 2 * time.Second

// servedHorizon is how long the last claim served speaks for the cluster when none was served
// within ServedWindow: a backlog served slowly has gaps longer than the window between its
// claims, and a gate that opened in every gap let the backlog grow (measured: p50 60 s at
// twice the sustainable rate). Past it, the gate opens even without a claim served in time:
// claims that never become Ready must not hold it shut for ever.
func servedHorizon(maxWait time.Duration) time.Duration { return max(30*time.Second, 10*maxWait) }

// WaitingClaim is a claim admitted and not Ready yet: since its admission, by its creator;
// Own of that time so far spent in the control plane (its pod's start-up so far not counted);
// Stuck when the claim's Ready condition gives a reason it will not be served without a
// change (a missing template or pool, refused metadata): no queue holds it.
type WaitingClaim struct {
	Since   time.Time
	Creator string
	Own     time.Duration
	Stuck   bool
}

// inFlight are the reasons of a claim's Ready=False on its way to Ready.
var inFlight = map[string]bool{
	extv1beta1.ReasonSandboxCreatePending: true, extv1beta1.ReasonSandboxNotReady: true,
	agentsv1beta1.ReasonDependenciesNotReady: true,
}

// stuck says whether the claim's Ready condition is False for a reason other than being on
// its way.
func stuck(c *extv1beta1.SandboxClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
	return cond != nil && cond.Status == metav1.ConditionFalse && !inFlight[cond.Reason]
}

// Served is a claim seen becoming Ready at At, Took after its admission, PodStartup of which
// its pod spent starting on its node.
type Served struct {
	At         time.Time
	Took       time.Duration
	PodStartup time.Duration
}

// Own is the claim's time in the control plane: what a backlog makes longer.
func (s Served) Own() time.Duration { return max(0, s.Took-s.PodStartup) }

// podStart is a pod's start-up as this process saw it: From its first sight on a node (or
// Ready) to its first sight Ready (zero while it starts). UID tells a replaced pod's apart.
type podStart struct {
	UID      types.UID
	From, To time.Time
}

// admittedAt is when c was admitted: its webhook-first-observed-at, else its creation.
func admittedAt(c *extv1beta1.SandboxClaim) time.Time {
	if at, err := time.Parse(time.RFC3339Nano, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]); err == nil {
		return at
	}
	return c.CreationTimestamp.Time
}

func podIsReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (s *ClaimShed) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Observe records the claim as the informer last delivered it. A claim seen waiting and then
// Ready is served, now; one first seen Ready (the informer's first list) is nobody's news.
func (s *ClaimShed) Observe(c *extv1beta1.SandboxClaim) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	w, known := s.waiting[key]
	_, served := s.wasReady[key]
	switch {
	case !c.DeletionTimestamp.IsZero():
		delete(s.waiting, key)
		delete(s.sandboxOf, key)
		delete(s.wasReady, key)
	case meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady):
		delete(s.waiting, key)
		defer delete(s.sandboxOf, key)
		if s.wasReady == nil {
			s.wasReady = map[types.NamespacedName]struct{}{}
		}
		s.wasReady[key] = struct{}{}
		if known {
			sandbox := c.Status.Sandbox.Name
			if sandbox == "" {
				sandbox = s.sandboxOf[key]
			}
			s.last = Served{At: now, Took: now.Sub(w.Since), PodStartup: s.podStartup(c.Namespace, sandbox, w.Since, now)}
			s.served = append(pruneServed(s.served, now), s.last)
		}
	case served:
		// Served once, not Ready now: nothing in admission's queue.
	case !known:
		if s.waiting == nil {
			s.waiting = map[types.NamespacedName]WaitingClaim{}
		}
		s.waiting[key] = WaitingClaim{Since: admittedAt(c), Creator: c.Annotations[agentsv1beta1.AnnotationCreator], Stuck: stuck(c)}
	default:
		w.Stuck = stuck(c)
		s.waiting[key] = w
	}
}

// podStartup is how much of the time from `from` to `to` the pod of Sandbox ns/sandbox spent
// starting on its node; 0 without a Sandbox or a pod seen.
func (s *ClaimShed) podStartup(ns, sandbox string, from, to time.Time) time.Duration {
	if sandbox == "" {
		return 0
	}
	st, ok := s.starts[types.NamespacedName{Namespace: ns, Name: sandbox}]
	if !ok {
		return 0
	}
	return st.within(from, to)
}

// ObserveSandbox records which claim a Sandbox is bound to (its controller), so that a claim
// waiting for its Sandbox's pod to start is not taken for one waiting in the control plane.
func (s *ClaimShed) ObserveSandbox(sb *agentsv1beta1.Sandbox) {
	owner := policy.ControllerOf(sb, policy.ClaimKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: owner.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, waits := s.waiting[key]; !waits || !sb.DeletionTimestamp.IsZero() {
		return // only a waiting claim's Sandbox is of use; a served claim's is dropped
	}
	if s.sandboxOf == nil {
		s.sandboxOf = map[types.NamespacedName]string{}
	}
	s.sandboxOf[key] = sb.Name
}

// within is how much of the interval from `from` to `to` the pod spent starting: a pod still
// starting has started until `to`.
func (st podStart) within(from, to time.Time) time.Duration {
	end := st.To
	if end.IsZero() || end.After(to) {
		end = to
	}
	begin := st.From
	if begin.Before(from) {
		begin = from
	}
	return max(0, end.Sub(begin))
}

// ObservePod records the start-up of a Sandbox's pod (its controller): from the first sight
// of it on a node, the scheduler's work done, to the first sight of it Ready. Both ends are
// seen through the same informer, so its delay cancels out. A pod first seen Ready started
// before this process watched, or in one step (a pod without a start-up time): nothing of a
// claim's time is its start-up's.
func (s *ClaimShed) ObservePod(p *corev1.Pod) {
	owner := policy.ControllerOf(p, policy.SandboxKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: owner.Name}
	now := s.now()
	ready := podIsReady(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.starts[key]
	switch {
	case !p.DeletionTimestamp.IsZero():
		delete(s.starts, key)
	case !known || st.UID != p.UID:
		if p.Spec.NodeName == "" && !ready {
			return // not placed yet: the scheduler's queue is the control plane's
		}
		if s.starts == nil {
			s.starts = map[types.NamespacedName]podStart{}
		}
		st = podStart{UID: p.UID, From: now}
		if ready {
			st.To = now
		}
		s.starts[key] = st
	case st.To.IsZero() && ready:
		st.To = now
		s.starts[key] = st
	}
}

// pruneServed drops the claims served before the window that ends at now.
func pruneServed(served []Served, now time.Time) []Served {
	i := 0
	for i < len(served) && now.Sub(served[i].At) > ServedWindow {
		i++
	}
	return served[i:]
}

// Forget drops a deleted claim.
func (s *ClaimShed) Forget(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, types.NamespacedName{Namespace: namespace, Name: name})
	delete(s.sandboxOf, types.NamespacedName{Namespace: namespace, Name: name})
	delete(s.wasReady, types.NamespacedName{Namespace: namespace, Name: name})
}

// Handler is the claim informer's event handler that keeps s current.
func (s *ClaimShed) Handler() toolscache.ResourceEventHandler {
	return eventHandler(s.Observe, func(c *extv1beta1.SandboxClaim) { s.Forget(c.Namespace, c.Name) })
}

// SandboxHandler is the Sandbox informer's event handler that keeps the claims' Sandboxes
// current (a deleted Sandbox leaves its claim's entry until the claim is served or deleted).
func (s *ClaimShed) SandboxHandler() toolscache.ResourceEventHandler {
	return eventHandler(s.ObserveSandbox, nil)
}

// PodHandler is the pod informer's event handler that keeps the pods' start-ups current.
func (s *ClaimShed) PodHandler() toolscache.ResourceEventHandler {
	return eventHandler(s.ObservePod, func(p *corev1.Pod) {
		p = p.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: s.now()}
		s.ObservePod(p)
	})
}

// eventHandler calls observe with each object of type T an informer adds or updates, and gone
// with each it deletes (the last state known for a delete it missed); gone nil ignores deletes.
func eventHandler[T any](observe, gone func(T)) toolscache.ResourceEventHandler {
	call := func(obj any, f func(T)) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if t, ok := obj.(T); ok {
			f(t)
		}
	}
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(obj, observe) },
		UpdateFunc: func(_, obj any) { call(obj, observe) },
	}
	if gone != nil {
		h.DeleteFunc = func(obj any) { call(obj, gone) }
	}
	return h
}

// Admit refuses a new claim of creator c while the claims admitted are served too late
// (ShedDecision); nil admits it. A nil ClaimShed, or one with MaxWait 0, admits every claim.
func (s *ClaimShed) Admit(creator string, c *extv1beta1.SandboxClaim) error {
	if s == nil || s.MaxWait <= 0 {
		return nil
	}
	now := s.now()
	s.mu.Lock()
	s.served = pruneServed(s.served, now)
	served := append([]Served(nil), s.served...)
	lull := len(served) == 0 && !s.last.At.IsZero() && now.Sub(s.last.At) <= servedHorizon(s.MaxWait)
	if lull {
		served = []Served{s.last}
	}
	waiting := make([]WaitingClaim, 0, len(s.waiting))
	for key, w := range s.waiting {
		w.Own = max(0, now.Sub(w.Since)-s.podStartup(key.Namespace, s.sandboxOf[key], w.Since, now))
		waiting = append(waiting, w)
	}
	s.mu.Unlock()
	d := ShedDecision(s.MaxWait, served, lull, waiting, creator)
	if !d.Refuse {
		return nil
	}
	return shedRefusal(c, s.MaxWait, d)
}

// Shed is what ShedDecision decided, and why.
type Shed struct {
	Refuse bool
	// Served is how many claims were served in the window, Median the time the faster half
	// of them spent in the control plane at most (Served.Own; of an even count, the lower
	// middle); Waiting how many claims wait, Mine how many of them are the creator's, Share
	// the creator's fair share of them.
	Served               int
	Median               time.Duration
	Waiting, Mine, Share int
	// Lull says no claim was served in the window (Served holds the last one served), and
	// WaitingMedian the time the faster half of the waiting claims spent in the control plane
	// so far, at most; Stalled that it decided.
	Lull          bool
	WaitingMedian time.Duration
	Stalled       bool
}

// ShedDecision decides whether a new claim of creator is refused: when more than half the
// claims served lately spent longer than maxWait in the control plane (a standing queue), or,
// in a lull (none served in the window: served holds the last one served, for a while), when
// more than half the claims waiting on their way (not Stuck) have spent longer than maxWait
// there so far (a backlog
// that stalled the cluster: its first claims were served fast, its later ones are not served
// at all); unless creator holds fewer of the waiting claims than its fair share (the waiting
// claims ÷ the creators holding some, rounded up). Nothing served lately, or nothing waiting,
// refuses nothing: the gate closes on a backlog that is being served late, and opens once
// claims are served in time again or the backlog is gone.
func ShedDecision(maxWait time.Duration, served []Served, lull bool, waiting []WaitingClaim, creator string) Shed {
	d := Shed{Served: len(served), Waiting: len(waiting), Lull: lull}
	own := make([]time.Duration, len(served))
	for i, sv := range served {
		own[i] = sv.Own()
	}
	d.Median = lowerMedian(own)
	if lull {
		var ages []time.Duration
		for _, w := range waiting {
			if !w.Stuck {
				ages = append(ages, w.Own)
			}
		}
		d.WaitingMedian = lowerMedian(ages)
		d.Stalled = d.Median <= maxWait && d.WaitingMedian > maxWait
	}
	if len(served) == 0 || (d.Median <= maxWait && !d.Stalled) || len(waiting) == 0 {
		return d
	}
	creators := map[string]int{}
	for _, w := range waiting {
		creators[w.Creator]++
	}
	d.Mine = creators[creator]
	d.Share = (len(waiting) + len(creators) - 1) / len(creators)
	d.Refuse = d.Mine >= d.Share
	return d
}

// lowerMedian is the middle of ds, the lower one of an even count; 0 of none. ds is sorted.
func lowerMedian(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2]
}

// shedRefusal is the 429 of a claim refused while the cluster is behind: the shape of a
// ClaimPolicy's refusal (refusal), with a retry delay: the backlog clears by itself within
// about maxWait, so client-go's own retry of a 429 carrying Retry-After (up to ten, inside
// the caller's Create: the public SDK's CreateSandbox included) is the right reaction, where
// a policy's limit clears only when the tenant deletes a claim.
func shedRefusal(c *extv1beta1.SandboxClaim, maxWait time.Duration, d Shed) error {
	name := c.Name
	if name == "" {
		name = c.GenerateName + "*"
	}
	retry := RetryAfter(maxWait)
	behind := fmt.Sprintf("more than half the %d claims served in the last %s spent at least %s from admission to Ready outside their pods' start-up (more than %s)",
		d.Served, ServedWindow, d.Median.Round(100*time.Millisecond), maxWait)
	if d.Stalled {
		behind = fmt.Sprintf("no claim was served in the last %s and more than half the %d claims waiting have spent at least %s since admission outside their pods' start-up (more than %s)",
			ServedWindow, d.Waiting, d.WaitingMedian.Round(100*time.Millisecond), maxWait)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusTooManyRequests,
		Reason: metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("SandboxClaim.%s %q is refused for now: the cluster is behind, %s, and %d of the %d claims waiting are this creator's; retry after %d s",
			claimGK.Group, name, behind, d.Mine, d.Waiting, retry),
		Details: &metav1.StatusDetails{Group: claimGK.Group, Kind: claimGK.Kind, Name: c.Name, RetryAfterSeconds: retry},
	}}
}

// RetryAfter is the retry delay of a refusal: maxWait in whole seconds, at least one.
func RetryAfter(maxWait time.Duration) int32 {
	return int32(max(1, math.Ceil(maxWait.Seconds())))
}
