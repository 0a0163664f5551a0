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
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// claimControllerName names the SandboxClaim controller in logs and metrics.
const claimControllerName = "sandboxclaim"

const claimKind = "SandboxClaim"

// DefaultColdStartGrace is how long a claim that finds no member of its template version to
// take (none ready, none starting that it could take) waits for members on their way (one
// whose pod does not fit anywhere yet, one the pool is about to create) before it
// cold-starts a Sandbox of its own.
const DefaultColdStartGrace = 2 * time.Second

// Messages of claim conditions (the contract fixes the reasons, not these).
const (
	messageWarmPoolNotFoundFmt = "SandboxWarmPool %s not found"
	messageTemplateNotFoundFmt = "SandboxTemplate %s not found"
	messageWaitingForMember    = "Waiting for a warm sandbox"
	messageSandboxMissingFmt   = "Sandbox %s not found"
	messageSandboxNotReady     = "Sandbox is not ready"
	messagePodNotLabelledFmt   = "Waiting for pod %s to carry the claim's labels"
	messageClaimExpiredFmt     = "Claim expired at %s"
)

// claimReconciler serves SandboxClaims: it binds a ready warm member of the claim's pool, or
// cold-starts a Sandbox from the pool's template, mirrors the Sandbox's readiness into the
// claim and ends the claim when its lifecycle says so.
//
// One reconcile reads down its files in call order, each once: Reconcile and the lookup of the
// claim's Sandbox (this file), its expiry (sandboxclaim_lifecycle.go), what it reports of its
// Sandbox (sandboxclaim_status.go), serving an unbound claim warm or cold
// (sandboxclaim_binding.go, which states the binding protocol) and its startup latency
// (sandboxclaim_metrics.go). Its watches are in sandboxclaim_events.go, the warm member index
// they feed in sandboxclaim_warmindex.go.
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
	// MaxBookkeepingDelay bounds that wait from the claim's Ready: under steady traffic claims
	// never pause, and the bookkeeping must not wait for ever; 0 leaves it unbounded.
	MaxBookkeepingDelay time.Duration

	mu     sync.Mutex
	claims map[types.NamespacedName]*claimMemory
	// expected holds, per claim, the Sandbox this process bound or created for it until the
	// cache shows it: a reconcile in between must find it rather than bind a second one.
	expected *expectations
	// activity tells the pool controller when claims last asked for its members.
	activity *poolActivity
	// podViews keeps the writers of pod metadata from acting on an older view of the Sandbox
	// than the pod's (podmetadata.go); shared with the Sandbox controller.
	podViews *podMetadataViews
	// podSeen lets report wait until the pod informer shows the route it wrote; nil (tests
	// without an informer) does not wait.
	podSeen *podVersionWaiters
	// losses are the lost pods of bound Sandboxes, as the Sandbox watch delivered them, until
	// the claim's status reports them (reportLoss).
	losses *seenLosses
	// RefuseRestamp: see Config.RefuseRestamp.
	RefuseRestamp bool
	// LabelDomains and LabelDomainsChanged: see Config.ClaimLabelDomains.
	LabelDomains        *policy.LabelDomains
	LabelDomainsChanged <-chan event.GenericEvent
	// AnnotationDomains: see Config.ClaimAnnotationDomains.
	AnnotationDomains []string
	// Tracer traces binds and readiness (sandboxclaim_tracing.go); nil is tracing off.
	Tracer *tracing.Tracer
	// bookkeepingWake wakes bound claims whose bookkeeping waited for their pool's claims to
	// pause (poolActivity.awaitPause), or for a slot (slots).
	bookkeepingWake chan event.GenericEvent
	// shares decides ClaimPolicies' warm shares at bind time (sandboxclaim_warmshare.go);
	// meter and FairShareMetrics count what each policy's tenants were served.
	shares           *warmShares
	meter            *policyMeter
	FairShareMetrics *fairshare.Metrics
	// BookkeepingConcurrency bounds the claims that write their bookkeeping at once past
	// MaxBookkeepingDelay while claims still come (sandboxclaim_bookkeeping.go); 0 leaves it
	// unbounded.
	BookkeepingConcurrency int
	slots                  *bookkeepingSlots
}

// bookkeepingWakeBuffer bounds the claims woken at once for their bookkeeping; one left out
// waits for its own bound.
const bookkeepingWakeBuffer = 4096

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
	// unreported names the Sandbox this process created (or took while starting) for the
	// claim while the claim's status may not report it yet (holdInterimReport). Should the
	// Sandbox be gone before it is reported, the claim is still not served again.
	unreported string
	// servedOnce: the claim has been served (or waited) once; amidClaims: when it first was,
	// another claim of its pool had come within the refill's quiet period.
	servedOnce, amidClaims bool
	// uncertainBind names a member whose bind patch got no answer (the connection cut, a
	// timeout, a 5xx): the API server may have applied it. Nothing else is bound or created
	// for the claim until a read of that member says (bindWarm).
	uncertainBind string
	// shareWhy is the last reason a warm share kept the claim from a warm member, whose event
	// was sent; coldReason says why its cold start is one (the cold-start metric's reason).
	shareWhy, coldReason string
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
	r.losses = newSeenLosses()
	r.bookkeepingWake = make(chan event.GenericEvent, bookkeepingWakeBuffer)
	if r.BookkeepingConcurrency > 0 {
		r.slots = newBookkeepingSlots(r.BookkeepingConcurrency)
	}
	if r.activity == nil {
		r.activity = newPoolActivity()
	}
	if r.podViews == nil {
		r.podViews = newPodMetadataViews(r.Clock)
	}
	if r.shares == nil {
		r.shares = newWarmShares()
	}
}

