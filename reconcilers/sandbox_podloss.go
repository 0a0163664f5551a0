package reconcilers

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// A lost pod. A Sandbox's pod holds the agent's processes and memory; when the pod the Sandbox
// reported Ready is deleted, evicted or replaced, they are gone, and the replacement the
// controller builds starts empty. With a kubelet that makes the replacement Ready within
// milliseconds, the status would go from Ready=True to Ready=True and say nothing. So a loss is
// reported: Ready=False with reason PodLost, written in a reconcile of its own before the
// replacement is created (a watcher sees Ready=False, then Ready=True), kept until the
// replacement is Ready, and a Warning event names the lost pod and its replacement.
//
// What makes it a loss, and what records it:
//   - The status is the record. A Sandbox whose status says Ready=True and whose pod is gone, is
//     going, or is another pod than the one reported, has lost it; whether the cache saw the
//     deletion or not, and across restarts (the Ready=True survives them). Once recorded, the
//     PodLost condition's message is the record (podLoss, parsed back from it): a restart
//     between the loss and the replacement continues from it.
//   - Which pod was reported Ready is known by UID while the process runs (podMemory), and
//     after a restart by what the status recorded of it: its IPs and node, which do not change
//     during a pod's life and which a replacement does not have yet.
//   - A pod Failed by eviction or another disruption of the node (DisruptionTarget, or reason
//     Evicted) is a loss as well, not the end of the Sandbox: it is reported PodLost, not
//     PodFailed and Finished, deleted and replaced. Finished would start the bound claim's
//     ttlSecondsAfterFinished although the agent did not finish, and an eviction through the
//     Eviction API (drain, descheduler, autoscaler) deletes the pod, which every controller of
//     this API replaces: the two ways a node takes a pod away end the same way. A pod that
//     failed on its own keeps the contract: PodFailed, Finished, not replaced.
//   - Not a loss: a Sandbox suspended, expired or being deleted, a pod this controller deleted
//     itself, a pod that had finished.

const (
	// eventPodLost (Warning) reports a lost pod: on the Sandbox once its replacement exists,
	// naming both; on a bound claim when the claim reports the loss.
	eventPodLost = "PodLost"
	// lossRecordedRequeue is how soon the reconcile after the one that recorded a loss runs to
	// build the replacement: the status write does not wake the Sandbox.
	lossRecordedRequeue = time.Millisecond
)

// Reasons of the DisruptionTarget pod condition and of an evicted pod's status that core/v1
// does not name.
const (
	disruptionByEvictionAPI = "EvictionByEvictionAPI"
	disruptionByTaint       = "DeletionByTaintManager"
	disruptionByPodGC       = "DeletionByPodGC"
	podReasonEvicted        = "Evicted"
)

// podLoss is a lost pod as the PodLost condition records it.
type podLoss struct {
	pod string
	uid types.UID // "" when not known (the controller restarted since it last saw the pod)
	// how is what happened to it: deleted, evicted, ... with the cluster's words when it said.
	how string
	// replacement is the pod the status has named as the replacement, "" before.
	replacement    string
	replacementUID types.UID
}

// The PodLost message: "Pod <pod> (uid <uid>) was <how>[; replaced by pod <pod> (uid <uid>)];
// <state>". Clients read the first part; the controller parses both back.
var podLossMessage = regexp.MustCompile(`^Pod (\S+) \(uid ([^)]+)\) was ([^;]+)(?:; replaced by pod (\S+) \(uid ([^)]+)\))?`)

const unknownUID = "unknown"

func (l *podLoss) message(state string) string {
	uid := string(l.uid)
	if uid == "" {
		uid = unknownUID
	}
	msg := fmt.Sprintf("Pod %s (uid %s) was %s", l.pod, uid, l.how)
	if l.replacement != "" {
		msg += fmt.Sprintf("; replaced by pod %s (uid %s)", l.replacement, l.replacementUID)
	}
	return msg + "; " + state
}

// recordedLoss is the loss the Ready condition records, nil when it records none.
func recordedLoss(ready *metav1.Condition) *podLoss {
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != agentsv1beta1.ReasonPodLost {
		return nil
	}
	m := podLossMessage.FindStringSubmatch(ready.Message)
	if m == nil {
		return nil // not the controller's message: nothing to go on
	}
	l := &podLoss{pod: m[1], uid: types.UID(m[2]), how: m[3], replacement: m[4], replacementUID: types.UID(m[5])}
	if l.uid == unknownUID {
		l.uid = ""
	}
	return l
}

