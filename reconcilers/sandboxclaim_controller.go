package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// claimControllerName names the SandboxClaim controller in logs and metrics.
const claimControllerName = "sandboxclaim"

const claimKind = "SandboxClaim"

// DefaultColdStartGrace is how long a claim with no ready member of its template version
// waits for members being created before it cold-starts a Sandbox of its own.
const DefaultColdStartGrace = 2 * time.Second

// Messages of claim conditions (the contract fixes the reasons, not these).
const (
	messageWarmPoolNotFoundFmt = "SandboxWarmPool %s not found"
	messageTemplateNotFoundFmt = "SandboxTemplate %s not found"
	messageWaitingForMember    = "Waiting for a warm sandbox"
	messageSandboxMissingFmt   = "Sandbox %s not found"
	messageSandboxNotReady     = "Sandbox is not ready"
	messageClaimExpiredFmt     = "Claim expired at %s"
)

// claimReconciler serves SandboxClaims: it binds a ready warm member of the claim's pool
// (see sandboxclaim_binding.go for the protocol), or cold-starts a Sandbox from the pool's
// template, mirrors the Sandbox's readiness into the claim and ends the claim when its
// lifecycle says so (sandboxclaim_lifecycle.go).
//
// The Sandbox is the record of a binding (controller reference and claim-uid label); the
// claim's status only reports it. After a restart a claim finds its Sandbox again through
// the indexes.SandboxClaimUID cache index.
type claimReconciler struct {
	Client client.Client
	// APIReader reads from the API server: the stamp fallback must not hash a stale template.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Metrics   *Metrics
	Clock     clock.PassiveClock
	// Index is the warm member index, fed by this controller's Sandbox watch.
	Index *warmIndex
	// ColdStartGrace: see DefaultColdStartGrace; 0 means the default.
	ColdStartGrace time.Duration
	// BookkeepingDelay is how long claims of a pool must pause before a bound claim's
	// sandbox-name annotation is written (the refill policy's quiet period).
	BookkeepingDelay time.Duration

	mu     sync.Mutex
	claims map[types.NamespacedName]*claimMemory
	// expected holds, per claim, the Sandbox this process bound or created for it until the
	// cache shows it: a reconcile in between must find it rather than bind a second one.
	expected *expectations
	// activity tells the pool controller when claims last asked for its members.
	activity *poolActivity
	// RefuseRestamp: see Config.RefuseRestamp.
	RefuseRestamp bool
}

// claimMemory is what the controller remembers of a claim between reconciles. It is not
// needed for correctness after a restart, only for latency bookkeeping and to bridge the
// cache lag after this process bound a Sandbox.
type claimMemory struct {
	uid types.UID
	// firstSeen is the controller-first-observed time of the claim, kept in memory rather than
	// written to the claim (a write on the claim path for bookkeeping only).
	firstSeen time.Time
	// written is the status this process last wrote, until the cache shows it.
	written ownStatus[extv1beta1.SandboxClaimStatus]
	// readyObserved: the startup latency of the claim has been recorded.
	readyObserved bool
	// launchType and template label the latency metrics.
	launchType, template string
	// nameTaken: a Sandbox the claim does not control has the claim's name, so its cold start
	// uses a generated name.
	nameTaken bool
	// adopted names the warm member this process bound, whose SandboxAdopted event is sent
	// with the claim's bookkeeping (recordSandboxName).
	adopted string
}

// init fills in the defaults and the controller's memory.
func (r *claimReconciler) init() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ColdStartGrace == 0 {
		r.ColdStartGrace = DefaultColdStartGrace
	}
	if r.Index == nil {
		r.Index = newWarmIndex()
	}
	r.claims = map[types.NamespacedName]*claimMemory{}
	r.expected = newExpectations(r.Clock)
	if r.activity == nil {
		r.activity = newPoolActivity()
	}
}