// SetupWithManager registers the controller and its watches.
func (r *claimReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	r.init()
	r.podSeen = newPodVersionWaiters()
	b := ctrl.NewControllerManagedBy(mgr).
		Named(claimControllerName).
		WithOptions(opts).
		// Own status writes never wake the claim; the stamp (an annotation) does.
		For(&extv1beta1.SandboxClaim{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		Watches(&agentsv1beta1.Sandbox{}, &claimSandboxHandler{index: r.Index, losses: r.losses, shares: r.shares}).
		Watches(&corev1.Pod{}, podVersionHandler{waiters: r.podSeen}).
		Watches(&extv1beta1.SandboxWarmPool{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfPool),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.unboundClaimsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A policy that changes may let claims waiting for their warm share have one.
		Watches(&tenancyv1alpha1.ClaimPolicy{}, handler.EnqueueRequestsFromMapFunc(r.claimsWaitingForShares),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.LabelDomainsChanged != nil {
		b = b.WatchesRawSource(source.Channel(r.LabelDomainsChanged, handler.EnqueueRequestsFromMapFunc(r.claimsRefusedForMetadata)))
	}
	// Woken bookkeeping is still behind the claims waiting to be served.
	b = b.WatchesRawSource(source.Channel(r.bookkeepingWake, backgroundWake{}))
	return b.Complete(r)
}

// claimStep is the work of one reconcile: the claim's status is changed in place and
// written once by Reconcile; events wait until that write succeeded.
type claimStep struct {
	claim  *extv1beta1.SandboxClaim
	mem    *claimMemory
	events []func()
}

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
	r.announceLoss(step, old)
	start := r.Clock.Now()
	if wrote, werr := patchStatus(ctx, r.Client, old, claim, func(c *extv1beta1.SandboxClaim) any { return c.Status }); werr != nil {
		return quiet(result, errors.Join(err, fmt.Errorf("patching claim status: %w", werr)))
	} else if wrote {
		step.mem.written.record(claim, claim.Status.DeepCopy())
		r.Metrics.claimPhase(PhaseStatus, r.Clock.Since(start))
		r.observeStartup(ctx, step)
	}
	for _, e := range step.events {
		e()
	}
	return quiet(result, err)
}

func (r *claimReconciler) forget(nn types.NamespacedName) {
	r.mu.Lock()
	var uid types.UID
	if m := r.claims[nn]; m != nil {
		uid = m.uid
	}
	delete(r.claims, nn)
	r.mu.Unlock()
	// A claim gone holds no warm member any more: the claims waiting for a share may have one.
	r.shares.forget(nn, uid)
	r.wakeBookkeeping(requestNames(r.shares.wake(types.NamespacedName{Namespace: nn.Namespace}, 1)))
	r.expected.forget(nn)
	r.stopWaiting(nn)
	r.losses.forget(nn)
	r.wakeBookkeeping(r.activity.claimGone(nn))
	r.wakeBookkeeping(r.slots.drop(nn))
	r.activity.claimReady(nn)
}

// backgroundWake queues the claims a channel names at the background priority.
type backgroundWake struct{}

func (backgroundWake) Create(context.Context, event.TypedCreateEvent[client.Object], queue) {}
func (backgroundWake) Update(context.Context, event.TypedUpdateEvent[client.Object], queue) {}
func (backgroundWake) Delete(context.Context, event.TypedDeleteEvent[client.Object], queue) {}
func (backgroundWake) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	addWithPriority(q, requestFor(e.Object), priorityBackground, 0)
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
		if at, ok := claimTimestamp(claim, agentsv1beta1.AnnotationWebhookFirstObservedAt); ok {
			r.Metrics.claimPhase(PhaseAdmissionToReconcile, m.firstSeen.Sub(at))
		}
	}
	return m
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
		if reported {
			r.mirror(claim, sb)
			if r.reportLoss(s, sb, true) {
				return requeueWithin(result, lossRecordedRequeue), nil
			}
			if err := r.labelTemplateUID(ctx, sb, s.mem.template); err != nil {
				return result, err
			}
			wait, err := r.recordSandboxName(ctx, s, sb)
			return background(requeueWithin(result, wait)), err
		}
		if wait := r.holdInterimReport(s, sb); wait > 0 {
			return requeueWithin(result, wait), nil
		}
		wait, err := r.report(ctx, claim, sb)
		r.reportLoss(s, sb, false)
		if err != nil || wait > 0 {
			return requeueWithin(result, wait), err
		}
		if (claim.Annotations[agentsv1beta1.AnnotationSandboxName] != sb.Name || s.mem.adopted != "") &&
			meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
			// This reconcile reports the claim Ready; the next one does the bookkeeping. Nothing
			// else need wake the claim: a cold-started Sandbox's last change was becoming Ready.
			return background(requeueWithin(result, max(r.BookkeepingDelay, retryAfterCacheCatchesUp))), nil
		}
		return result, nil
	}
	if claim.Status.Sandbox.Name == "" && s.mem.unreported != "" {
		claim.Status.Sandbox.Name = s.mem.unreported // created here, gone before its status said so
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

// background queues a served claim's next reconcile, its bookkeeping, behind the claims
// still waiting to be served (queue.go): past MaxBookkeepingDelay a burst's bookkeeping comes
// due all at once, while the next burst's claims arrive. An event of its Sandbox brings it
// forward again.
func background(result ctrl.Result) ctrl.Result {
	p := priorityBackground
	result.Priority = &p
	return result
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
