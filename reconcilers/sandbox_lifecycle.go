package reconcilers

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// The Sandbox lifecycle events of the public controller (v1.0): their reasons and types are
// what users of the public project filter on (kubectl describe, event exporters), so they are
// the public ones. Each reports a transition once: the pod's create when it succeeded, the
// others with the status write that records the transition (transitionEvents), so neither a
// retried write nor the several reconciles of a pod's start-up send one twice.
// --disable-sandbox-events turns them off with the rest of the Sandbox controller's events.
const (
	eventSandboxPodCreated      = "SandboxPodCreated"      // Normal
	eventSandboxPodCreateFailed = "SandboxPodCreateFailed" // Warning
	eventSandboxReady           = "SandboxReady"           // Normal
	eventSandboxSuspended       = "SandboxSuspended"       // Normal
	// eventSandboxExpired (Normal, policy Retain only: Delete leaves no object to report on)
	// is sent by expire.
	eventPodSucceeded = "PodSucceeded" // Normal
	eventPodFailed    = "PodFailed"    // Warning

	actionPodCreation = "PodCreation"
	actionReady       = "Ready"
	actionSuspend     = "Suspend"
	actionPodExit     = "PodExit"
	actionExpiry      = "Expiry"

	messagePodCreatedFmt      = "Created pod %s"
	messagePodCreateFailedFmt = "Failed to create pod %s: %v"
	messageSandboxReadyFmt    = "Sandbox is ready: pod %s is Ready"
	messageSandboxSuspendFmt  = "Sandbox suspended by its operatingMode: pod %s is deleted"
	messagePodSucceededFmt    = "Pod %s completed successfully"
	messagePodFailedFmt       = "Pod %s failed"
)

// errPodCreate marks the error of a failed pod create (createPod), which the Sandbox reports
// in a SandboxPodCreateFailed event.
var errPodCreate = errors.New("creating pod")

// lifecycleEvent is one event to record on a Sandbox.
type lifecycleEvent struct {
	eventType, reason, action, note string
}

func podCreatedEvent(pod *corev1.Pod) lifecycleEvent {
	return lifecycleEvent{corev1.EventTypeNormal, eventSandboxPodCreated, actionPodCreation, fmt.Sprintf(messagePodCreatedFmt, pod.Name)}
}

// createFailed says whether err is a pod create the API server refused. AlreadyExists is a
// cache that has not shown the pod yet, resolved by the next reconcile: no failure to report.
func createFailed(err error) bool {
	return errors.Is(err, errPodCreate) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err)
}

// transitionEvents are the lifecycle events of the transitions from the status old to cur:
// Ready becoming True, Ready's reason becoming SandboxSuspended (the operating mode asked for
// the suspension: the pod is being deleted, or is gone), Finished becoming True (or changing
// its reason). Their reasons are the public ones, which are the Ready reasons of those states.
// podName names the pod in the notes.
func transitionEvents(old, cur *agentsv1beta1.SandboxStatus, podName string) []lifecycleEvent {
	var out []lifecycleEvent
	if became(old, cur, agentsv1beta1.ConditionReady) {
		out = append(out, lifecycleEvent{corev1.EventTypeNormal, eventSandboxReady, actionReady, fmt.Sprintf(messageSandboxReadyFmt, podName)})
	}
	if readyReasonBecame(old, cur, agentsv1beta1.ReasonSandboxSuspended) {
		out = append(out, lifecycleEvent{corev1.EventTypeNormal, eventSandboxSuspended, actionSuspend, fmt.Sprintf(messageSandboxSuspendFmt, podName)})
	}
	if became(old, cur, agentsv1beta1.ConditionFinished) {
		switch meta.FindStatusCondition(cur.Conditions, agentsv1beta1.ConditionFinished).Reason {
		case agentsv1beta1.ReasonPodSucceeded:
			out = append(out, lifecycleEvent{corev1.EventTypeNormal, eventPodSucceeded, actionPodExit, fmt.Sprintf(messagePodSucceededFmt, podName)})
		case agentsv1beta1.ReasonPodFailed:
			out = append(out, lifecycleEvent{corev1.EventTypeWarning, eventPodFailed, actionPodExit, fmt.Sprintf(messagePodFailedFmt, podName)})
		}
	}
	return out
}

// readyReasonBecame says whether Ready's reason is reason in cur and was not in old.
func readyReasonBecame(old, cur *agentsv1beta1.SandboxStatus, reason string) bool {
	now := meta.FindStatusCondition(cur.Conditions, agentsv1beta1.ConditionReady)
	before := meta.FindStatusCondition(old.Conditions, agentsv1beta1.ConditionReady)
	return now != nil && now.Reason == reason && (before == nil || before.Reason != reason)
}

// became says whether condition typ is True in cur and was not True, with the same reason,
// in old.
func became(old, cur *agentsv1beta1.SandboxStatus, typ string) bool {
	now := meta.FindStatusCondition(cur.Conditions, typ)
	if now == nil || now.Status != metav1.ConditionTrue {
		return false
	}
	before := meta.FindStatusCondition(old.Conditions, typ)
	return before == nil || before.Status != metav1.ConditionTrue || before.Reason != now.Reason
}

// record sends ev about sb.
func (r *sandboxReconciler) record(sb *agentsv1beta1.Sandbox, ev lifecycleEvent) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sb, nil, ev.eventType, ev.reason, ev.action, "%s", ev.note)
	}
}