// SetupWithManager registers the controller and its watches.
func (r *claimReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.init()
	return ctrl.NewControllerManagedBy(mgr).
		Named(claimControllerName).
		WithOptions(opts).
		// Own status writes never wake the claim; the stamp (an annotation) does.
		For(&extv1beta1.SandboxClaim{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		Watches(&agentsv1beta1.Sandbox{}, &claimSandboxHandler{index: r.Index}).
		Watches(&extv1beta1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfPool),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// unboundClaimsOfPool wakes the claims of a pool that appeared or changed and that still
// wait for a Sandbox (bound claims do not care).
func (r *claimReconciler) unboundClaimsOfPool(ctx context.Context, obj client.Object) []reconcile.Request {
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexes.ClaimPool: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims of pool", "pool", klog.KObj(obj))
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range claims.Items {
		if c.Status.Sandbox.Name == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return reqs
}

func (r *claimReconciler) unboundClaimsOfTemplate(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := listPoolsOfTemplate(ctx, r.Client, obj)
	var reqs []reconcile.Request
	for i := range pools {
		reqs = append(reqs, r.unboundClaimsOfPool(ctx, &pools[i])...)
	}
	return reqs
}

// memory returns what the controller remembers of claim, starting afresh for a new claim.
func (r *claimReconciler) memory(claim *extv1beta1.SandboxClaim) *claimMemory {
	r.mu.Lock()
	defer r.mu.Unlock()
	nn := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	m := r.claims[nn]
	if m == nil || m.uid != claim.UID {
		m = &claimMemory{uid: claim.UID, firstSeen: r.Clock.Now()}
		r.claims[nn] = m
		r.expected.forget(nn) // an earlier claim's of the same name
		if at, err := time.Parse(time.RFC3339Nano, claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]); err == nil {
			r.Metrics.claimPhase(PhaseAdmissionToReconcile, m.firstSeen.Sub(at))
		}
	}
	return m
}

func (r *claimReconciler) forget(nn types.NamespacedName) {
	r.mu.Lock()
	delete(r.claims, nn)
	r.mu.Unlock()
	r.expected.forget(nn)
	r.Index.StopWaiting(nn)
}

// claimStep is the work of one reconcile: the claim's status is changed in place and
// written once by Reconcile; events wait until that write succeeded.
type claimStep struct {
	claim  *extv1beta1.SandboxClaim
	mem    *claimMemory
	events []func()
}

func (s *claimStep) event(f func()) { s.events = append(s.events, f) }

// errClaimDeleted tells Reconcile the claim was deleted and has no status to write.
var errClaimDeleted = errors.New("claim deleted")

// Reconcile serves one claim and writes its status.
func (r *claimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(claimControllerName)
	claim := &extv1beta1.SandboxClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	step := &claimStep{claim: claim, mem: r.memory(claim)}
	if w := step.mem.written.newer(claim); w != nil {
		claim.Status = *w.DeepCopy()
	}
	old := claim.DeepCopy()
	result, err := r.reconcile(ctx, step)
	if errors.Is(err, errClaimDeleted) {
		for _, e := range step.events {
			e()
		}
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonReconcilerError, err.Error())
	}
	start := r.Clock.Now()
	if wrote, werr := patchStatus(ctx, r.Client, old, claim, func(c *extv1beta1.SandboxClaim) any { return c.Status }); werr != nil {
		return quiet(result, errors.Join(err, fmt.Errorf("patching claim status: %w", werr)))
	} else if wrote {
		step.mem.written.record(claim, claim.Status.DeepCopy())
		r.Metrics.claimPhase(PhaseStatus, r.Clock.Since(start))
		r.observeStartup(step)
	}
	for _, e := range step.events {
		e()
	}
	return quiet(result, err)
}

// reconcile decides the claim's state; the caller writes its status.
func (r *claimReconciler) reconcile(ctx context.Context, s *claimStep) (ctrl.Result, error) {
	claim := s.claim
	reported := claim.Status.Sandbox.Name != "" && meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady)
	sb, err := r.boundSandbox(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}

	now := r.Clock.Now()
	var result ctrl.Result
	if at, ok := claimExpiry(claim, sb); ok {
		if !now.Before(at) {
			return ctrl.Result{}, r.expire(ctx, s, sb, at)
		}
		result.RequeueAfter = at.Sub(now)
	}
	if sb != nil {
		if s.mem.template == "" {
			s.mem.template = sb.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef]
		}
		r.mirror(claim, sb)
		if reported {
			if err := r.labelTemplateUID(ctx, sb, s.mem.template); err != nil {
				return result, err
			}
			wait, err := r.recordSandboxName(ctx, s, sb)
			return requeueWithin(result, wait), err
		}
		if (claim.Annotations[agentsv1beta1.AnnotationSandboxName] != sb.Name || s.mem.adopted != "") &&
			meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
			// This reconcile reports the claim Ready; the next one does the bookkeeping. Nothing
			// else need wake the claim: a cold-started Sandbox's last change was becoming Ready.
			return requeueWithin(result, max(r.BookkeepingDelay, retryAfterCacheCatchesUp)), nil
		}
		return result, nil
	}
	if claim.Status.Sandbox.Name != "" {
		// The claim was bound and its Sandbox is gone: it is not served again, which would
		// hand its user a different Sandbox under the same claim.
		claim.Status.Sandbox.PodIPs = nil
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxMissing, fmt.Sprintf(messageSandboxMissingFmt, claim.Status.Sandbox.Name))
		return result, nil
	}
	serve, err := r.serve(ctx, s)
	return requeueWithin(result, serve.RequeueAfter), err
}

