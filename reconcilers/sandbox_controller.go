package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// sandboxControllerName names the Sandbox controller in logs and metrics.
const sandboxControllerName = "sandbox"

// Messages of conditions the contract leaves open. The Ready messages clients compare are
// constants in api/v1beta1.
const (
	messageSandboxExpired    = "Sandbox has expired"
	messagePodTerminated     = "Pod has been terminated. Sandbox is suspended"
	messagePodTerminating    = "Pod is terminating. Sandbox is suspending"
	messagePodNotOwnedSusp   = "Refused to delete pod because it is not owned by this sandbox"
	messageNotSuspended      = "Sandbox is not suspended"
	messagePodNotOwnedFmt    = "Pod %s exists and is not controlled by the Sandbox"
	messageMultiplePodsFmt   = "multiple Pods (%d) are controlled by this Sandbox; refusing to choose or create a Pod"
	messageSuspensionUnknown = "Pod state is unknown. Sandbox suspension cannot be confirmed"
	messageSchedulingUnknown = "Pod state is unknown. Pod scheduling cannot be determined"
	messageNotScheduledYet   = "Pod has not reported a PodScheduled condition yet"
	// reasonPodSchedulingUnknown (PodScheduled=Unknown) is the public controller's.
	reasonPodSchedulingUnknown = "PodSchedulingUnknown"
	// messageReconcilerErrorPrefix starts a ReconcilerError message, as the public one does.
	messageReconcilerErrorPrefix = "Error seen: "
	eventMultiplePods            = "MultiplePods"
	// eventChildNameTaken: an object the Sandbox did not build holds a child's name.
	eventChildNameTaken = "ChildNameTaken"
	eventSandboxExpired = "SandboxExpired"
)

// sandboxReconciler runs one Sandbox: its Pod, PVCs and headless Service, its expiry and
// its status. See the package documentation for the write discipline it keeps.
type sandboxReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *Metrics
	Clock    clock.PassiveClock
	// ClusterDomain is the DNS domain of status.serviceFQDN.
	ClusterDomain string
	// PodProgressDelay is how long pod events that do not change readiness (scheduled, IP
	// assigned, ...) wait before they wake the Sandbox, so that the steps of a pod starting
	// up coalesce into the reconcile its Ready transition causes.
	PodProgressDelay time.Duration
	// uncachedChildren, when set, is asked for a Pod or Service the cache does not show: the
	// cache holds only tracked ones (Config.ScopedChildCaches).
	uncachedChildren client.Reader
	// APIReader reads from the API server: a child is read before it is created when the
	// cache lags so far behind the Sandbox's writes that their expectations lapsed.
	APIReader client.Reader
	// BookkeepingDelay is how long claims must pause before a bound Sandbox's pod takes on
	// the binding's labels (claim-uid, launch-type, the claim's pod metadata): bookkeeping,
	// not the claim's path, so it waits out a burst of claims instead of competing with it.
	BookkeepingDelay time.Duration

	expected *expectations
	// pods is what the controller remembers of each Sandbox's pods, to tell a lost pod.
	pods *podMemories
	// written is each Sandbox's status as this process last wrote it, until the cache shows it.
	written ownStatuses[agentsv1beta1.SandboxStatus]
	// activity says when claims last arrived; nil when no claim controller runs.
	activity *poolActivity
	// podViews keeps the writers of pod metadata from acting on an older view of the Sandbox
	// than the pod's (podmetadata.go); shared with the claim controller.
	podViews *podMetadataViews
	// priorities queues unbound pool members behind every other Sandbox.
	priorities *sandboxPriorities
}

