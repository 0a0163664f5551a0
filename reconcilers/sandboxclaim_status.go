package reconcilers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// What a claim reports of its Sandbox: the Ready condition mirrored from the Sandbox, the events
// sent once the status write that records them succeeded, and, once the claim was reported
// Ready, the bookkeeping off the claim's path (its sandbox-name annotation, its Sandbox's
// template-uid label).

// mirror reports the bound Sandbox in the claim's status.
func (r *claimReconciler) mirror(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) {
	claim.Status.Sandbox = extv1beta1.SandboxStatusRef{Name: sb.Name, PodIPs: sb.Status.PodIPs}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionTrue:
		r.setReady(claim, metav1.ConditionTrue, ready.Reason, ready.Message)
	case ready != nil && ready.Reason == agentsv1beta1.ReasonSandboxExpired:
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxExpired, ready.Message)
	case ready != nil && ready.Reason == agentsv1beta1.ReasonPodLost:
		// The agent's processes and memory are gone: the claim's user is told so, in the
		// Sandbox's words, not with a SandboxNotReady that a slow start also gives.
		r.setReady(claim, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, ready.Message)
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

// interimReportDelay is how long, from the claim's first sight, its status reports nothing
// that is not Ready: a claim that waits for a member of its pool, or whose Sandbox (cold, or a
// member taken while starting) is not Ready yet. Most claims are Ready sooner and are then
// reported once, Ready: the claim's status is written once on its path, not twice. A slower
// one is reported after this delay (waiting, or not Ready naming its Sandbox), so that a user
// watching a slow start sees what the claim waits for. The public SDK reads the Sandbox's name
// there and then waits for the Sandbox's Ready, which a claim reported Ready has already: for
// it the delay costs only the claim's own last writes after its Sandbox's Ready, and it
// learns the name once the pod is routable.
//
// Ten seconds, measured (the overload scenario, fast pods, every core busy). A report due
// after 1 s cost 0.9 claim status writes more per claim served than the floor's; after 3 s,
// the same claims were written once on a machine that served them in 1–3 s, but on a slower
// one (the floor at 26 claims/s instead of 40) they took 4–9 s and were written 2.1–2.3 times
// each: the slower the claims, the more each cost, the slower they became. After 10 s every
// claim was written once there too, kube-apiserver spent 49–67 ms per claim against 73–84 ms,
// and sandgate served 18.8 / 23.1 / 13.6 claims/s at 1× / 2× / 4× against 14.9 / 11.8 / 10.8
// (design.md, "Past the sustainable rate").
const interimReportDelay = 10 * time.Second

// firstReportHold returns how long the claim's status should go on reporting nothing: >0
// while interimReportDelay has not passed since the claim was first seen. 0 means report now.
func (r *claimReconciler) firstReportHold(s *claimStep) time.Duration {
	return max(0, interimReportDelay-r.Clock.Since(s.mem.firstSeen))
}

// holdInterimReport returns how long the claim's status should go on not reporting sb, the
// Sandbox it created or took while starting: > 0 while sb is not Ready, nothing reported it
// yet and the first report's hold lasts. 0 means report now.
func (r *claimReconciler) holdInterimReport(s *claimStep, sb *agentsv1beta1.Sandbox) time.Duration {
	if s.mem.unreported != sb.Name || s.claim.Status.Sandbox.Name != "" ||
		meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
		return 0
	}
	return r.firstReportHold(s)
}

// holdWaitingReport returns how long the claim's status should go on not reporting that it
// waits for a member of its pool: > 0 while its status reports nothing yet and the first
// report's hold lasts. Most waits end sooner (a member becomes ready, and wakes the claim).
func (r *claimReconciler) holdWaitingReport(s *claimStep) time.Duration {
	if meta.FindStatusCondition(s.claim.Status.Conditions, agentsv1beta1.ConditionReady) != nil {
		return 0
	}
	return r.firstReportHold(s)
}