// labelTemplateUID gives a bound Sandbox that does not say which template's UID its pod is
// selected by (one the public controller built and bound before the switch-over: its blueprint
// predates the label) the UID of its template as a metadata label, which the Sandbox
// controller puts on the pod: the template's NetworkPolicy selects it again. Every Sandbox the
// operator builds has the label in its blueprint, so this writes nothing for them.
func (r *claimReconciler) labelTemplateUID(ctx context.Context, sb *agentsv1beta1.Sandbox, template string) error {
	if template == "" || sb.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelTemplateUID] != "" || sb.Labels[agentsv1beta1.LabelTemplateUID] != "" {
		return nil
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: template}, tmpl); err != nil || tmpl.UID == "" {
		return client.IgnoreNotFound(err)
	}
	uid := string(tmpl.UID)
	p := &metadataPatch{}
	p.setLabel(agentsv1beta1.LabelTemplateUID, &uid)
	if err := patchMetadata(ctx, r.Client, sb, p); err != nil {
		return fmt.Errorf("labelling sandbox with its template's uid: %w", err)
	}
	return nil
}

// recordSandboxName writes the name of the claim's Sandbox into its agents.x-k8s.io/sandbox-name
// annotation, which clients of the public API read, and sends the SandboxAdopted event of a
// warm binding. Both are bookkeeping, not the claim's path:
// it is written once the claim has been reported Ready, and only after claims of its pool
// pause (the refill policy's quiet period), so that a burst's claims are not slowed by it. It
// returns how long to wait before trying again.
func (r *claimReconciler) recordSandboxName(ctx context.Context, s *claimStep, sb *agentsv1beta1.Sandbox) (time.Duration, error) {
	claim := s.claim
	if claim.Annotations[agentsv1beta1.AnnotationSandboxName] == sb.Name && s.mem.adopted == "" {
		return 0, nil
	}
	if last, ok := r.activity.lastClaim(types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}); ok {
		if wait := r.BookkeepingDelay - r.Clock.Since(last); wait > 0 {
			return wait, nil
		}
	}
	if claim.Annotations[agentsv1beta1.AnnotationSandboxName] != sb.Name {
		if err := r.annotateClaim(ctx, claim, agentsv1beta1.AnnotationSandboxName, sb.Name); err != nil {
			return 0, fmt.Errorf("recording the sandbox name: %w", err)
		}
		r.Metrics.claimBookkeepingWrite()
	}
	if s.mem.adopted != "" {
		r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventSandboxAdopted, "Bind", "Adopted warm sandbox %s", s.mem.adopted)
		s.mem.adopted = ""
	}
	return 0, nil
}