// is reports whether pod is the lost pod.
func (l *podLoss) is(pod *corev1.Pod) bool {
	if l.uid != "" {
		return pod.UID == l.uid
	}
	// Unknown UID: the lost pod is the one going; a pod that is not is a replacement.
	return !pod.DeletionTimestamp.IsZero() || disrupted(pod)
}

// lossOf is the loss of pod, as the pod shows it going.
func lossOf(pod *corev1.Pod) *podLoss {
	return &podLoss{pod: pod.Name, uid: pod.UID, how: fate(pod)}
}

// disrupted reports whether pod failed because its node or the cluster took it away
// (eviction, node shutdown, preemption), not because its containers failed.
func disrupted(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodFailed {
		return false
	}
	if pod.Status.Reason == podReasonEvicted {
		return true
	}
	c := podConditionOf(pod, corev1.DisruptionTarget)
	return c != nil && c.Status == corev1.ConditionTrue
}

// fate says how a pod went, from what it shows: the DisruptionTarget condition the API server,
// scheduler or kubelet set before it was taken away, an evicted pod's status, or deleted.
func fate(pod *corev1.Pod) string {
	how, detail := "deleted", ""
	if c := podConditionOf(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		detail = c.Message
		switch c.Reason {
		case disruptionByEvictionAPI:
			how = "evicted"
		case corev1.PodReasonPreemptionByScheduler:
			how = "preempted"
		case disruptionByTaint:
			how = "evicted by a taint of its node"
		case disruptionByPodGC:
			how = "deleted by the pod garbage collector"
		case corev1.PodReasonTerminationByKubelet:
			how = "terminated by its node"
		}
	}
	switch {
	case pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == podReasonEvicted:
		how, detail = "evicted by its node", pod.Status.Message
	case pod.Status.Phase == corev1.PodFailed && how == "deleted":
		how, detail = "failed", pod.Status.Message
	}
	if detail = strings.TrimSpace(detail); detail != "" {
		how += " (" + detail + ")"
	}
	// The message's parts are separated by "; ".
	return strings.ReplaceAll(how, ";", ",")
}

func podConditionOf(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// reportedState is what a Sandbox's status said of its pod when a reconcile began.
type reportedState struct {
	ready    *metav1.Condition
	podIPs   []string
	nodeName string
}

func reportedStateOf(sb *agentsv1beta1.Sandbox) reportedState {
	s := reportedState{podIPs: slices.Clone(sb.Status.PodIPs), nodeName: sb.Status.NodeName}
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady); c != nil {
		cc := *c
		s.ready = &cc
	}
	return s
}

// ownPod is pod when it is the Sandbox's: controlled by it, or an orphan built for it (which
// ensurePod adopts back); nil otherwise.
func ownPod(sb *agentsv1beta1.Sandbox, pod *corev1.Pod) *corev1.Pod {
	if pod == nil {
		return nil
	}
	if isControlledBy(pod, sb) || (metav1.GetControllerOf(pod) == nil && pod.Labels[agentsv1beta1.LabelSandboxUID] == string(sb.UID)) {
		return pod
	}
	return nil
}

// checkLoss says which loss the Sandbox reports in this reconcile: the one its status records
// (fresh false), a loss seen just now (fresh true: written before anything else is done), or
// none. pod is the pod holding the Sandbox's pod name or controlled by it (lookupPod).
func (r *sandboxReconciler) checkLoss(sb *agentsv1beta1.Sandbox, prev reportedState, pod *corev1.Pod) (loss *podLoss, fresh bool) {
	if sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended {
		return nil, false // the controller deletes the pod itself; a recorded loss is moot
	}
	if l := recordedLoss(prev.ready); l != nil {
		return l, false
	}
	own := ownPod(sb, pod)
	if own != nil && disrupted(own) {
		return lossOf(own), true
	}
	mem := r.pods.get(client.ObjectKeyFromObject(sb))
	ranUID, known := reportedPod(prev, mem)
	if !known {
		return nil, false
	}
	if own != nil && ranPod(prev, ranUID, own) {
		if own.DeletionTimestamp.IsZero() || own.UID == mem.deleted {
			return nil, false
		}
		return lossOf(own), true // someone else is deleting it
	}
	// The pod reported Ready is gone: not in the cache, or another in its place.
	if ranUID != "" && ranUID == mem.deleted {
		return nil, false
	}
	l := &podLoss{pod: podNameFor(sb), uid: ranUID, how: "deleted"}
	if g := mem.gone; g.uid != "" && (ranUID == "" || g.uid == ranUID) {
		l.pod, l.uid, l.how = g.name, g.uid, g.how
	}
	return l, true
}

