package load

// The cold floor: what the API server allows for claims served cold (a pool of zero
// replicas) when no controller runs. The operator is stopped and its webhooks removed as for
// the floor (floor.go), and the load generator makes, for each claim, the writes sandgate's
// cold path makes and no other, with the bodies sandgate writes:
//
//  1. POST the claim;
//  2. POST the claim's Sandbox (reconcilers' coldStart): named after the claim, controlled by
//     it, labels template-ref hash, claim-uid, launch-type=cold, template hash and created-by,
//     annotations template-ref and pod-name, the spec policy.ClaimBlueprint builds from the
//     template;
//  3. POST its pod (reconcilers' desiredPod): named after the Sandbox, controlled by it, the
//     Sandbox's labels pods carry, the identity labels, name hash and sandbox UID, the
//     propagated-keys record (when anything was propagated), the Sandbox version its metadata
//     is from (metadata-from), the blueprint's pod spec;
//  4. wait for the pod to be Ready (kwok, the scheduler), seen on one pod watch opened before
//     the claims;
//  5. ONE status patch of the Sandbox from empty to Ready (sandgate writes none before the
//     pod is Ready): selector, podIPs, nodeName, conditions Suspended, PodScheduled, Ready;
//  6. ONE status patch of the claim to Ready (floorStatusPatch).
//
// sandgate may write more on the way (a claim status naming the Sandbox before it is Ready);
// the floor is the least a client that already knows what to write must write.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// annotationPropagatedKeys is reconcilers' record, on a pod, of the keys it took from the
// pod template.
const annotationPropagatedKeys = agentsv1beta1.Domain + "propagated-keys"

// annotationPodMetadataFrom is reconcilers' record, on a pod, of the Sandbox resourceVersion
// its metadata was written from.
const annotationPodMetadataFrom = agentsv1beta1.SandgateDomain + "metadata-from"

// Messages of the Sandbox conditions sandgate sets on a Ready Sandbox that are not part of
// the API's constants.
const messageNotSuspended = "Sandbox is not suspended"

// sandboxLabelsOnPod are the Sandbox labels sandgate copies onto its pod.
var sandboxLabelsOnPod = []string{
	agentsv1beta1.LabelClaimUID,
	agentsv1beta1.LabelWarmPoolSandbox,
	agentsv1beta1.LabelSandboxTemplateRefHash,
	agentsv1beta1.LabelTemplateUID,
	agentsv1beta1.LabelCreatedBy,
}

// coldSandbox is the Sandbox sandgate creates for claim, cold, from tmpl.
func coldSandbox(tmpl *extv1beta1.SandboxTemplate, claim *extv1beta1.SandboxClaim) (*agentsv1beta1.Sandbox, error) {
	bp, errs := policy.ClaimBlueprint(tmpl, claim)
	if len(errs) > 0 {
		return nil, fmt.Errorf("building the claim's blueprint: %w", errs.ToAggregate())
	}
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name:      claim.Name,
			Namespace: claim.Namespace,
			Labels: map[string]string{
				agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name),
				agentsv1beta1.LabelClaimUID:               string(claim.UID),
				agentsv1beta1.LabelLaunchType:             agentsv1beta1.LaunchTypeCold,
				agentsv1beta1.LabelSandboxTemplateHash:    policy.TemplateHash(tmpl),
			},
			Annotations: map[string]string{
				agentsv1beta1.AnnotationSandboxTemplateRef: tmpl.Name,
				agentsv1beta1.AnnotationPodName:            claim.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind(kindSandboxClaim))},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: bp},
	}
	if cb, ok := claim.Labels[agentsv1beta1.LabelCreatedBy]; ok {
		sb.Labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	return sb, nil
}