// SetupWithManager registers the controller and its watches.
func (r *sandboxReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.expected = newExpectations(r.Clock)
	r.pods = newPodMemories()
	if r.podViews == nil {
		r.podViews = newPodMetadataViews(r.Clock)
	}
	r.priorities = &sandboxPriorities{}
	return ctrl.NewControllerManagedBy(mgr).
		Named(sandboxControllerName).
		WithOptions(opts).
		// Own status writes change neither generation, labels nor annotations, so they never
		// wake the Sandbox again. A Sandbox's events are queued at its priority
		// (sandboxPriorities): what For would do, but for the priority.
		Watches(&agentsv1beta1.Sandbox{}, &sandboxEventHandler{priorities: r.priorities}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
		))).
		Watches(&corev1.Pod{}, &podEventHandler{expected: r.expected, pods: r.pods, delay: r.PodProgressDelay, metrics: r.Metrics, priorities: r.priorities}).
		Watches(&corev1.Service{}, &serviceEventHandler{expected: r.expected, priorities: r.priorities}).
		Complete(r)
}

// Reconcile brings one Sandbox's children and status to what its spec asks for.
func (r *sandboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(sandboxControllerName)
	sb := &agentsv1beta1.Sandbox{}
	if err := r.Client.Get(ctx, req.NamespacedName, sb); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.sandboxGone(req.NamespacedName)
			r.expected.forget(req.NamespacedName)
			r.written.forget(req.NamespacedName)
			r.pods.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sb.DeletionTimestamp.IsZero() {
		// The garbage collector removes the children; nothing here to do or report.
		r.Metrics.sandboxGone(req.NamespacedName)
		r.written.forget(req.NamespacedName)
		r.pods.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if w := r.written.newer(sb); w != nil {
		sb.Status = *w.DeepCopy()
	}
	old := sb.DeepCopy()
	wasReady := meta.IsStatusConditionTrue(old.Status.Conditions, agentsv1beta1.ConditionReady)

	var events []func()
	result, created, starting, err := r.reconcile(ctx, sb, &events)
	if errors.Is(err, errSandboxDeleted) {
		return ctrl.Result{}, nil
	}
	// The pod's create is the write this event reports, and it succeeded: sent now, whatever
	// becomes of the status. A create skipped because an earlier one is still in flight
	// (no UID: nothing was sent) reports nothing.
	if created != nil && created.UID != "" {
		r.record(sb, podCreatedEvent(created))
	}
	if created != nil && err == nil {
		// The pod was created just now and its first status update (scheduled, running,
		// ready) follows within milliseconds and wakes the Sandbox, whose status is written
		// then. Writing "pod pending" first would cost a write of the whole Sandbox, per
		// Sandbox, for a state nobody waits on. Should the pod make no progress, the requeue
		// writes the status after the progress delay.
		r.Metrics.sandboxReconciled(sb, wasReady, wasReady)
		return requeueWithin(result, r.PodProgressDelay), nil
	}
	if starting > 0 && err == nil && len(events) == 0 {
		// Its pod is starting up and younger than StartupReportDelay: the steps so far are
		// written with its Ready, or once it is that old (startingUp).
		r.Metrics.sandboxReconciled(sb, wasReady, wasReady)
		return requeueWithin(result, starting), nil
	}

	wrote, werr := r.writeStatus(ctx, old, sb, events)
	isReady := wasReady // as far as anyone can read
	if wrote {
		isReady = meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	}
	r.Metrics.sandboxReconciled(sb, wasReady, isReady)
	return quiet(result, errors.Join(err, werr))
}

// writeStatus writes sb's status if it changed from old's, then sends events and the public
// lifecycle events of the transitions the write recorded: decided on the status before and
// after it, so each is sent once, however many reconciles the pod's start-up steps cause. A
// write that fails sends nothing: the next reconcile finds the same transitions and sends
// them then, once.
func (r *sandboxReconciler) writeStatus(ctx context.Context, old, sb *agentsv1beta1.Sandbox, events []func()) (bool, error) {
	wrote, err := patchStatus(ctx, r.Client, old, sb, func(s *agentsv1beta1.Sandbox) any { return s.Status })
	if err != nil {
		return false, fmt.Errorf("patching sandbox status: %w", err)
	}
	if !wrote {
		return false, nil
	}
	r.written.record(sb, sb.Status.DeepCopy())
	for _, e := range events {
		e()
	}
	for _, ev := range transitionEvents(&old.Status, &sb.Status, podNameFor(sb)) {
		r.record(sb, ev)
	}
	return true, nil
}

// reconcile does the work and records the outcome in sb.Status; the caller writes it, then
// sends the events queued in events. It returns the pod it created, if it created one, and
// how long the status may wait for the pod's start-up to end (startingUp; 0 when it may not).
func (r *sandboxReconciler) reconcile(ctx context.Context, sb *agentsv1beta1.Sandbox, events *[]func()) (ctrl.Result, *corev1.Pod, time.Duration, error) {
	now := r.Clock.Now()
	prev := reportedStateOf(sb)

	var requeue ctrl.Result
	if expiry := sb.Spec.ShutdownTime; expiry != nil {
		if !now.Before(expiry.Time) {
			return ctrl.Result{}, nil, 0, r.expire(ctx, sb, events)
		}
		requeue.RequeueAfter = expiry.Sub(now)
	}

	owned, err := r.ownedPods(ctx, sb)
	if err != nil {
		return requeue, nil, 0, r.failed(sb, err)
	}
	if len(owned) > 1 {
		r.multiplePods(sb, owned, events)
		return requeue, nil, 0, nil
	}

	svc, svcErr := r.ensureService(ctx, sb)
	pvcs, pvcErr := r.ensurePVCs(ctx, sb)
	var pod *corev1.Pod
	var loss *podLoss
	var podCreated, fresh bool
	var podErr error
	if pvcErr == nil {
		if pod, podErr = r.lookupPod(ctx, sb, owned); podErr == nil {
			if loss, fresh = r.checkLoss(sb, prev, pod); fresh {
				// A loss seen just now is written before anything is done about it: a
				// watcher sees it even when the replacement is Ready within milliseconds.
				pod = ownPod(sb, pod)
				requeue = requeueWithin(requeue, lossRecordedRequeue)
			} else {
				pod, podCreated, podErr = r.ensurePod(ctx, sb, pod, loss, pvcs, &requeue)
			}
		}
	}
	r.setStatus(sb, pod, svc, pod == nil && (podErr != nil || pvcErr != nil))
	if loss != nil {
		r.reportLoss(sb, loss, pod, fresh, events)
	}
	if own := ownPod(sb, pod); own != nil && meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
		r.pods.update(client.ObjectKeyFromObject(sb), func(m *podMemory) { m.reported = own.UID })
	}
	if createFailed(podErr) {
		// Queued like the status it explains: sent with the write that records the failure,
		// so a create failing the same way again is not reported again.
		msg := fmt.Sprintf(messagePodCreateFailedFmt, podNameFor(sb), strings.TrimPrefix(podErr.Error(), errPodCreate.Error()+": "))
		*events = append(*events, func() {
			r.record(sb, lifecycleEvent{corev1.EventTypeWarning, eventSandboxPodCreateFailed, actionPodCreation, msg})
		})
	}
	var created *corev1.Pod
	if podCreated {
		created = pod
	}
	if err := errors.Join(svcErr, pvcErr, podErr); err != nil {
		return requeue, created, 0, r.failed(sb, err)
	}
	var starting time.Duration
	if loss == nil {
		starting = r.startingUp(sb, prev, pod)
	}
	return requeue, created, starting, nil
}

