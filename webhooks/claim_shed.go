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
// and those whose Sandbox's pod is not on a node yet (the claim controller's queue, the cold
// start's writes, the scheduler's queue). A claim whose pod starts on its node waits for the
// kubelet, which is the pod's cost at any rate, not a queue admission can shorten; a claim
// whose pod is Ready waits only for its last writes. The rate is the claims that became Ready
// in the last RateWindow. Below MinBacklog claims ahead, nothing is refused: a fresh cluster
// has served nothing to measure a rate by, and a handful of claims is no backlog. A cluster
// that served nothing for a long while (servedHorizon) is stalled, which refusing does not
// mend: the gate opens. A claim that never becomes Ready for a reason that waits for a change
// (Stuck: a missing template or pool) is in no queue. Who is refused is decided by the claims
// ahead: a creator holding fewer of them than its fair share is still admitted, so a tenant
// that floods the cluster is refused first and one with nothing waiting is not.

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
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimShed refuses a new claim when it would wait too long in the control plane (see the
// file's comment). Its state, the claims waiting, the claims served lately, the pool members
// ready to serve and the Sandboxes whose pods are placed, is fed by the manager's claim,
// Sandbox and pod informers (Handler, SandboxHandler, PodHandler), and by the claims it admits
// until the claim informer shows them; every replica keeps its own from the same informers.
type ClaimShed struct {
	// MaxWait is the longest a new claim is predicted to wait in the control plane (the
	// claims ahead of it ÷ the rate claims are served) before it is refused; 0 turns shedding
	// off.
	MaxWait time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu      sync.Mutex
	waiting map[types.NamespacedName]WaitingClaim
	// served are the times claims became Ready, within RateWindow.
	served []time.Time
	// last is when the last claim was served, whenever; first when this process first saw a
	// claim waiting.
	last, first time.Time
	// placed are the Sandboxes whose pods are placed (on a node, or Ready): their pods' UIDs.
	placed map[types.NamespacedName]types.UID
	// sandboxOf names the Sandbox of each claim that has one (its controller), by the claim.
	sandboxOf map[types.NamespacedName]string
	// wasReady are the claims seen Ready once: one that is not Ready any more (expired with
	// its claim retained, its pod lost) was served, and waits for nothing admission gave it.
	wasReady map[types.NamespacedName]struct{}
	// free are the ready, unbound pool members, by the Sandbox: what each can serve.
	free map[types.NamespacedName]policy.MemberKey
	// admitted are the claims admitted here and not yet seen by the claim informer, by
	// namespace and admission time (webhook-first-observed-at): a flood admitted faster than
	// the informer delivers must count at once.
	admitted map[admittedKey]admittedClaim
}

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
	delete(s.admitted, admittedKey{c.Namespace, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]})
	_, known := s.waiting[key]
	_, served := s.wasReady[key]
	switch {
	case !c.DeletionTimestamp.IsZero():
		s.forget(key)
	case meta.IsStatusConditionTrue(c.Status.Conditions, agentsv1beta1.ConditionReady):
		delete(s.waiting, key)
		delete(s.sandboxOf, key)
		if s.wasReady == nil {
			s.wasReady = map[types.NamespacedName]struct{}{}
		}
		s.wasReady[key] = struct{}{}
		if known {
			s.last = now
			s.served = append(pruneServed(s.served, now), now)
		}
	case served:
		// Served once, not Ready now: nothing in admission's queue.
	default:
		if s.waiting == nil {
			s.waiting = map[types.NamespacedName]WaitingClaim{}
		}
		if s.first.IsZero() {
			s.first = now
		}
		s.waiting[key] = WaitingClaim{Since: admittedAt(c), Creator: c.Annotations[agentsv1beta1.AnnotationCreator],
			Members: membersOf(c), Stuck: stuck(c)}
	}
}