// coldPod is the pod sandgate creates for sb, as created (sb carries its UID).
func coldPod(sb *agentsv1beta1.Sandbox) *corev1.Pod {
	tmpl := sb.Spec.PodTemplate.ObjectMeta
	podLabels := policy.PodMetadataFromTemplate(tmpl.Labels)
	annotations := policy.PodMetadataFromTemplate(tmpl.Annotations)
	keys, _ := json.Marshal(struct { // a struct of string slices always encodes
		Labels      []string `json:"labels,omitempty"`
		Annotations []string `json:"annotations,omitempty"`
	}{slices.Sorted(maps.Keys(podLabels)), slices.Sorted(maps.Keys(annotations))})
	if len(podLabels) > 0 || len(annotations) > 0 {
		// Absent when nothing was propagated, as reconcilers write it.
		annotations[annotationPropagatedKeys] = string(keys)
	}
	for _, k := range sandboxLabelsOnPod {
		if v, ok := sb.Labels[k]; ok {
			podLabels[k] = v
		}
	}
	for _, k := range policy.PodIdentityLabels {
		if v, ok := tmpl.Labels[k]; ok {
			podLabels[k] = v
		}
	}
	podLabels[agentsv1beta1.LabelSandboxNameHash] = agentsv1beta1.NameHash(sb.Name)
	podLabels[agentsv1beta1.LabelSandboxUID] = string(sb.UID)
	if sb.ResourceVersion != "" {
		// The Sandbox version the pod's metadata is from, as reconcilers record it.
		annotations[annotationPodMetadataFrom] = sb.ResourceVersion
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            sb.Name,
			Namespace:       sb.Namespace,
			Labels:          podLabels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))},
		},
		Spec: *sb.Spec.PodTemplate.Spec.DeepCopy(),
	}
}

// coldSandboxStatus is the status sandgate writes on sb once its pod is Ready.
func coldSandboxStatus(sb *agentsv1beta1.Sandbox, pod *corev1.Pod, now time.Time) agentsv1beta1.SandboxStatus {
	st := agentsv1beta1.SandboxStatus{
		Selector: agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash(sb.Name),
		NodeName: pod.Spec.NodeName,
	}
	for _, ip := range pod.Status.PodIPs {
		st.PodIPs = append(st.PodIPs, ip.IP)
	}
	if len(st.PodIPs) == 0 && pod.Status.PodIP != "" {
		st.PodIPs = []string{pod.Status.PodIP}
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: sb.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	set(agentsv1beta1.ConditionSuspended, metav1.ConditionFalse, agentsv1beta1.ReasonNotSuspended, messageNotSuspended)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			reason := c.Reason
			if reason == "" {
				reason = string(corev1.PodScheduled)
			}
			set(agentsv1beta1.ConditionPodScheduled, metav1.ConditionStatus(c.Status), reason, c.Message)
		}
	}
	set(agentsv1beta1.ConditionReady, metav1.ConditionTrue, agentsv1beta1.ReasonDependenciesReady, agentsv1beta1.MessagePodReady)
	return st
}

// podReady reports a pod Ready with an address: what sandgate waits for.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWatcher watches a namespace's pods and hands each one to whoever waits for it once it
// is Ready: one watch for all claims, opened before the first, as an informer would be.
type podWatcher struct {
	mu      sync.Mutex
	ready   map[string]*corev1.Pod
	waiting map[string]chan *corev1.Pod
	cancel  context.CancelFunc
	done    chan struct{}
}

// startPodWatch opens the watch on ns's pods; it returns once the watch is established.
func startPodWatch(ctx context.Context, c client.WithWatch, ns string) (*podWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		cancel()
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	w := &podWatcher{ready: map[string]*corev1.Pod{}, waiting: map[string]chan *corev1.Pod{}, cancel: cancel, done: make(chan struct{})}
	for i := range list.Items {
		w.observe(&list.Items[i])
	}
	wi, err := c.Watch(ctx, &corev1.PodList{}, &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	go func() {
		defer close(w.done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				w.observe(pod)
			}
		}
	}()
	return w, nil
}

func (w *podWatcher) observe(pod *corev1.Pod) {
	if !podReady(pod) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiting[pod.Name]; ok {
		delete(w.waiting, pod.Name)
		ch <- pod
		return
	}
	if _, seen := w.ready[pod.Name]; !seen {
		w.ready[pod.Name] = pod
	}
}

