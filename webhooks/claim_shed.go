package webhooks

// Admission-time load shedding of new claims (issue 37). Past the rate a cluster sustains,
// every claim admitted beyond it waits behind the others, and the writes and watch events of a
// growing backlog take the API server's CPU from the claims being served: the cluster serves
// fewer claims a second than it could, and each of them late. The stamping webhook refuses a
// new claim instead when it would wait too long, with 429 Too Many Requests and a retry delay,
// as the API server's own Priority and Fairness does: the claims it admits are served at the
// rate the cluster sustains, and the refused ones are told when to come back (docs/design.md,
// "Past the sustainable rate").
//
// "Too long" is predicted, not observed: the claims ahead of a new one in the control plane,
// divided by the rate claims are being served (Little's law), against MaxWait. Rules that
// timed the claims served, or waiting, learnt of a backlog only once its claims were MaxWait
// old, by which time MaxWait × the arrival rate had been admitted behind them (measured: at
// four times the sustainable rate, p50 27–40 s with a 5 s limit). A prediction closes the
// gate as the backlog forms. Ahead of a new claim are the claims admitted and on their way
// that have not reached their pod's start-up: those without a Sandbox yet, beyond the ready
// members of their pool that can serve them at once (a burst the pool holds is no backlog),
// and those whose Sandbox's pod its node's kubelet has not taken up yet (the claim
// controller's queue, the cold start's writes, the scheduler's queue, the kubelet's). A kubelet
// takes a pod up by setting its status.startTime, before it pulls the images: a claim whose pod
// has one waits for its containers to start, which is the pod's cost at any rate, not a queue
// admission can shorten; a claim whose pod is Ready waits only for its last writes. A pod on a
// node without a startTime waits for its kubelet, which writes its pods' status one at a time:
// past the rate its node sustains, pods queue there (measured: on the bench's three simulated
// nodes, about a hundred claims' pods, 5-11 s from placement to Ready, at four times the
// sustainable rate, which a rule that stopped at the node did not see). A kubelet kept busy
// needs pods queued in front of it, though, or it idles while the next claims cross the
// control plane: a pod on its node for less than MaxWait is that queue, not a backlog. The
// rate is the claims that became Ready in the last RateWindow (or since the work in hand
// began, when later). Below MinBacklog claims ahead, nothing is refused: a fresh cluster has
// served nothing to measure a rate by, and a handful of claims is no backlog. A cluster that
// served nothing for a long while (servedHorizon) with claims ahead is stalled, which
// refusing does not mend: the gate opens.
// A claim that never becomes Ready for a reason that waits for a change (Stuck: a missing
// template or pool) is in no queue. Who is refused is decided by each creator's part of the
// claims ahead: one holding less than its fair share is still admitted, so a tenant that
// floods the cluster is refused first, and one with nothing ahead (its claims served by the
// pool's ready members, say) is not.

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimShed refuses a new claim when it would wait too long in the control plane (see the
// file's comment). Its state, the claims waiting, the claims served lately, the pool members
// ready to serve and the Sandboxes whose pods are started, is fed by the manager's claim,
// Sandbox and pod informers (Handler, SandboxHandler, PodHandler), and by the claims it admits
// until the claim informer shows them; every replica keeps its own from the same informers.
type ClaimShed struct {
	// MaxWait is the longest a new claim is predicted to wait in the control plane (the
	// claims ahead of it ÷ the rate claims are served) before it is refused; 0 turns shedding
	// off.
	MaxWait time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Synced reports whether the informers feeding the shed have delivered what the API server
	// held when they started; nil is always. Until then it knows nothing of the claims ahead,
	// and admitting every claim then let a flood through a replica restarted under load (the
	// 20/s soak, both replicas restarted within 6 s: 700 claims admitted in 20 s, served over
	// minutes): it refuses every claim instead, for the second or so its informers take.
	Synced func() bool

	mu      sync.Mutex
	waiting map[types.NamespacedName]WaitingClaim
	// served are the claims that became Ready within RateWindow, in order.
	served []servedClaim
	// last is when the last claim was served, whenever.
	last time.Time
	// pods are the Sandboxes' pods as far as they have come, by the Sandbox.
	pods map[types.NamespacedName]podProgress
	// sandboxOf names the Sandbox of each claim that has one (its controller), by the claim.
	sandboxOf map[types.NamespacedName]string
	// wasReady are the claims seen Ready once, by their UIDs: one that is not Ready any more
	// (expired with its claim retained, its pod lost) was served, and waits for nothing
	// admission gave it; a claim made again under its name is another.
	wasReady map[types.NamespacedName]types.UID
	// free are the ready, unbound pool members, by the Sandbox: what each can serve; ready
	// counts them by what they serve.
	free  map[types.NamespacedName]policy.MemberKey
	ready map[policy.MemberKey]int
	// admitted are the claims admitted here and not yet seen by the claim informer, by
	// namespace and admission time (webhook-first-observed-at): a flood admitted faster than
	// the informer delivers must count at once.
	admitted map[admittedKey][]admittedClaim
}

// podProgress is how far a Sandbox's pod (of UID uid) has come: on a node since placedAt
// (zero: not placed), started (taken up by its kubelet, or Ready).
type podProgress struct {
	uid      types.UID
	placedAt time.Time
	started  bool
}

// servedClaim is a claim served At, admitted Since.
type servedClaim struct{ At, Since time.Time }

// RateWindow is how far back the claims served make the rate a backlog is served at: long
// enough to hold tens of claims at any rate worth shedding, short enough to follow a cluster
// that slows down within seconds.
const RateWindow = 5 * time.Second

// MinBacklog is how many claims may be ahead of a new one before any is refused: a fresh
// cluster has served nothing to measure a rate by, and a few cold starts are no backlog.
const MinBacklog = 20

// admittedTTL is how long a claim admitted here counts before the informer shows it: past it,
// its create failed after admission (a later webhook, a quota, a name taken).
const admittedTTL = 5 * time.Second

// servedHorizon is how long a cluster may serve no claim while claims wait before the gate
// opens whatever waits: a cluster that serves nothing at all is stalled, which refusing would
// not mend, and claims that never become Ready must not hold the gate shut for ever.
func servedHorizon(maxWait time.Duration) time.Duration { return max(30*time.Second, 10*maxWait) }

// WaitingClaim is a claim admitted and not Ready yet: since its admission, by its creator,
// served from Members (its pool and its template's stamp) when one is ready; Stuck when the
// claim's Ready condition gives a reason it will not be served without a change (a missing
// template or pool, refused metadata): no queue holds it.
type WaitingClaim struct {
	Since   time.Time
	Creator string
	Members policy.MemberKey
	Stuck   bool
}

type admittedKey struct{ namespace, at string }

type admittedClaim struct {
	at      time.Time
	creator string
	members policy.MemberKey
}

// inFlight are the reasons of a claim's Ready=False on its way to Ready: a reconcile that
// failed is retried, a restamped claim is served from its new version.
var inFlight = map[string]bool{
	extv1beta1.ReasonSandboxCreatePending: true, extv1beta1.ReasonSandboxNotReady: true,
	agentsv1beta1.ReasonDependenciesNotReady: true, extv1beta1.ReasonReconcilerError: true,
	extv1beta1.ReasonRestamped: true,
}

// stuck says whether the claim's Ready condition is False for a reason other than being on
// its way.
func stuck(c *extv1beta1.SandboxClaim) bool {
	cond := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
	return cond != nil && cond.Status == metav1.ConditionFalse && !inFlight[cond.Reason]
}

// membersOf is the pool members that can serve c: its pool's, built from the template version
// admission stamped on it.
func membersOf(c *extv1beta1.SandboxClaim) policy.MemberKey {
	return policy.MemberKey{Namespace: c.Namespace, Pool: c.Spec.WarmPoolRef.Name, Hash: c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]}
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
	uid, seenReady := s.wasReady[key]
	served := seenReady && uid == c.UID
	if !known && !served {
		s.unadmitKey(admittedKeyOf(c)) // first seen: counted from now on as the informer shows it
	}
	switch {
	case !c.DeletionTimestamp.IsZero():
		s.forget(key)
	case meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady):
		delete(s.waiting, key)
		if s.wasReady == nil {
			s.wasReady = map[types.NamespacedName]types.UID{}
		}
		s.wasReady[key] = c.UID
		if known {
			s.last = now
			s.served = append(pruneServed(s.served, now), servedClaim{At: now, Since: w.Since})
		}
	case served:
		// Served once, not Ready now: nothing in admission's queue.
	default:
		if s.waiting == nil {
			s.waiting = map[types.NamespacedName]WaitingClaim{}
		}
		s.waiting[key] = WaitingClaim{Since: admittedAt(c), Creator: c.Annotations[agentsv1beta1.AnnotationCreator],
			Members: membersOf(c), Stuck: stuck(c)}
	}
}