// startingUp is how much longer the status of sb may wait before it shows the start-up steps
// of its pod (scheduled, node, IPs, Running): until the pod is StartupReportDelay old, unless
// it is Ready before. A claim waits for its Sandbox's Ready, which is written at once, and a
// kubelet takes a pod through those steps over seconds: written as they came, each would be a
// write of the whole Sandbox, one more watch event to every watcher, per Sandbox started.
// 0 when the status must be written now: the pod is Ready, finished, being deleted or
// unschedulable (claims take no member whose pod fits nowhere), the Sandbox was Ready (a pod
// that stops being Ready is news), or is being suspended. A pool's refill reads its members'
// placement from their pods (podPlaced), not from this status.
func (r *sandboxReconciler) startingUp(sb *agentsv1beta1.Sandbox, prev reportedState, pod *corev1.Pod) time.Duration {
	if pod == nil || !isControlledBy(pod, sb) || !pod.DeletionTimestamp.IsZero() ||
		podReady(pod) || terminal(pod) || unschedulable(pod) ||
		(prev.ready != nil && prev.ready.Status == metav1.ConditionTrue) ||
		sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		return 0
	}
	return max(pod.CreationTimestamp.Add(StartupReportDelay).Sub(r.Clock.Now()), 0)
}

// expire ends a Sandbox whose shutdownTime has passed: pod and Service go, then the Sandbox
// itself (policy Delete) or its status is cleared (policy Retain).
func (r *sandboxReconciler) expire(ctx context.Context, sb *agentsv1beta1.Sandbox, events *[]func()) error {
	owned, err := r.ownedPods(ctx, sb)
	if err != nil {
		return r.failed(sb, err)
	}
	var errs []error
	for i := range owned {
		errs = append(errs, r.deletePod(ctx, sb, &owned[i]))
	}
	if svc, _, err := r.ownService(ctx, sb); err != nil {
		errs = append(errs, err)
	} else if svc != nil {
		errs = append(errs, r.deleteOwned(ctx, svc))
	}
	if err := errors.Join(errs...); err != nil {
		return r.failed(sb, err)
	}
	if sb.Spec.ShutdownPolicy == agentsv1beta1.ShutdownPolicyDelete {
		ctrl.LoggerFrom(ctx).V(1).Info("deleting expired sandbox")
		if err := r.Client.Delete(ctx, sb, client.Preconditions{UID: &sb.UID}); client.IgnoreNotFound(err) != nil {
			return r.failed(sb, fmt.Errorf("deleting expired sandbox: %w", err))
		}
		r.Metrics.sandboxGone(client.ObjectKeyFromObject(sb))
		return errSandboxDeleted
	}
	prev := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	// Retain keeps the Sandbox with the reason it stopped, and what it last reported of its
	// suspension and of how its pod ended (Suspended, Finished); nothing of the pod and
	// Service that are gone.
	var kept []metav1.Condition
	for _, c := range sb.Status.Conditions {
		switch c.Type {
		case agentsv1beta1.ConditionReady, agentsv1beta1.ConditionSuspended, agentsv1beta1.ConditionFinished:
			kept = append(kept, c)
		}
	}
	setCondition(&kept, sb.Generation, r.Clock.Now(), agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired, messageSandboxExpired)
	sb.Status = agentsv1beta1.SandboxStatus{Conditions: kept}
	if prev == nil || prev.Reason != agentsv1beta1.ReasonSandboxExpired {
		at := sb.Spec.ShutdownTime.UTC().Format(time.RFC3339)
		*events = append(*events, func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, eventSandboxExpired, actionExpiry, "Sandbox expired at %s; pod and Service deleted", at)
		})
	}
	return nil
}