// wait returns the named pod once it is Ready.
func (w *podWatcher) wait(ctx context.Context, name string) (*corev1.Pod, error) {
	w.mu.Lock()
	if pod, ok := w.ready[name]; ok {
		delete(w.ready, name)
		w.mu.Unlock()
		return pod, nil
	}
	ch := make(chan *corev1.Pod, 1)
	w.waiting[name] = ch
	w.mu.Unlock()
	select {
	case pod := <-ch:
		return pod, nil
	case <-w.done:
		return nil, fmt.Errorf("pod watch ended before pod %s was Ready", name)
	case <-ctx.Done():
		w.mu.Lock()
		delete(w.waiting, name)
		w.mu.Unlock()
		return nil, fmt.Errorf("waiting for pod %s to be Ready: %w", name, ctx.Err())
	}
}

func (w *podWatcher) stop() {
	w.cancel()
	<-w.done
}

// coldTimes is when each step of a cold floor claim started and returned.
type coldTimes struct {
	sandboxStart, sandboxEnd, podStart, podEnd, podReady time.Time
	sbStatusStart, sbStatusEnd, statusStart, statusEnd   time.Time
}

// coldFloorClaim makes a cold claim's writes; s.floorErr says why it could not.
func (r *runner) coldFloorClaim(ctx context.Context, s *sent, pods *podWatcher) {
	claim := r.create(ctx, s)
	if s.createErr != nil {
		return
	}
	t := &coldTimes{sandboxStart: time.Now()}
	sb, err := coldSandbox(r.template, claim)
	if err == nil {
		err = r.c.Create(ctx, sb)
	}
	t.sandboxEnd = time.Now()
	if err != nil {
		s.floorErr = fmt.Errorf("creating sandbox: %w", err)
		return
	}
	if err := r.startSandbox(ctx, sb, pods, t); err != nil {
		s.floorErr = err
		return
	}
	if err := r.reportFloorReady(ctx, claim, sb, &t.statusStart, &t.statusEnd); err != nil {
		s.floorErr = err
		return
	}
	s.cold = t
}

// startSandbox makes what sandgate makes to start a created Sandbox: its pod (coldPod), and
// once pods shows the pod Ready (within Timeout), the Sandbox's Ready status; t gets the
// times of those steps.
func (r *runner) startSandbox(ctx context.Context, sb *agentsv1beta1.Sandbox, pods *podWatcher, t *coldTimes) error {
	t.podStart = time.Now()
	pod := coldPod(sb)
	err := r.c.Create(ctx, pod)
	t.podEnd = time.Now()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating pod: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	pod, err = pods.wait(wctx, pod.Name)
	cancel()
	t.podReady = time.Now()
	if err != nil {
		return err
	}
	t.sbStatusStart = time.Now()
	patch, err := mergePatch(map[string]any{"status": coldSandboxStatus(sb, pod, t.sbStatusStart)})
	if err == nil {
		err = r.c.Status().Patch(ctx, sb, patch)
	}
	t.sbStatusEnd = time.Now()
	if err != nil {
		return fmt.Errorf("patching sandbox status: %w", err)
	}
	return nil
}

// coldPath summarises the cold floor claims' timings that became Ready.
func coldPath(claims []*sent, w *ClaimWatcher) *report.ColdPath {
	var sandbox, pod, podReady, sbStatus, status, watch []time.Duration
	for _, s := range claims {
		obs, ok := w.Ready(s.name)
		if s.cold == nil || !ok {
			continue
		}
		t := s.cold
		sandbox = append(sandbox, t.sandboxEnd.Sub(t.sandboxStart))
		pod = append(pod, t.podEnd.Sub(t.podStart))
		podReady = append(podReady, t.podReady.Sub(t.podEnd))
		sbStatus = append(sbStatus, t.sbStatusEnd.Sub(t.sbStatusStart))
		status = append(status, t.statusEnd.Sub(t.statusStart))
		watch = append(watch, obs.ReadyAt.Sub(t.statusEnd))
	}
	return &report.ColdPath{
		Sandbox: stats.Summarize(sandbox), Pod: stats.Summarize(pod), PodReady: stats.Summarize(podReady),
		SandboxStatus: stats.Summarize(sbStatus), Status: stats.Summarize(status), WatchDelivery: stats.Summarize(watch),
	}
}