// ObserveSandbox records a pool member ready to serve claims, and which claim a Sandbox is
// bound to (its controller), so that a claim whose pod starts is not taken for one waiting in
// the control plane.
func (s *ClaimShed) ObserveSandbox(sb *agentsv1beta1.Sandbox) {
	sbKey := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	members, isMember, ready := policy.MemberKeyOf(sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	if isMember && ready {
		if s.free == nil {
			s.free = map[types.NamespacedName]policy.MemberKey{}
		}
		s.free[sbKey] = members
	} else {
		delete(s.free, sbKey)
	}
	owner := policy.ControllerOf(sb, policy.ClaimKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: sb.Namespace, Name: owner.Name}
	if _, waits := s.waiting[key]; !waits || !sb.DeletionTimestamp.IsZero() {
		return // only a waiting claim's Sandbox is of use; a served claim's is dropped
	}
	if s.sandboxOf == nil {
		s.sandboxOf = map[types.NamespacedName]string{}
	}
	s.sandboxOf[key] = sb.Name
}

// forgetSandbox drops a deleted Sandbox's member.
func (s *ClaimShed) forgetSandbox(sb *agentsv1beta1.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.free, types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name})
}

// ObservePod records whether a Sandbox's pod (its controller) is placed: on a node, the
// scheduler's work done, or Ready. A claim whose Sandbox's pod is placed waits for its kubelet
// or its last writes, not in the control plane's queues.
func (s *ClaimShed) ObservePod(p *corev1.Pod) {
	owner := policy.ControllerOf(p, policy.SandboxKind)
	if owner == nil {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: owner.Name}
	placed := p.Spec.NodeName != "" || podIsReady(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, known := s.placed[key]
	switch {
	case !p.DeletionTimestamp.IsZero():
		if !known || uid == p.UID {
			delete(s.placed, key)
		}
	case placed:
		if s.placed == nil {
			s.placed = map[types.NamespacedName]types.UID{}
		}
		s.placed[key] = p.UID
	case known && uid == p.UID:
		// Placed before; a pod is never unplaced.
	default:
		delete(s.placed, key) // a replacement not placed yet
	}
}

// pruneServed drops the claims served before the window that ends at now.
func pruneServed(served []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(served) && now.Sub(served[i]) > RateWindow {
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
	delete(s.sandboxOf, key)
	delete(s.wasReady, key)
}

// Handler is the claim informer's event handler that keeps s current.
func (s *ClaimShed) Handler() toolscache.ResourceEventHandler {
	return eventHandler(s.Observe, func(c *extv1beta1.SandboxClaim) { s.Forget(c.Namespace, c.Name) })
}

// SandboxHandler is the Sandbox informer's event handler that keeps the pool members ready
// to serve and the claims' Sandboxes current (a deleted Sandbox leaves its claim's entry until
// the claim is served or deleted).
func (s *ClaimShed) SandboxHandler() toolscache.ResourceEventHandler {
	return eventHandler(s.ObserveSandbox, s.forgetSandbox)
}

// PodHandler is the pod informer's event handler that keeps the pods' placement current.
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

// Admit refuses a new claim of creator when it would wait too long (ShedDecision); nil
// admits it. A nil ClaimShed, or one with MaxWait 0, admits every claim.
func (s *ClaimShed) Admit(creator string, c *extv1beta1.SandboxClaim) error {
	if s == nil || s.MaxWait <= 0 {
		return nil
	}
	now := s.now()
	s.mu.Lock()
	s.served = pruneServed(s.served, now)
	b := s.backlog(now)
	s.mu.Unlock()
	if d := ShedDecision(s.MaxWait, b, creator); d.Refuse {
		return shedRefusal(c, s.MaxWait, d)
	}
	return nil
}

// Admitted counts a claim admission let through (its policies too) as ahead of the next ones
// until the claim informer shows it, or admittedTTL passes (its create failed after
// admission). c carries its webhook-first-observed-at, by which the informer's copy is known.
func (s *ClaimShed) Admitted(creator string, c *extv1beta1.SandboxClaim) {
	if s == nil || s.MaxWait <= 0 {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted == nil {
		s.admitted = map[admittedKey]admittedClaim{}
	}
	s.admitted[admittedKey{c.Namespace, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]}] =
		admittedClaim{at: now, creator: creator, members: membersOf(c)}
}

// backlog is what a new claim would find ahead of it now (see the file's comment); s.mu held.
func (s *ClaimShed) backlog(now time.Time) Backlog {
	b := Backlog{Served: len(s.served), ByCreator: map[string]int{}, SinceServed: -1}
	unserved := map[policy.MemberKey]int{} // claims without a Sandbox, by the members that could serve them
	oldest := now
	for k, a := range s.admitted {
		if now.Sub(a.at) > admittedTTL {
			delete(s.admitted, k)
			continue
		}
		unserved[a.members]++
		b.ByCreator[a.creator]++
	}
	for key, w := range s.waiting {
		if w.Stuck {
			continue
		}
		sandbox, bound := s.sandboxOf[key]
		if bound {
			if _, placed := s.placed[types.NamespacedName{Namespace: key.Namespace, Name: sandbox}]; placed {
				continue // its pod starts on its node, or is Ready: past the control plane's queues
			}
			b.Ahead++
		} else {
			unserved[w.Members]++
		}
		b.ByCreator[w.Creator]++
		if w.Since.Before(oldest) {
			oldest = w.Since
		}
	}
	ready := map[policy.MemberKey]int{}
	for _, m := range s.free {
		ready[m]++
	}
	for m, n := range unserved {
		b.Ahead += max(0, n-ready[m])
	}
	switch {
	case !s.last.IsZero():
		b.SinceServed = now.Sub(s.last)
	case !s.first.IsZero():
		b.SinceServed = now.Sub(oldest) // nothing served yet: as long as the oldest has waited
	}
	return b
}

// Backlog is what a new claim finds ahead of it: Ahead claims in the control plane (see the
// file's comment), ByCreator how many of the claims on their way before their pods' start-up
// each creator holds; Served claims became Ready in the last RateWindow, the last of all
// SinceServed ago (negative: none waits nor was served).
type Backlog struct {
	Ahead       int
	ByCreator   map[string]int
	Served      int
	SinceServed time.Duration
}

// Shed is what ShedDecision decided, and why: Ahead claims ahead, served at Rate claims a
// second, predict a Wait; Mine of the claims on their way are the creator's, Share is its fair
// share of them.
type Shed struct {
	Refuse      bool
	Ahead       int
	Rate        float64
	Wait        time.Duration
	Mine, Share int
}

// ShedDecision decides whether a new claim of creator is refused: when at least MinBacklog
// claims are ahead of it and they would take longer than maxWait to serve at the rate claims
// were served in the last RateWindow (Little's law; none served is an unbounded wait, until
// none has been served for servedHorizon: a stalled cluster, which refusing does not mend),
// unless creator holds fewer of the claims on their way than its fair share (them ÷ the
// creators holding some, rounded up).
func ShedDecision(maxWait time.Duration, b Backlog, creator string) Shed {
	d := Shed{Ahead: b.Ahead, Rate: float64(b.Served) / RateWindow.Seconds(), Wait: -1}
	if b.Served > 0 {
		d.Wait = RateWindow * time.Duration(b.Ahead+1) / time.Duration(b.Served)
	}
	if b.Ahead < MinBacklog || (d.Wait >= 0 && d.Wait <= maxWait) ||
		(b.Served == 0 && b.SinceServed > servedHorizon(maxWait)) {
		return d
	}
	total := 0
	for _, n := range b.ByCreator {
		total += n
	}
	d.Mine = b.ByCreator[creator]
	d.Share = (total + len(b.ByCreator) - 1) / max(1, len(b.ByCreator))
	d.Refuse = d.Mine >= d.Share
	return d
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
	behind := fmt.Sprintf("no claim was served in the last %s and %d claims are ahead of this one", RateWindow, d.Ahead)
	if d.Wait >= 0 {
		behind = fmt.Sprintf("%d claims are ahead of this one and claims are served at %.1f a second: about %s in the control plane, more than %s",
			d.Ahead, d.Rate, d.Wait.Round(100*time.Millisecond), maxWait)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusTooManyRequests,
		Reason: metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("SandboxClaim.%s %q is refused for now: the cluster is behind, %s, and this creator holds %d of the claims on their way (its fair share: %d); retry after %d s",
			claimGK.Group, name, behind, d.Mine, d.Share, retry),
		Details: &metav1.StatusDetails{Group: claimGK.Group, Kind: claimGK.Kind, Name: c.Name, RetryAfterSeconds: retry},
	}}
}

// RetryAfter is the retry delay of a refusal: maxWait in whole seconds, at least one.
func RetryAfter(maxWait time.Duration) int32 {
	return int32(max(1, math.Ceil(maxWait.Seconds())))
}