// multiplePods reports more than one pod controlled by the Sandbox and touches none of them:
// which one is the real one is for a human to decide.
func (r *sandboxReconciler) multiplePods(sb *agentsv1beta1.Sandbox, pods []corev1.Pod, events *[]func()) {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	// The public controller's message; the event names the pods too.
	msg := fmt.Sprintf(messageMultiplePodsFmt, len(pods))
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady); c == nil || c.Reason != agentsv1beta1.ReasonMultiplePods {
		note := msg + ": " + strings.Join(names, ", ")
		*events = append(*events, func() {
			r.record(sb, lifecycleEvent{corev1.EventTypeWarning, eventMultiplePods, "Reconciling", note})
		})
	}
	r.setCondition(sb, agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonMultiplePods, msg)
}

// failed records err in the Ready condition and returns it. Races with the cache are not
// recorded: they resolve on the next reconcile and are no news to the Sandbox's users. While
// a lost pod is reported, the error (building the replacement, say) is told as part of the
// loss, which stays the news and the record (sandbox_podloss.go).
func (r *sandboxReconciler) failed(sb *agentsv1beta1.Sandbox, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return err
	}
	reason, msg := agentsv1beta1.ReasonReconcilerError, messageReconcilerErrorPrefix+err.Error()
	if loss := recordedLoss(meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)); loss != nil {
		reason, msg = agentsv1beta1.ReasonPodLost, loss.message(err.Error())
	}
	r.setCondition(sb, agentsv1beta1.ConditionReady, metav1.ConditionFalse, reason, msg)
	return err
}