// annotateClaim sets one annotation of the claim, in the API server and in claim. The patch
// goes through a bare copy, which takes the API server's answer: claim holds the status this
// reconcile is working out.
func (r *claimReconciler) annotateClaim(ctx context.Context, claim *extv1beta1.SandboxClaim, key, value string) error {
	p := &metadataPatch{}
	p.setAnnotation(key, &value)
	target := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
	if err := patchMetadata(ctx, r.Client, target, p); err != nil {
		return err
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[key] = value
	return nil
}

// boundSandbox finds the claim's Sandbox through the claim-uid index: the Sandbox, not the
// claim's status, records the binding.
func (r *claimReconciler) boundSandbox(ctx context.Context, s *claimStep) (*agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.claim.Namespace), client.MatchingFields{indexes.SandboxClaimUID: string(s.claim.UID)}); err != nil {
		return nil, fmt.Errorf("looking up the claim's sandbox: %w", err)
	}
	var found []*agentsv1beta1.Sandbox
	for i := range list.Items {
		if sb := &list.Items[i]; policy.IsControlledBy(sb, policy.ClaimKind, s.claim.UID) && sb.DeletionTimestamp.IsZero() {
			found = append(found, sb)
		}
	}
	nn := client.ObjectKeyFromObject(s.claim)
	switch len(found) {
	case 0:
		pending := r.expected.pending(nn)
		if len(pending) == 0 {
			return nil, nil
		}
		// This process bound or created a Sandbox the cache does not show: ask the API
		// server (a rare read, only while the cache lags behind this process's own write).
		_, name, _ := strings.Cut(pending[0], "/")
		sb := &agentsv1beta1.Sandbox{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: name}, sb)
		switch {
		case err == nil && policy.IsControlledBy(sb, policy.ClaimKind, s.claim.UID) && sb.DeletionTimestamp.IsZero():
			return sb, nil
		case err == nil || apierrors.IsNotFound(err):
			// Gone (or going) since: the claim was bound, and is not served again.
			if s.claim.Status.Sandbox.Name == "" {
				s.claim.Status.Sandbox.Name = name
			}
			r.expected.forget(nn)
			return nil, nil
		default:
			return nil, fmt.Errorf("reading the claim's sandbox %s: %w", name, err)
		}
	case 1:
		r.expected.forget(nn) // the cache shows it
		return found[0], nil
	default:
		// Only a second operator instance running at the same time could do this; report it
		// rather than guess which binding is the real one.
		return nil, fmt.Errorf("claim is bound to %d sandboxes (%s, %s)", len(found), found[0].Name, found[1].Name)
	}
}

// serve gives an unbound claim a Sandbox: warm when a ready member of its template version
// exists, after a bounded wait for members being created, cold otherwise.
func (r *claimReconciler) serve(ctx context.Context, s *claimStep) (ctrl.Result, error) {
	claim := s.claim
	r.activity.touch(types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, r.Clock.Now())
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound, fmt.Sprintf(messageWarmPoolNotFoundFmt, claim.Spec.WarmPoolRef.Name))
			return ctrl.Result{}, nil // the pool watch wakes the claim
		}
		return ctrl.Result{}, fmt.Errorf("reading pool: %w", err)
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: pool.Spec.SandboxTemplateRef.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonTemplateNotFound, fmt.Sprintf(messageTemplateNotFoundFmt, pool.Spec.SandboxTemplateRef.Name))
			return ctrl.Result{}, nil // the template watch wakes the claim
		}
		return ctrl.Result{}, fmt.Errorf("reading template: %w", err)
	}
	stamp, err := r.ensureStamp(ctx, claim, tmpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	// What admission checked, again: a claim admitted before a rule existed, or while the
	// template was missing, is not served against the rules.
	if errs := policy.ValidateClaimPodMetadata(&claim.Spec.AdditionalPodMetadata, field.NewPath("spec", "additionalPodMetadata")); len(errs) > 0 {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonInvalidMetadata, errs.ToAggregate().Error())
		return ctrl.Result{}, nil
	}
	if policy.AddsToTemplate(claim) { // only then can the template's policies refuse it
		if _, errs := policy.ClaimBlueprint(tmpl, claim); len(errs) > 0 {
			reason, msg := claimRejection(errs)
			r.setReady(claim, metav1.ConditionFalse, reason, msg)
			return ctrl.Result{}, nil
		}
	}
	if len(claim.Spec.Env) > 0 || len(claim.Spec.VolumeClaimTemplates) > 0 {
		return ctrl.Result{}, r.coldStart(ctx, s, tmpl, stamp)
	}

	nn := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	key := memberKey{Namespace: claim.Namespace, Pool: pool.Name, Hash: stamp}
	sb, err := r.bindWarm(ctx, s, pool, key, tmpl.Name)
	if err != nil || sb != nil {
		if sb != nil {
			r.Index.StopWaiting(nn)
			r.mirror(claim, sb)
		}
		return ctrl.Result{}, err
	}

	// No ready member. Wait while members of the claim's version are on their way: being
	// created, or about to be (the pool refills with the current version when it has fewer
	// members than replicas; stale members kept under OnReplenish fill it too).
	_, pending := r.Index.Counts(key)
	coming := pending > 0 ||
		(stamp == policy.TemplateHash(tmpl) && r.Index.PoolMembers(pool.Namespace, pool.Name) < replicas(pool))
	left := s.mem.firstSeen.Add(r.ColdStartGrace).Sub(r.Clock.Now())
	if coming && left > 0 {
		r.Index.Wait(key, nn)
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxCreatePending, messageWaitingForMember)
		if available, _ := r.Index.Counts(key); available > 0 {
			// A member became ready between the pick and the registration.
			return ctrl.Result{RequeueAfter: time.Millisecond}, nil
		}
		return ctrl.Result{RequeueAfter: left}, nil
	}
	r.Index.StopWaiting(nn)
	return ctrl.Result{}, r.coldStart(ctx, s, tmpl, stamp)
}