// ObserveSandbox records a pool member ready to serve claims, and which claim a Sandbox is
// bound to (its controller), so that a claim whose pod is started is not taken for one waiting
// in the control plane.
func (s *ClaimShed) ObserveSandbox(sb *agentsv1beta1.Sandbox) {
	sbKey := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	members, isMember, ready := policy.MemberKeyOf(sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	if was, ok := s.free[sbKey]; ok {
		delete(s.free, sbKey)
		if s.ready[was]--; s.ready[was] <= 0 {
			delete(s.ready, was)
		}
	}
	if isMember && ready {
		if s.free == nil {
			s.free = map[types.NamespacedName]policy.MemberKey{}
			s.ready = map[policy.MemberKey]int{}
		}
		s.free[sbKey] = members
		s.ready[members]++
	}
	owner := policy.ControllerOf(sb, policy.ClaimKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: owner.Name}
	if !sb.DeletionTimestamp.IsZero() {
		if s.sandboxOf[key] == sb.Name {
			delete(s.sandboxOf, key)
		}
		return
	}
	if s.sandboxOf == nil {
		s.sandboxOf = map[types.NamespacedName]string{}
	}
	s.sandboxOf[key] = sb.Name
}

// ObservePod records how far a Sandbox's pod (its controller) has come: when it was first seen
// on a node, and whether it is started: taken up by its node's kubelet (status.startTime), or
// Ready. A claim whose Sandbox's pod is started waits for its containers or its last writes,
// not in the cluster's queues.
func (s *ClaimShed) ObservePod(p *corev1.Pod) {
	owner := policy.ControllerOf(p, policy.SandboxKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: owner.Name}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, known := s.pods[key]
	if !p.DeletionTimestamp.IsZero() {
		if !known || seen.uid == p.UID {
			delete(s.pods, key)
		}
		return
	}
	if !known || seen.uid != p.UID {
		seen = podProgress{uid: p.UID} // a replacement starts over
	}
	if p.Spec.NodeName != "" && seen.placedAt.IsZero() {
		seen.placedAt = now
	}
	seen.started = seen.started || p.Status.StartTime != nil || podIsReady(p)
	if s.pods == nil {
		s.pods = map[types.NamespacedName]podProgress{}
	}
	s.pods[key] = seen
}

// pruneServed drops the claims served before the window that ends at now.
func pruneServed(served []servedClaim, now time.Time) []servedClaim {
	i := 0
	for i < len(served) && now.Sub(served[i].At) > RateWindow {
		i++
	}
	return served[i:]
}

// Forget drops a deleted claim.
func (s *ClaimShed) Forget(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(types.NamespacedName{Namespace: namespace, Name: name})
}

func (s *ClaimShed) forget(key types.NamespacedName) {
	delete(s.waiting, key)
	delete(s.wasReady, key)
}

// Handler is the claim informer's event handler that keeps s current.
func (s *ClaimShed) Handler() toolscache.ResourceEventHandler {
	return eventHandler(s.Observe, func(c *extv1beta1.SandboxClaim) { s.Forget(c.Namespace, c.Name) })
}

// SandboxHandler is the Sandbox informer's event handler that keeps the pool members ready
// to serve and the claims' Sandboxes current.
func (s *ClaimShed) SandboxHandler() toolscache.ResourceEventHandler {
	return eventHandler(s.ObserveSandbox, func(sb *agentsv1beta1.Sandbox) { s.ObserveSandbox(deletedNow(sb, s.now())) })
}

// PodHandler is the pod informer's event handler that keeps the pods' placement current.
func (s *ClaimShed) PodHandler() toolscache.ResourceEventHandler {
	return eventHandler(s.ObservePod, func(p *corev1.Pod) { s.ObservePod(deletedNow(p, s.now())) })
}

// deletedNow is a copy of obj, as an informer last knew it before its delete, marked deleted
// at now: what the observers take a delete for.
func deletedNow[T interface {
	runtime.Object
	metav1.Object
}](obj T, now time.Time) T {
	obj = obj.DeepCopyObject().(T)
	obj.SetDeletionTimestamp(&metav1.Time{Time: now})
	return obj
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

// Admit refuses a new claim of creator when it would wait too long (ShedDecision); nil
// admits it, and counts it as ahead of the next ones (in the same step, or concurrent
// admissions would all see the backlog without each other) until the claim informer shows
// it, admittedTTL passes, or Withdraw takes it back. A nil ClaimShed, or one with MaxWait 0,
// admits every claim and counts none. c carries its webhook-first-observed-at, by which the
// informer's copy is known.
func (s *ClaimShed) Admit(creator string, c *extv1beta1.SandboxClaim) error {
	if s == nil || s.MaxWait <= 0 {
		return nil
	}
	if s.Synced != nil && !s.Synced() {
		return startingRefusal(c)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served = pruneServed(s.served, now)
	if d := ShedDecision(s.MaxWait, s.backlog(now), creator); d.Refuse {
		return shedRefusal(c, s.MaxWait, d)
	}
	if s.admitted == nil {
		s.admitted = map[admittedKey][]admittedClaim{}
	}
	k := admittedKeyOf(c)
	s.admitted[k] = append(s.admitted[k], admittedClaim{at: now, creator: creator, members: membersOf(c)})
	return nil
}

// Withdraw takes back a claim of namespace Admit let through, admitted at (its
// webhook-first-observed-at), that will not be created after all (a policy refused it, its
// name is taken), or that admission stamps again (reinvoked).
func (s *ClaimShed) Withdraw(namespace, at string) {
	if s == nil || s.MaxWait <= 0 || at == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unadmitKey(admittedKey{namespace, at})
}

func admittedKeyOf(c *extv1beta1.SandboxClaim) admittedKey {
	return admittedKey{c.Namespace, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]}
}

// unadmitKey drops one claim counted as admitted under k; s.mu held.
func (s *ClaimShed) unadmitKey(k admittedKey) {
	switch n := len(s.admitted[k]); n {
	case 0:
	case 1:
		delete(s.admitted, k)
	default:
		s.admitted[k] = s.admitted[k][:n-1]
	}
}

// backlog is what a new claim would find ahead of it now (see the file's comment); s.mu held.
func (s *ClaimShed) backlog(now time.Time) Backlog {
	b := Backlog{Served: len(s.served), ByCreator: map[string]float64{}}
	// Claims without a Sandbox, by the members that could serve them, and by creator.
	unserved := map[policy.MemberKey]map[string]int{}
	count := func(m policy.MemberKey, creator string) {
		if unserved[m] == nil {
			unserved[m] = map[string]int{}
		}
		unserved[m][creator]++
	}
	busy := now // the start of the work in hand: the oldest claim ahead, or served lately
	for k, as := range s.admitted {
		kept := as[:0]
		for _, a := range as {
			if now.Sub(a.at) <= admittedTTL {
				kept = append(kept, a)
				count(a.members, a.creator)
				busy = earliest(busy, a.at)
			}
		}
		if len(kept) == 0 {
			delete(s.admitted, k)
		} else {
			s.admitted[k] = kept
		}
	}
	oldest := now
	for key, w := range s.waiting {
		if w.Stuck {
			continue
		}
		if sandbox, bound := s.sandboxOf[key]; bound {
			pod := s.pods[types.NamespacedName{Namespace: key.Namespace, Name: sandbox}]
			if pod.started || (!pod.placedAt.IsZero() && now.Sub(pod.placedAt) < s.MaxWait) {
				continue // its kubelet starts its pod (or it is Ready), or has it queued in front of it
			}
			b.Ahead++
			b.ByCreator[w.Creator]++
		} else {
			count(w.Members, w.Creator)
		}
		oldest = earliest(oldest, w.Since)
	}
	// Of the claims one pool's ready members do not cover, each creator holds its part.
	for m, creators := range unserved {
		total := 0
		for _, n := range creators {
			total += n
		}
		beyond := max(0, total-s.ready[m])
		b.Ahead += beyond
		for creator, n := range creators {
			if part := float64(beyond) * float64(n) / float64(total); part > 0 {
				b.ByCreator[creator] += part
			}
		}
	}
	// The cluster has been stalled since its last claim served or the oldest claim ahead
	// came, whichever is later: a burst after an idle hour is not a stall.
	b.Stalled = min(now.Sub(s.last), now.Sub(oldest))
	// The rate is over the window, or over the work in hand when it began within it (a burst
	// after a lull), at least a second.
	for _, sv := range s.served {
		busy = earliest(busy, sv.Since)
	}
	busy = earliest(busy, oldest)
	b.Over = max(time.Second, min(RateWindow, now.Sub(busy)))
	return b
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Backlog is what a new claim finds ahead of it: Ahead claims in the control plane (see the
// file's comment), ByCreator each creator's part of them; Served claims became Ready in the
// last Over (RateWindow, or less when the work in hand began later); none served for Stalled.
type Backlog struct {
	Ahead     int
	ByCreator map[string]float64
	Served    int
	Over      time.Duration
	Stalled   time.Duration
}

// Shed is what ShedDecision decided, and why: Ahead claims ahead, served at Rate claims a
// second, predict a Wait (-1: unbounded); Mine of the claims ahead are the creator's, Share is
// its fair share of them.
type Shed struct {
	Refuse      bool
	Ahead       int
	Rate        float64
	Wait        time.Duration
	Mine, Share float64
}

// ShedDecision decides whether a new claim of creator is refused: when at least MinBacklog
// claims are ahead of it and they, with it, would take longer than maxWait to serve at the
// rate claims were served lately (Little's law; none served is an unbounded wait, until the
// cluster has been stalled for servedHorizon, which refusing does not mend), unless creator
// holds less of the claims ahead than its fair share (them ÷ the creators holding some).
func ShedDecision(maxWait time.Duration, b Backlog, creator string) Shed {
	d := Shed{Ahead: b.Ahead, Wait: -1}
	if b.Served > 0 && b.Over > 0 {
		d.Rate = float64(b.Served) / b.Over.Seconds()
		d.Wait = b.Over * time.Duration(b.Ahead+1) / time.Duration(b.Served)
	}
	if b.Ahead < MinBacklog || (d.Wait >= 0 && d.Wait <= maxWait) ||
		(b.Served == 0 && b.Stalled > servedHorizon(maxWait)) {
		return d
	}
	total := 0.0
	for _, n := range b.ByCreator {
		total += n
	}
	d.Mine = b.ByCreator[creator]
	if len(b.ByCreator) > 0 {
		d.Share = total / float64(len(b.ByCreator))
	}
	d.Refuse = d.Mine > 0 && d.Mine >= d.Share
	return d
}

// shedRefusal is the 429 of a claim refused while the cluster is behind: the shape of a
// ClaimPolicy's refusal (refusal), with a retry delay: the backlog clears by itself within
// about maxWait, so client-go's own retry of a 429 carrying Retry-After (up to ten, inside
// the caller's Create: the public SDK's CreateSandbox included) is the right reaction, where
// a policy's limit clears only when the tenant deletes a claim.
func shedRefusal(c *extv1beta1.SandboxClaim, maxWait time.Duration, d Shed) error {
	retry := RetryAfter(maxWait)
	behind := fmt.Sprintf("no claim was served in the last %s and %d claims are ahead of this one", RateWindow, d.Ahead)
	if d.Wait >= 0 {
		behind = fmt.Sprintf("%d claims are ahead of this one and claims are served at %.1f a second: about %s in the control plane, more than %s",
			d.Ahead, d.Rate, d.Wait.Round(100*time.Millisecond), maxWait)
	}
	mine, share := math.Round(d.Mine*10)/10, math.Round(d.Share*10)/10
	return claimRefusal(c, fmt.Sprintf("for now: the cluster is behind, %s, and this creator holds %g of them (its fair share: %g); retry after %d s",
		behind, mine, share, retry), retry, nil)
}

// startingRefusal is the 429 of a claim refused while the shed's informers load, to be
// retried after a second.
func startingRefusal(c *extv1beta1.SandboxClaim) error {
	return claimRefusal(c, "for now: this operator replica is starting and has not loaded the claims ahead of it yet; retry after 1 s", 1, nil)
}

// claimRefusal is 429 Too Many Requests for claim c, refused for why (what follows "is
// refused" in the message), with a retry delay of retry seconds (0: none, the refusal lasts
// until something changes) and causes.
func claimRefusal(c *extv1beta1.SandboxClaim, why string, retry int32, causes []metav1.StatusCause) error {
	name := c.Name
	if name == "" {
		name = c.GenerateName + "*"
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusTooManyRequests,
		Reason:  metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("SandboxClaim.%s %q is refused %s", claimGK.Group, name, why),
		Details: &metav1.StatusDetails{Group: claimGK.Group, Kind: claimGK.Kind, Name: c.Name, RetryAfterSeconds: retry, Causes: causes},
	}}
}

// RetryAfter is the retry delay of a refusal: maxWait in whole seconds, at least one.
func RetryAfter(maxWait time.Duration) int32 {
	return int32(max(1, math.Ceil(maxWait.Seconds())))
}