// setStatus derives the status from the pod and Service the Sandbox has now. unknown says
// the pod could not be looked up: no pod does not mean there is none.
func (r *sandboxReconciler) setStatus(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, svc *corev1.Service, unknown bool) {
	st := &sb.Status
	st.Service, st.ServiceFQDN = "", ""
	if svc != nil {
		st.Service = svc.Name
		st.ServiceFQDN = fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, r.ClusterDomain)
	}
	// status.selector is the public controller's, the name hash alone, written once the
	// Sandbox has a pod (its own or one holding its name) and kept from then on. It is
	// published for clients (and a Sandbox written by an older sandgate, with the UID in
	// it, is given the public value); nothing the operator decides reads it: the Service
	// selects by podSelector, which adds the Sandbox's UID.
	if pod != nil || st.Selector != "" {
		st.Selector = publicSelector(sb)
	}
	st.PodIPs, st.NodeName = nil, ""
	if pod != nil && isControlledBy(pod, sb) {
		for _, ip := range pod.Status.PodIPs {
			st.PodIPs = append(st.PodIPs, ip.IP)
		}
		if len(st.PodIPs) == 0 && pod.Status.PodIP != "" {
			st.PodIPs = []string{pod.Status.PodIP}
		}
		st.NodeName = pod.Spec.NodeName
	}

	r.setSuspended(sb, pod, unknown)
	r.setPodScheduled(sb, pod, unknown)

	ready, reason, msg := readiness(sb, pod, svc)
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	r.setCondition(sb, agentsv1beta1.ConditionReady, status, reason, msg)

	switch {
	case pod != nil && isControlledBy(pod, sb) && pod.Status.Phase == corev1.PodSucceeded:
		r.setCondition(sb, agentsv1beta1.ConditionFinished, metav1.ConditionTrue, agentsv1beta1.ReasonPodSucceeded, agentsv1beta1.MessagePodSucceeded)
	case pod != nil && isControlledBy(pod, sb) && pod.Status.Phase == corev1.PodFailed && !disrupted(pod):
		// A pod the node took away did not finish: it is a lost pod (sandbox_podloss.go).
		r.setCondition(sb, agentsv1beta1.ConditionFinished, metav1.ConditionTrue, agentsv1beta1.ReasonPodFailed, agentsv1beta1.MessagePodFailed)
	default:
		meta.RemoveStatusCondition(&st.Conditions, agentsv1beta1.ConditionFinished)
	}
}

// publicSelector is status.selector as the public API has it: the pod's name hash label.
func publicSelector(sb *agentsv1beta1.Sandbox) string {
	return agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash(sb.Name)
}

