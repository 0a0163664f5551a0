package webhooks

// Admission-time load shedding of new claims (issue 37). Past the rate a cluster sustains,
// every claim admitted beyond it waits in the operator's queue behind the others, and the
// writes and watch events of a growing backlog take the API server's CPU from the claims being
// served: the cluster serves fewer claims a second than it could, and each of them late. The
// stamping webhook refuses new claims instead while the claims already admitted wait too long
// for the operator, with 429 Too Many Requests and a retry delay, as the API server's own
// Priority and Fairness does: the claims it admits are served at the rate the cluster
// sustains, and the refused ones are told when to come back (docs/design.md, "Past the
// sustainable rate").
//
// What it watches is the operator's own backlog, not the claims' pods: a claim waits for the
// operator from its admission until the operator first gives it a Ready condition or binds it
// (whichever comes first). A claim waiting for its pod (a slow image, a failing readiness
// probe) or refused by the controller (a missing template) has been handled, so no tenant can
// hold the gate shut with claims that never become Ready.

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// ClaimShed refuses new claims while the operator is behind (see the file's comment). Its
// state is the claims waiting for the operator, fed by the manager's claim informer
// (Handler); every replica keeps its own, all from the same informer's view.
type ClaimShed struct {
	// MaxWait is how long the oldest waiting claim may have waited before new claims are
	// refused; 0 turns shedding off.
	MaxWait time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu      sync.Mutex
	waiting map[types.NamespacedName]WaitingClaim
}

// WaitingClaim is a claim waiting for the operator: since its admission, by its creator.
type WaitingClaim struct {
	Since   time.Time
	Creator string
}

// waitingSince reports whether c waits for the operator, and since when: admitted (its
// webhook-first-observed-at, else its creation), not deleted, not bound, no Ready condition.
func waitingSince(c *extv1beta1.SandboxClaim) (time.Time, bool) {
	if !c.DeletionTimestamp.IsZero() || c.Status.Sandbox.Name != "" {
		return time.Time{}, false
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == agentsv1beta1.ConditionReady {
			return time.Time{}, false
		}
	}
	if at, err := time.Parse(time.RFC3339Nano, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]); err == nil {
		return at, true
	}
	return c.CreationTimestamp.Time, true
}

// Observe records the claim as the informer last delivered it.
func (s *ClaimShed) Observe(c *extv1beta1.SandboxClaim) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	since, ok := waitingSince(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		delete(s.waiting, key)
		return
	}
	if s.waiting == nil {
		s.waiting = map[types.NamespacedName]WaitingClaim{}
	}
	s.waiting[key] = WaitingClaim{Since: since, Creator: c.Annotations[agentsv1beta1.AnnotationCreator]}
}

// Forget drops a deleted claim.
func (s *ClaimShed) Forget(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waiting, types.NamespacedName{Namespace: namespace, Name: name})
}

// Handler is the claim informer's event handler that keeps s current.
func (s *ClaimShed) Handler() toolscache.ResourceEventHandler {
	observe := func(obj any) {
		if c, ok := obj.(*extv1beta1.SandboxClaim); ok {
			s.Observe(c)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if c, ok := obj.(*extv1beta1.SandboxClaim); ok {
				s.Forget(c.Namespace, c.Name)
			}
		},
	}
}

// Admit refuses a new claim of creator c while the operator is behind (ShedDecision); nil
// admits it. A nil ClaimShed, or one with MaxWait 0, admits every claim.
func (s *ClaimShed) Admit(creator string, c *extv1beta1.SandboxClaim) error {
	if s == nil || s.MaxWait <= 0 {
		return nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	s.mu.Lock()
	waiting := make([]WaitingClaim, 0, len(s.waiting))
	for _, w := range s.waiting {
		waiting = append(waiting, w)
	}
	s.mu.Unlock()
	d := ShedDecision(now(), s.MaxWait, waiting, creator)
	if !d.Refuse {
		return nil
	}
	return shedRefusal(c, s.MaxWait, d)
}

// Shed is what ShedDecision decided, and why.
type Shed struct {
	Refuse bool
	// Oldest is how long the oldest waiting claim has waited; Waiting how many claims wait,
	// Mine how many of them are the creator's, Share the creator's fair share of them.
	Oldest               time.Duration
	Waiting, Mine, Share int
}

// ShedDecision decides whether a new claim of creator is refused: when the oldest waiting
// claim has waited longer than maxWait, unless creator holds fewer of the waiting claims than
// its fair share (the waiting claims ÷ the creators holding some, rounded up). A queue that
// drains within maxWait, a burst the cluster absorbs, refuses nothing; a backlog that ages
// past it refuses new claims, first those of the creators it is made of: a tenant with few
// claims waiting is still admitted while another floods the operator.
func ShedDecision(now time.Time, maxWait time.Duration, waiting []WaitingClaim, creator string) Shed {
	d := Shed{Waiting: len(waiting)}
	creators := map[string]int{}
	for _, w := range waiting {
		d.Oldest = max(d.Oldest, now.Sub(w.Since))
		creators[w.Creator]++
	}
	if d.Oldest <= maxWait || len(waiting) == 0 {
		return d
	}
	d.Mine = creators[creator]
	d.Share = (len(waiting) + len(creators) - 1) / len(creators)
	d.Refuse = d.Mine >= d.Share
	return d
}

// shedRefusal is the 429 of a claim refused while the operator is behind: the shape of a
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
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusTooManyRequests,
		Reason: metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("SandboxClaim.%s %q is refused for now: the operator is behind, the oldest of the %d claims waiting for it has waited %s (more than %s) and %d of them are this creator's; retry after %d s",
			claimGK.Group, name, d.Waiting, d.Oldest.Round(100*time.Millisecond), maxWait, d.Mine, retry),
		Details: &metav1.StatusDetails{Group: claimGK.Group, Kind: claimGK.Kind, Name: c.Name, RetryAfterSeconds: retry},
	}}
}

// RetryAfter is the retry delay of a refusal: maxWait in whole seconds, at least one.
func RetryAfter(maxWait time.Duration) int32 {
	return int32(max(1, math.Ceil(maxWait.Seconds())))
}