// reportedPod says whether the Sandbox reported a pod Ready that it still runs, and its UID
// when known: the status says Ready=True (the UID is known while the process runs), or it
// says the pod is not ready (yet or any more) and this process reported it Ready. A Sandbox
// whose pod finished, was suspended or expired runs no pod to lose.
func reportedPod(prev reportedState, mem podMemory) (types.UID, bool) {
	switch {
	case prev.ready == nil:
		return "", false
	case prev.ready.Status == metav1.ConditionTrue:
		return mem.reported, true
	case prev.ready.Reason == agentsv1beta1.ReasonDependenciesNotReady || prev.ready.Reason == agentsv1beta1.ReasonReconcilerError:
		return mem.reported, mem.reported != ""
	}
	return "", false
}

// ranPod reports whether pod is the one the status reported Ready: by UID when known, else by
// the IPs and node the status recorded, which are the pod's for its whole life and which a
// replacement does not have before it runs.
func ranPod(prev reportedState, uid types.UID, pod *corev1.Pod) bool {
	if uid != "" {
		return pod.UID == uid
	}
	return (len(prev.podIPs) == 0 || slices.Equal(prev.podIPs, podIPsOf(pod))) &&
		(prev.nodeName == "" || prev.nodeName == pod.Spec.NodeName)
}

func podIPsOf(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	return ips
}

// reportLoss puts the loss into the Ready condition setStatus computed from pod: PodLost while
// the replacement is not Ready (always for a fresh loss, whose status is written before the
// replacement is built), and queues the Warning event naming the lost pod and its replacement
// once the replacement exists and the status names it (the event goes out after the status
// write, so it is sent once per replacement).
func (r *sandboxReconciler) reportLoss(sb *agentsv1beta1.Sandbox, loss *podLoss, pod *corev1.Pod, fresh bool, events *[]func()) {
	own := ownPod(sb, pod)
	if !fresh && own != nil && loss.is(own) && own.DeletionTimestamp.IsZero() && !disrupted(own) {
		return // the pod reported lost runs after all (an orphan adopted back): no loss
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if ready == nil {
		return
	}
	var state string
	switch {
	case own != nil && !loss.is(own):
		if own.UID != loss.replacementUID {
			loss.replacement, loss.replacementUID = own.Name, own.UID
			note := loss.message("its processes and memory are gone")
			*events = append(*events, func() {
				r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, eventPodLost, "Replace", "%s", note)
			})
		}
		if !fresh && (ready.Status == metav1.ConditionTrue || ready.Reason != agentsv1beta1.ReasonDependenciesNotReady) {
			return // Ready again, or a state of the replacement's own (it finished, ...)
		}
		state = ready.Message
	case own != nil && own.DeletionTimestamp.IsZero():
		state = "deleting it"
	case own != nil:
		state = "waiting for it to terminate"
	default:
		state = "creating its replacement"
	}
	r.setCondition(sb, agentsv1beta1.ConditionReady, metav1.ConditionFalse, agentsv1beta1.ReasonPodLost, loss.message(state))
}

// podMemory is what the Sandbox controller remembers of one Sandbox's pods.
type podMemory struct {
	// reported is the UID of the pod the Sandbox last reported Ready.
	reported types.UID
	// deleted is the UID of the pod the controller last deleted itself.
	deleted types.UID
	// gone is the last of its pods whose deletion the watch delivered, as it was then.
	gone goneP
}

type goneP struct {
	name, how string
	uid       types.UID
}

// podMemories is podMemory per Sandbox, shared by the controller and its pod watch.
type podMemories struct {
	mu sync.Mutex
	m  map[types.NamespacedName]podMemory
}

func newPodMemories() *podMemories { return &podMemories{m: map[types.NamespacedName]podMemory{}} }

func (p *podMemories) get(nn types.NamespacedName) podMemory {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[nn]
}

func (p *podMemories) update(nn types.NamespacedName, f func(*podMemory)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m[nn]
	f(&m)
	p.m[nn] = m
}

func (p *podMemories) forget(nn types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, nn)
}