// ensureStamp returns the claim's stamp, stamping it with the hash of the template as the
// API server has it when admission could not (the pool or template did not exist yet, or no
// webhook runs).
func (r *claimReconciler) ensureStamp(ctx context.Context, claim *extv1beta1.SandboxClaim, cached *extv1beta1.SandboxTemplate) (string, error) {
	if stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]; stamp != "" {
		return stamp, nil
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), tmpl); err != nil {
		return "", fmt.Errorf("reading template for the stamp: %w", err)
	}
	stamp := policy.TemplateHash(tmpl)
	if err := r.annotateClaim(ctx, claim, agentsv1beta1.AnnotationSandboxTemplateHash, stamp); err != nil {
		return "", fmt.Errorf("stamping claim: %w", err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("stamped claim", "templateHash", stamp)
	return stamp, nil
}

// mirror reports the bound Sandbox in the claim's status.
func (r *claimReconciler) mirror(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	claim.Status.Sandbox = extv1beta1.SandboxStatusRef{Name: sb.Name, PodIPs: sb.Status.PodIPs}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionTrue:
		r.setReady(claim, metav1.ConditionTrue, ready.Reason, ready.Message)
	case ready != nil && ready.Reason == agentsv1beta1.ReasonSandboxExpired:
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxExpired, ready.Message)
	case ready != nil && ready.Message != "":
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, ready.Message)
	default:
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, messageSandboxNotReady)
	}
	if f := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionFinished); f != nil {
		finished := *f
		finished.ObservedGeneration = claim.Generation
		meta.SetStatusCondition(&claim.Status.Conditions, finished)
	} else {
		meta.RemoveStatusCondition(&claim.Status.Conditions, agentsv1beta1.ConditionFinished)
	}
}

// setReady sets the claim's Ready condition, keeping its transition time when the status
// does not change.
func (r *claimReconciler) setReady(claim *extv1beta1.SandboxClaim, status metav1.ConditionStatus, reason, msg string) {
	setCondition(&claim.Status.Conditions, claim.Generation, r.Clock.Now(), agentsv1beta1.ConditionReady, status, reason, msg)
}

// observeStartup records the claim's startup latencies the first time this process writes it
// Ready: from admission (webhook-first-observed-at) and from the controller's first sight.
func (r *claimReconciler) observeStartup(s *claimStep) {
	if s.mem.readyObserved || !meta.IsStatusConditionTrue(s.claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		return
	}
	s.mem.readyObserved = true
	now := r.Clock.Now()
	launch := s.mem.launchType
	if launch == "" {
		launch = "unknown" // bound by an earlier run of the operator
	}
	template := s.mem.template
	var fromWebhook *time.Duration
	if at, err := time.Parse(time.RFC3339Nano, s.claim.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt]); err == nil {
		d := now.Sub(at)
		fromWebhook = &d
	}
	r.Metrics.claimReady(launch, template, fromWebhook, now.Sub(s.mem.firstSeen))
	r.Metrics.claimPhase(PhaseReadyToStatus, now.Sub(s.mem.firstSeen))
}

// claimRef is the controller reference a claim's Sandbox carries.
func claimRef(claim *extv1beta1.SandboxClaim) metav1.OwnerReference {
	return *metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind(claimKind))
}

// createdBy is the created-by label the claim passes on to its Sandbox, "" for none.
func createdBy(claim *extv1beta1.SandboxClaim) string {
	v, ok := claim.Labels[agentsv1beta1.LabelCreatedBy]
	if !ok {
		return ""
	}
	switch v {
	case agentsv1beta1.CreatedByGoClient, agentsv1beta1.CreatedByPythonClient, agentsv1beta1.CreatedByController:
		return v
	}
	return agentsv1beta1.CreatedByUnknown
}

func (r *claimReconciler) eventf(s *claimStep, eventType, reason, action, note string, args ...any) {
	claim := s.claim
	s.event(func() { r.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...) })
}
