package load

// The floor: what the API server allows when no controller runs at all. The load generator
// makes each claim's writes itself, the same three writes sandgate's claim path makes and no
// other: (1) POST the claim, (2) ONE JSON merge patch of a ready pool member binding it —
// controller ownerReference to the claim, labels claim-uid and launch-type=warm, the
// warm-pool label removed, its resourceVersion as precondition — and (3) ONE merge patch of
// the claim's status: Ready mirrored from the Sandbox and status.sandbox.{name,podIPs}. The
// bodies are those of reconcilers' bindPatch and status patch, byte for byte in shape, so the
// API server decodes, validates, stores and fans out the same objects as in the operator's
// run.
//
// The pool members are made by the operator itself before the measurement (the run fills the
// pool with the operator and its webhooks in place, then Probes.DetachOperator stops the
// operator and deletes the webhook configurations). Members made any other way would differ
// in size, labels, owner references, status and pods, and the API server's cost of every
// patch, watch event and cache entry depends on exactly those; with the operator's own
// members, etcd holds the same objects in the same numbers in both runs, and the only
// difference while the claims run is who writes: a controller with its informers, queues and
// webhooks, or a client that already knows what to write.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// Kinds of the owner references of the floor.
const (
	kindSandboxClaim    = "SandboxClaim"
	kindSandboxWarmPool = "SandboxWarmPool"
)

// floorPool hands out the ready members of the pool, each once, in list order: the O(1)
// pick of a client that needs no index.
type floorPool struct {
	mu      sync.Mutex
	members []*agentsv1beta1.Sandbox
	// pods are the members' pods by Sandbox name, listed with them for the route write
	// (Config.FloorRoute); nil otherwise.
	pods map[string]*corev1.Pod
}

// pod is member's pod as listed before the claims.
func (p *floorPool) pod(member *agentsv1beta1.Sandbox) (*corev1.Pod, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[member.Name]
	return pod, ok
}

func (p *floorPool) pop() (*agentsv1beta1.Sandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.members) == 0 {
		return nil, false
	}
	m := p.members[0]
	p.members = p.members[1:]
	return m, true
}