// report mirrors the bound Sandbox into the claim's status and, when that makes the claim
// Ready, first makes the Sandbox's pod look bound: Ready means routable. The sandbox-router
// finds a claimed pod by its name only once the pod has lost the warm-pool label, and users'
// NetworkPolicies and meshes select on claim-uid, launch-type and the claim's pod metadata; a
// claim reported Ready before its pod carries them is routed nowhere. So the pod is patched
// here, on the claim's path, between the bind and the Ready status: the same write the Sandbox
// controller would make later, moved ahead of Ready, not a second one (the Sandbox controller
// then finds nothing left to write). A pod the cache does not show yet keeps the claim
// waiting briefly; the returned duration says when to look again.
func (r *claimReconciler) report(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox) (time.Duration, error) {
	r.mirror(claim, sb)
	if !meta.IsStatusConditionTrue(claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		return 0, nil
	}
	name := podNameFor(sb)
	notYet := func() {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxNotReady, fmt.Sprintf(messagePodNotLabelledFmt, name))
	}
	pod := &corev1.Pod{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: sb.Namespace, Name: name}, pod); {
	case apierrors.IsNotFound(err) || (err == nil && (!isControlledBy(pod, sb) || !pod.DeletionTimestamp.IsZero())):
		notYet()
		return retryAfterCacheCatchesUp, nil
	case err != nil:
		notYet()
		return 0, fmt.Errorf("reading the sandbox's pod: %w", err)
	}
	start := r.Clock.Now()
	outcome, podRV, err := r.podViews.syncPodMetadata(ctx, r.Client, sb, pod)
	switch {
	case err != nil:
		notYet()
		return 0, fmt.Errorf("labelling the sandbox's pod for its claim: %w", err)
	case outcome == podMetadataStaleView:
		// sb (from the cache) is older than the Sandbox the pod was last labelled from: what
		// the pod shows is not known to route this claim until the cache catches up.
		r.Metrics.podMetadataStaleView(claimControllerName)
		notYet()
		return retryAfterCacheCatchesUp, nil
	}
	// Ready once pod watchers have been sent the route (podwatch.go).
	if r.podSeen != nil && (outcome == podMetadataWritten || outcome == podMetadataInFlight) &&
		!r.podSeen.wait(ctx, r.Client, client.ObjectKeyFromObject(pod), podRV, routeVisibleWait) {
		notYet()
		return retryAfterCacheCatchesUp, nil
	}
	if outcome == podMetadataWritten {
		r.Metrics.claimPhase(PhaseRoute, r.Clock.Since(start))
	}
	return 0, nil
}

// reportLoss makes sure the claim reports a lost pod of its Sandbox that the Sandbox watch
// delivered (seenLosses), even when the Sandbox was Ready again before this claim looked (its
// replacement pod can be Ready within milliseconds, and claims wait in their queue behind a
// burst): a claim reported Ready before the loss goes Ready=False PodLost first, and the
// caller requeues it at once to mirror the Sandbox's Ready=True, as the Sandbox's watchers
// saw it. It reports whether it did. The loss is forgotten once the claim's status is
// written, whatever it shows. wasReady says the claim was reported Ready when the reconcile
// began.
func (r *claimReconciler) reportLoss(s *claimStep, sb *agentsv1beta1.Sandbox, wasReady bool) bool {
	nn := client.ObjectKeyFromObject(s.claim)
	seen, ok := r.losses.get(nn)
	if !ok {
		return false
	}
	s.event(func() { r.losses.clear(nn, seen) })
	if !wasReady || seen.sandbox != sb.Name || !meta.IsStatusConditionTrue(s.claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		return false // the claim shows the loss (mirror), or another reason it is not Ready
	}
	r.setReady(s.claim, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, seen.message)
	return true
}

// announceLoss sends the claim's PodLost Warning event when its status is about to report a
// loss it did not report before (old is the claim as the reconcile found it).
func (r *claimReconciler) announceLoss(s *claimStep, old *extv1beta1.SandboxClaim) {
	now := meta.FindStatusCondition(s.claim.Status.Conditions, agentsv1beta1.ConditionReady)
	before := meta.FindStatusCondition(old.Status.Conditions, agentsv1beta1.ConditionReady)
	if now == nil || now.Reason != agentsv1beta1.ReasonPodLost || (before != nil && before.Reason == agentsv1beta1.ReasonPodLost) {
		return
	}
	r.eventf(s, corev1.EventTypeWarning, eventPodLost, "Report", "Sandbox %s lost its pod: %s", s.claim.Status.Sandbox.Name, now.Message)
}