// readiness is the Ready condition for the pod and Service at hand, with the public
// controller's messages: what the pod says, then "; Service Exists" or "; Service does not
// exist" where the Sandbox has (or wants) a Service.
func readiness(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, svc *corev1.Service) (bool, string, string) {
	if sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		if pod != nil {
			return false, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspending
		}
		return false, agentsv1beta1.ReasonSandboxSuspended, agentsv1beta1.MessageSandboxSuspended
	}
	ok, msg := false, agentsv1beta1.MessagePodDoesNotExist
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			return false, agentsv1beta1.ReasonPodSucceeded, agentsv1beta1.MessagePodSucceeded
		case corev1.PodFailed:
			return false, agentsv1beta1.ReasonPodFailed, agentsv1beta1.MessagePodFailed
		case corev1.PodRunning:
			switch {
			case !pod.DeletionTimestamp.IsZero() || !podReady(pod):
				msg = agentsv1beta1.MessagePodRunningNotReady
			case len(pod.Status.PodIPs) == 0 && pod.Status.PodIP == "":
				msg = agentsv1beta1.MessagePodReadyNoIPs
			default:
				ok, msg = true, agentsv1beta1.MessagePodReady
			}
		default:
			msg = fmt.Sprintf(agentsv1beta1.MessagePodExistsWithPhaseFmt, pod.Status.Phase)
		}
	}
	// Without service set, a Service the Sandbox has still counts, as the public controller
	// counts it.
	switch {
	case svc != nil:
		msg += agentsv1beta1.MessageServiceExistsSuffix
	case wantsService(sb):
		msg += agentsv1beta1.MessageServiceMissingSuffix
		ok = false
	}
	if !ok {
		return false, agentsv1beta1.ReasonDependenciesNotReady, msg
	}
	return true, agentsv1beta1.ReasonDependenciesReady, msg
}

func (r *sandboxReconciler) setSuspended(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, unknown bool) {
	status, reason, msg := metav1.ConditionFalse, agentsv1beta1.ReasonNotSuspended, messageNotSuspended
	if sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		switch {
		case unknown:
			status, reason, msg = metav1.ConditionUnknown, agentsv1beta1.ReasonPodStateUnknown, messageSuspensionUnknown
		case pod == nil:
			status, reason, msg = metav1.ConditionTrue, agentsv1beta1.ReasonPodTerminated, messagePodTerminated
		case !isControlledBy(pod, sb):
			reason, msg = agentsv1beta1.ReasonPodNotOwned, messagePodNotOwnedSusp
		default:
			reason, msg = agentsv1beta1.ReasonPodTerminating, messagePodTerminating
		}
	}
	r.setCondition(sb, agentsv1beta1.ConditionSuspended, status, reason, msg)
}

// setPodScheduled mirrors the PodScheduled condition of the Sandbox's own pod (Unknown while
// the pod has none yet, or while the pod could not be looked up); without a pod (or with
// only someone else's pod of that name) it is absent.
func (r *sandboxReconciler) setPodScheduled(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, unknown bool) {
	switch {
	case unknown:
		r.setCondition(sb, agentsv1beta1.ConditionPodScheduled, metav1.ConditionUnknown, reasonPodSchedulingUnknown, messageSchedulingUnknown)
		return
	case pod == nil || !isControlledBy(pod, sb):
		meta.RemoveStatusCondition(&sb.Status.Conditions, agentsv1beta1.ConditionPodScheduled)
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			reason := c.Reason
			switch {
			case reason != "":
			case c.Status == corev1.ConditionTrue:
				reason = string(corev1.PodScheduled)
			default:
				reason = reasonPodSchedulingUnknown
			}
			r.setCondition(sb, agentsv1beta1.ConditionPodScheduled, metav1.ConditionStatus(c.Status), reason, c.Message)
			return
		}
	}
	r.setCondition(sb, agentsv1beta1.ConditionPodScheduled, metav1.ConditionUnknown, reasonPodSchedulingUnknown, messageNotScheduledYet)
}

// setCondition sets one of the Sandbox's conditions (see the package's setCondition).
func (r *sandboxReconciler) setCondition(sb *agentsv1beta1.Sandbox, typ string, status metav1.ConditionStatus, reason, msg string) {
	setCondition(&sb.Status.Conditions, sb.Generation, r.Clock.Now(), typ, status, reason, msg)
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func wantsService(sb *agentsv1beta1.Sandbox) bool {
	return sb.Spec.Service != nil && *sb.Spec.Service
}

// errSandboxDeleted tells Reconcile that the Sandbox was deleted and has no status to write.
var errSandboxDeleted = errors.New("sandbox deleted")