// floorMembers lists the ready, unbound members of the run's pool.
func (r *runner) floorMembers(ctx context.Context) (*floorPool, error) {
	var list agentsv1beta1.SandboxList
	if err := r.c.List(ctx, &list, client.InNamespace(r.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing pool members for the floor: %w", err)
	}
	p := &floorPool{}
	for i := range list.Items {
		if sb := &list.Items[i]; isReadyMember(sb) {
			p.members = append(p.members, sb)
		}
	}
	if !r.cfg.FloorRoute {
		return p, nil
	}
	var pods corev1.PodList
	if err := r.c.List(ctx, &pods, client.InNamespace(r.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the pool members' pods for the floor's route write: %w", err)
	}
	p.pods = membersPods(p.members, pods.Items)
	return p, nil
}

// membersPods maps each member's name to its pod among pods: the pod of the member's pod
// name that the member controls.
func membersPods(members []*agentsv1beta1.Sandbox, pods []corev1.Pod) map[string]*corev1.Pod {
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	out := map[string]*corev1.Pod{}
	for _, m := range members {
		name := m.Name
		if n := m.Annotations[agentsv1beta1.AnnotationPodName]; n != "" {
			name = n
		}
		if pod, ok := byName[name]; ok {
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == m.UID {
				out[m.Name] = pod
			}
		}
	}
	return out
}

// isReadyMember reports a Sandbox a claim may bind: a pool's Ready, unbound member.
func isReadyMember(sb *agentsv1beta1.Sandbox) bool {
	ref := metav1.GetControllerOf(sb)
	_, member := sb.Labels[agentsv1beta1.LabelWarmPoolSandbox]
	_, bound := sb.Labels[agentsv1beta1.LabelClaimUID]
	return member && !bound && ref != nil && ref.Kind == kindSandboxWarmPool && sb.DeletionTimestamp.IsZero() &&
		meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady)
}

// floorTimes is when each write of a floor claim started and returned; the route write's
// are zero when the floor makes none.
type floorTimes struct {
	bindStart, bindEnd, routeStart, routeEnd, statusStart, statusEnd time.Time
}

// floorClaim makes the claim's three writes; s.floorErr says why it could not.
func (r *runner) floorClaim(ctx context.Context, s *sent, pool *floorPool) {
	claim := r.create(ctx, s)
	if s.createErr != nil {
		return
	}
	s.floor, s.floorBindErrs, s.floorErr = r.serveFloor(ctx, claim, pool)
}

// serveFloor makes the floor's writes of a created claim: the bind of a member of pool (the
// next one while a bind fails, as the operator would), the route write with FloorRoute, and
// the Ready status. It returns their times, the binds that failed on the way, and why the
// claim could not be served, if it could not.
func (r *runner) serveFloor(ctx context.Context, claim *extv1beta1.SandboxClaim, pool *floorPool) (*floorTimes, []error, error) {
	t := &floorTimes{}
	var bindErrs []error
	for {
		member, ok := pool.pop()
		if !ok {
			return nil, bindErrs, errors.New("no ready pool member left to bind")
		}
		bound, err := r.bindFloor(ctx, claim, member, t)
		if err != nil {
			// Nothing else writes the members during a floor run: any failure is worth
			// reporting.
			bindErrs = append(bindErrs, err)
			continue
		}
		if r.cfg.FloorRoute {
			pod, ok := pool.pod(member)
			if !ok {
				return nil, bindErrs, fmt.Errorf("no pod of member %s listed for the route write", member.Name)
			}
			if err := r.routeFloor(ctx, claim, bound, pod, t); err != nil {
				return nil, bindErrs, err
			}
		}
		if err := r.reportFloorReady(ctx, claim, bound, &t.statusStart, &t.statusEnd); err != nil {
			return nil, bindErrs, err
		}
		return t, bindErrs, nil
	}
}

// bindFloor makes the floor's bind patch of member to claim, timing it into t, and returns the
// Sandbox as the API server answered it.
func (r *runner) bindFloor(ctx context.Context, claim *extv1beta1.SandboxClaim, member *agentsv1beta1.Sandbox, t *floorTimes) (*agentsv1beta1.Sandbox, error) {
	bound := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: member.Namespace, Name: member.Name}}
	if err := r.timedPatch(ctx, bound, floorBindPatch(claim, member), &t.bindStart, &t.bindEnd); err != nil {
		return nil, fmt.Errorf("binding %s: %w", member.Name, err)
	}
	return bound, nil
}

// routeFloor makes the contract floor's route write of a bound member's pod for claim,
// timing it into t: the pod write sandgate makes between the bind and the Ready status.
// bound is the member as the bind answered it.
func (r *runner) routeFloor(ctx context.Context, claim *extv1beta1.SandboxClaim, bound *agentsv1beta1.Sandbox, pod *corev1.Pod, t *floorTimes) error {
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if err := r.timedPatch(ctx, target, floorRoutePatch(claim, bound.ResourceVersion, pod), &t.routeStart, &t.routeEnd); err != nil {
		return fmt.Errorf("routing pod %s: %w", pod.Name, err)
	}
	return nil
}

// timedPatch sends body as a JSON merge patch of obj (which takes the answer), noting when
// the call started and returned.
func (r *runner) timedPatch(ctx context.Context, obj client.Object, body any, start, end *time.Time) error {
	*start = time.Now()
	patch, err := mergePatch(body)
	if err == nil {
		err = r.c.Patch(ctx, obj, patch)
	}
	*end = time.Now()
	return err
}

// reportFloorReady makes the floor's status patch of claim, Ready mirrored from sb, noting
// when it started and when it returned.
func (r *runner) reportFloorReady(ctx context.Context, claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, start, end *time.Time) error {
	*start = time.Now()
	patch, err := mergePatch(floorStatusPatch(claim, sb, *start))
	if err == nil {
		err = r.c.Status().Patch(ctx, claim, patch)
	}
	if err != nil {
		return fmt.Errorf("patching claim status: %w", err)
	}
	*end = time.Now()
	return nil
}

// mergePatch encodes body as a JSON merge patch.
func mergePatch(body any) (client.Patch, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, data), nil
}