// setReady sets the claim's Ready condition, keeping its transition time when the status
// does not change.
func (r *claimReconciler) setReady(claim *extv1beta1.SandboxClaim, status metav1.ConditionStatus, reason, msg string) {
	setCondition(&claim.Status.Conditions, claim.Generation, r.Clock.Now(), agentsv1beta1.ConditionReady, status, reason, msg)
}

func (r *claimReconciler) eventf(s *claimStep, eventType, reason, action, note string, args ...any) {
	claim := s.claim
	s.event(func() { r.Recorder.Eventf(claim, nil, eventType, reason, action, note, args...) })
}

func (s *claimStep) event(f func()) { s.events = append(s.events, f) }

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
// pause (the refill policy's quiet period), so that a burst's claims are not slowed by it, or
// MaxBookkeepingDelay after the claim became Ready, as claims under steady traffic never
// pause. It returns how long to wait before trying again.
func (r *claimReconciler) recordSandboxName(ctx context.Context, s *claimStep, sb *agentsv1beta1.Sandbox) (time.Duration, error) {
	claim := s.claim
	pool := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}
	nn := client.ObjectKeyFromObject(claim)
	if claim.Annotations[agentsv1beta1.AnnotationSandboxName] == sb.Name && s.mem.adopted == "" {
		r.wakeBookkeeping(r.activity.stopWaiting(pool, nn, false)) // done (by an earlier process, say)
		r.wakeBookkeeping(r.slots.drop(nn))
		return 0, nil
	}
	if last, ok := r.activity.lastClaim(pool, r.Clock.Now()); ok {
		var readySince time.Time
		if c := meta.FindStatusCondition(claim.Status.Conditions, agentsv1beta1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
			readySince = c.LastTransitionTime.Time
		}
		// Claims that never pause do not hold it back past MaxBookkeepingDelay after Ready.
		quiet := r.BookkeepingDelay - r.Clock.Since(last)
		if wait := boundDeferral(quiet, r.MaxBookkeepingDelay, readySince, r.Clock.Now()); wait > 0 {
			if r.activity.awaitPause(pool, nn) {
				return wait, nil // this claim looks for the pause
			}
			// Another claim of the pool looks and wakes this one; its own bound otherwise.
			return boundDeferral(r.MaxBookkeepingDelay, r.MaxBookkeepingDelay, readySince, r.Clock.Now()), nil
		}
		r.wakeBookkeeping(r.activity.stopWaiting(pool, nn, quiet <= 0))
		if quiet > 0 && r.slots != nil {
			// Past its bound while claims still come: its turn among the others past theirs
			// (sandboxclaim_bookkeeping.go). Woken when a slot is handed to it; the requeue is
			// in case the wake-up is lost.
			if !r.slots.acquire(nn) {
				return max(r.MaxBookkeepingDelay, retryAfterCacheCatchesUp), nil
			}
			defer func() { r.wakeBookkeeping(r.slots.release()) }()
		} else {
			r.wakeBookkeeping(r.slots.drop(nn))
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

// wakeBookkeeping sends the claims whose bookkeeping waited to their queue. It never blocks a
// reconcile: a claim the full channel leaves out still has its own bound.
func (r *claimReconciler) wakeBookkeeping(claims []types.NamespacedName) {
	for _, nn := range claims {
		select {
		case r.bookkeepingWake <- event.GenericEvent{Object: &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}}:
		default:
		}
	}
}

// annotateClaim sets one annotation of the claim, in the API server and in claim. The patch
// goes through a bare copy, which takes the API server's answer: claim holds the status this
// reconcile is working out. A claim the API server no longer has is errClaimDeleted: its
// deletion has not reached the cache yet, and it has no status to write either (writing one
// cost a second request answered 404, 0.1-0.25 per claim served in the overload scenario,
// whose claims live 2-10 s).
func (r *claimReconciler) annotateClaim(ctx context.Context, claim *extv1beta1.SandboxClaim, key, value string) error {
	p := &metadataPatch{}
	p.setAnnotation(key, &value)
	target := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
	if err := patchMetadata(ctx, r.Client, target, p); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %w", errClaimDeleted, err)
		}
		return err
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[key] = value
	return nil
}