// floorBindPatch is the operator's bind patch (reconcilers.bindPatch) of member to claim.
func floorBindPatch(claim *extv1beta1.SandboxClaim, member *agentsv1beta1.Sandbox) map[string]any {
	labels := map[string]any{
		agentsv1beta1.LabelClaimUID:        string(claim.UID),
		agentsv1beta1.LabelLaunchType:      agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.LabelWarmPoolSandbox: nil,
	}
	if cb, ok := claim.Labels[agentsv1beta1.LabelCreatedBy]; ok {
		labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	return map[string]any{"metadata": map[string]any{
		"resourceVersion": member.ResourceVersion,
		"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind(kindSandboxClaim))},
		"labels":          labels,
	}}
}

// floorRoutePatch is the operator's route write (reconcilers.report) of pod, the pod of a
// pool member just bound to claim: the pod gets the bound Sandbox's claim-uid (and
// created-by) label and loses the warm-pool label and the idle member's safe-to-evict mark,
// and records from, the bound Sandbox's resourceVersion, as the version its metadata is from.
// The Sandbox's other labels are on the pod already, from its creation.
func floorRoutePatch(claim *extv1beta1.SandboxClaim, from string, pod *corev1.Pod) map[string]any {
	labels := map[string]any{agentsv1beta1.LabelClaimUID: string(claim.UID)}
	if _, ok := pod.Labels[agentsv1beta1.LabelWarmPoolSandbox]; ok {
		labels[agentsv1beta1.LabelWarmPoolSandbox] = nil
	}
	if cb, ok := claim.Labels[agentsv1beta1.LabelCreatedBy]; ok {
		labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	annotations := map[string]any{}
	if _, ok := pod.Annotations[reconcilers.AnnotationSafeToEvict]; ok {
		annotations[reconcilers.AnnotationSafeToEvict] = nil
	}
	if from != "" {
		annotations[annotationPodMetadataFrom] = from
	}
	metadata := map[string]any{"labels": labels}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	return map[string]any{"metadata": metadata}
}

// floorStatusPatch is the operator's first status patch of a claim bound to a Ready Sandbox:
// the merge patch from an empty status to Ready mirrored from the Sandbox.
func floorStatusPatch(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, now time.Time) map[string]any {
	reason, msg := "", ""
	if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady); c != nil {
		reason, msg = c.Reason, c.Message
	}
	return map[string]any{"status": extv1beta1.SandboxClaimStatus{
		Conditions: []metav1.Condition{{
			Type:               agentsv1beta1.ConditionReady,
			Status:             metav1.ConditionTrue,
			Reason:             reason,
			Message:            msg,
			ObservedGeneration: claim.Generation,
			LastTransitionTime: metav1.NewTime(now),
		}},
		Sandbox: extv1beta1.SandboxStatusRef{Name: sb.Name, PodIPs: sb.Status.PodIPs},
	}}
}

// clientPath summarises the floor claims' timings that became Ready.
func clientPath(claims []*sent, w *ClaimWatcher) *report.ClientPath {
	var before, bind, route, between, status, watch []time.Duration
	for _, s := range claims {
		obs, ok := w.Ready(s.name)
		if s.floor == nil || !ok {
			continue
		}
		t := s.floor
		before = append(before, t.bindStart.Sub(s.createdAt.Add(s.callTook)))
		bind = append(bind, t.bindEnd.Sub(t.bindStart))
		lastWrite := t.bindEnd
		if !t.routeStart.IsZero() {
			route = append(route, t.routeEnd.Sub(t.routeStart))
			lastWrite = t.routeEnd
		}
		between = append(between, t.statusStart.Sub(lastWrite))
		status = append(status, t.statusEnd.Sub(t.statusStart))
		watch = append(watch, obs.ReadyAt.Sub(t.statusEnd))
	}
	return &report.ClientPath{
		BeforeBind:     stats.Summarize(before),
		Bind:           stats.Summarize(bind),
		Route:          stats.Summarize(route),
		BetweenPatches: stats.Summarize(between),
		Status:         stats.Summarize(status),
		WatchDelivery:  stats.Summarize(watch),
	}
}
