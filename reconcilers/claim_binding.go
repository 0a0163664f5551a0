package reconcilers

// The binding protocol, in one place. A claim is bound to a Sandbox when the Sandbox's
// controller reference points at the claim and its claim-uid label holds the claim's UID;
// the Sandbox is the only record of that, and it is written in one request:
//
//  1. Pick: take a ready, unbound member of (namespace, pool, claim's stamp) from the
//     WarmIndex and reserve it in memory, so that concurrent claims of this process do not
//     race for it. O(1), no List.
//  2. Bind: ONE JSON merge patch of the member, with its resourceVersion as precondition:
//     ownerReferences = [controller → claim], labels claim-uid and launch-type=warm, the
//     warm-pool label removed (and the claim's created-by and additional pod metadata, so
//     that no second write is needed). 409 (the member changed: bound by someone else, or
//     its pool deleted it), 403 (the binding guard refused: wrong hash, already bound, not
//     the operator) or 404 → release it and pick the next one. The binding guard admits the
//     patch only from the operator and only when the member's template hash equals the
//     claim's stamp, whatever this process's cache says.
//  3. Report: ONE status patch of the claim (the claim's Reconcile writes it), then the
//     SandboxAdopted event.
//
// A crash between 2 and 3 loses nothing: after a restart the claim finds its Sandbox through
// the IndexSandboxClaimUID index and writes the status then. The pool sees its member leave
// (controller reference gone) through its own Sandbox watch and refills, off this path; the
// Sandbox controller moves the new labels to the pod, off this path too.
//
// Cold start (no member, or env / volumeClaimTemplates on the claim): one create of a
// Sandbox named after the claim, controller-owned by it from the start, so it is bound the
// moment it exists.

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Reasons a bind attempt lost, the values of sandgate_claim_bind_conflicts_total's label.
const (
	bindLostConflict = "conflict"
	bindLostDenied   = "denied"
	bindLostGone     = "gone"
)

// bindWarm binds the claim to a ready member of key, trying members until one binds or none
// is left. It returns the bound Sandbox as the API server returned it, or nil.
func (r *ClaimReconciler) bindWarm(ctx context.Context, s *claimStep, key MemberKey, template string) (*agentsv1beta1.Sandbox, error) {
	for {
		member, ok := r.Index.Pick(key)
		if !ok {
			return nil, nil
		}
		bound := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: member.Namespace, Name: member.Name}}
		err := rawMergePatch(ctx, r.Client, bound, bindPatch(s.claim, member))
		lost := ""
		switch {
		case err == nil:
			r.Index.Release(member, releaseBound)
		case apierrors.IsConflict(err):
			lost = bindLostConflict
		case apierrors.IsForbidden(err):
			lost = bindLostDenied
		case apierrors.IsNotFound(err):
			lost = bindLostGone
		default:
			r.Index.Release(member, releaseRetry)
			return nil, fmt.Errorf("binding sandbox %s: %w", member.Name, err)
		}
		if lost != "" {
			r.Index.Release(member, releaseRejected)
			r.Metrics.bindLost(lost)
			ctrl.LoggerFrom(ctx).V(1).Info("member not bound, trying the next one", "sandbox", klog.KObj(member), "reason", lost, "error", err.Error())
			continue
		}
		s.mem.bound, s.mem.launchType, s.mem.template = bound.Name, agentsv1beta1.LaunchTypeWarm, template
		r.Metrics.warmHit()
		ctrl.LoggerFrom(ctx).V(1).Info("bound warm sandbox", "sandbox", klog.KObj(bound))
		r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventSandboxAdopted, "Bind", "Adopted warm sandbox %s", bound.Name)
		return bound, nil
	}
}

// bindPatch is the one write that binds member to claim (see the protocol above).
func bindPatch(claim *extv1beta1.SandboxClaim, member *agentsv1beta1.Sandbox) map[string]any {
	labels := map[string]any{
		agentsv1beta1.LabelClaimUID:        string(claim.UID),
		agentsv1beta1.LabelLaunchType:      agentsv1beta1.LaunchTypeWarm,
		agentsv1beta1.LabelWarmPoolSandbox: nil,
	}
	if cb := createdBy(claim); cb != "" {
		labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	body := map[string]any{"metadata": map[string]any{
		"resourceVersion": member.ResourceVersion,
		"ownerReferences": []metav1.OwnerReference{claimRef(claim)},
		"labels":          labels,
	}}
	// Additional pod metadata goes into the podTemplate, from where the Sandbox controller
	// puts it on the running pod; the pod itself is not written on the claim's path.
	if md := claim.Spec.AdditionalPodMetadata; len(md.Labels)+len(md.Annotations) > 0 {
		podMeta := map[string]any{}
		if len(md.Labels) > 0 {
			podMeta["labels"] = md.Labels
		}
		if len(md.Annotations) > 0 {
			podMeta["annotations"] = md.Annotations
		}
		body["spec"] = map[string]any{"podTemplate": map[string]any{"metadata": podMeta}}
	}
	return body
}

// coldStart creates the claim's own Sandbox from the template, applying the claim's env,
// volume claim templates and pod metadata as the template's policies allow. A rejection is
// reported in the claim's Ready condition and is not an error: nothing changes until the
// claim or the template does.
func (r *ClaimReconciler) coldStart(ctx context.Context, s *claimStep, tmpl *extv1beta1.SandboxTemplate, stamp string) error {
	claim := s.claim
	tmpl, err := r.templateOfVersion(ctx, claim, tmpl, stamp)
	if err != nil {
		return err
	}
	sb := sandboxFromTemplate(tmpl)
	sb.Name, sb.Namespace = claim.Name, claim.Namespace
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	sb.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeCold
	// The version the Sandbox is built from, which is the claim's stamp (templateOfVersion).
	sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] = agentsv1beta1.BlueprintHash(&tmpl.Spec.SandboxBlueprint)
	if cb := createdBy(claim); cb != "" {
		sb.Labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	sb.OwnerReferences = []metav1.OwnerReference{claimRef(claim)}
	if msg := injectEnv(claim, tmpl, &sb.Spec.PodTemplate.Spec); msg != "" {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonEnvVarsInjectionRejected, msg)
		return nil
	}
	if msg := injectVolumeClaimTemplates(claim, tmpl, &sb.Spec.SandboxBlueprint); msg != "" {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonVolumeClaimTemplatesError, msg)
		return nil
	}
	addPodMetadata(&sb.Spec.PodTemplate.ObjectMeta, claim.Spec.AdditionalPodMetadata)

	if err := r.Client.Create(ctx, sb); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating sandbox: %w", err)
		}
		// Ours from an earlier attempt the cache does not show yet, or someone else's.
		existing := &agentsv1beta1.Sandbox{}
		if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sb), existing); gerr != nil {
			return fmt.Errorf("reading existing sandbox: %w", gerr)
		}
		if controllerUID(existing) != claim.UID {
			return fmt.Errorf("sandbox %s exists and is not bound to this claim", sb.Name)
		}
		sb = existing
	} else {
		r.Metrics.coldStart()
		ctrl.LoggerFrom(ctx).V(1).Info("cold-started sandbox", "sandbox", klog.KObj(sb))
		r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventSandboxProvisioned, "Provision", "Created sandbox %s from template %s", sb.Name, tmpl.Name)
	}
	s.mem.bound, s.mem.launchType, s.mem.template = sb.Name, agentsv1beta1.LaunchTypeCold, tmpl.Name
	r.mirror(claim, sb)
	return nil
}

// templateOfVersion returns the template to cold-start claim from, so that the Sandbox is
// built from exactly the version the claim is stamped with. The cached template may lag the
// API server (the claim was stamped from a newer version): then the API server's copy is
// used. The template may also have moved on since the claim was admitted, with no warm member
// of the claim's version left to bind: old versions are not kept, so the claim is restamped
// with the current version (only the operator may) before its Sandbox exists, and the stamp
// and the Sandbox's hash never disagree.
func (r *ClaimReconciler) templateOfVersion(ctx context.Context, claim *extv1beta1.SandboxClaim, cached *extv1beta1.SandboxTemplate, stamp string) (*extv1beta1.SandboxTemplate, error) {
	if agentsv1beta1.BlueprintHash(&cached.Spec.SandboxBlueprint) == stamp {
		return cached, nil
	}
	current := &extv1beta1.SandboxTemplate{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), current); err != nil {
		return nil, fmt.Errorf("reading template: %w", err)
	}
	hash := agentsv1beta1.BlueprintHash(&current.Spec.SandboxBlueprint)
	if hash == stamp {
		return current, nil
	}
	p := &metadataPatch{}
	p.setAnnotation(agentsv1beta1.AnnotationSandboxTemplateHash, &hash)
	if err := patchMetadata(ctx, r.Client, claim, p); err != nil {
		return nil, fmt.Errorf("restamping claim: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("restamped claim: its template version is gone and no warm sandbox of it is left",
		"oldTemplateHash", stamp, "templateHash", hash)
	return current, nil
}

// injectEnv adds the claim's env to the containers under the template's policy, or says why
// it may not.
func injectEnv(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate, spec *corev1.PodSpec) string {
	if len(claim.Spec.Env) == 0 {
		return ""
	}
	policy := tmpl.Spec.EnvVarsInjectionPolicy
	if policy == "" || policy == extv1beta1.EnvVarsInjectionDisallowed {
		return fmt.Sprintf("template %s does not allow environment variable injection (envVarsInjectionPolicy %s)", tmpl.Name, extv1beta1.EnvVarsInjectionDisallowed)
	}
	for _, v := range claim.Spec.Env {
		if v.ContainerName != "" && !slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == v.ContainerName }) {
			return fmt.Sprintf("env %s: container %q not found in template %s", v.Name, v.ContainerName, tmpl.Name)
		}
		for i := range spec.Containers {
			c := &spec.Containers[i]
			if v.ContainerName != "" && c.Name != v.ContainerName {
				continue
			}
			at := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v.Name })
			switch {
			case at < 0:
				c.Env = append(c.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
			case policy == extv1beta1.EnvVarsInjectionOverrides:
				c.Env[at] = corev1.EnvVar{Name: v.Name, Value: v.Value}
			default:
				return fmt.Sprintf("env %s: container %s of template %s sets it and envVarsInjectionPolicy %s does not allow overriding it", v.Name, c.Name, tmpl.Name, policy)
			}
		}
	}
	return ""
}

// injectVolumeClaimTemplates adds the claim's volume claim templates under the template's
// policy, or says why it may not.
func injectVolumeClaimTemplates(claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate, bp *agentsv1beta1.SandboxBlueprint) string {
	if len(claim.Spec.VolumeClaimTemplates) == 0 {
		return ""
	}
	policy := tmpl.Spec.VolumeClaimTemplatesPolicy
	if policy == "" || policy == extv1beta1.VolumeClaimTemplatesDisallowed {
		return fmt.Sprintf("template %s does not allow volume claim templates (volumeClaimTemplatesPolicy %s)", tmpl.Name, extv1beta1.VolumeClaimTemplatesDisallowed)
	}
	for _, vct := range claim.Spec.VolumeClaimTemplates {
		at := slices.IndexFunc(bp.VolumeClaimTemplates, func(t agentsv1beta1.PersistentVolumeClaimTemplate) bool { return t.Name == vct.Name })
		switch {
		case at < 0:
			bp.VolumeClaimTemplates = append(bp.VolumeClaimTemplates, *vct.DeepCopy())
		case policy == extv1beta1.VolumeClaimTemplatesOverrides:
			bp.VolumeClaimTemplates[at] = *vct.DeepCopy()
		default:
			return fmt.Sprintf("volume claim template %s: template %s defines it and volumeClaimTemplatesPolicy %s does not allow replacing it", vct.Name, tmpl.Name, policy)
		}
	}
	return ""
}

// addPodMetadata merges the claim's additional pod metadata into a pod template's.
func addPodMetadata(dst *agentsv1beta1.PodMetadata, add agentsv1beta1.PodMetadata) {
	for k, v := range add.Labels {
		if dst.Labels == nil {
			dst.Labels = map[string]string{}
		}
		dst.Labels[k] = v
	}
	for k, v := range add.Annotations {
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[k] = v
	}
}

// claimSandboxHandler feeds the WarmIndex from the Sandbox informer, in event order, and
// wakes claims: the claim bound to a Sandbox whose readiness, IPs or existence changed, and
// the longest-waiting claim when a member becomes available.
type claimSandboxHandler struct {
	index *WarmIndex
}

func claimOf(obj client.Object) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != claimKind || ref.APIVersion != extv1beta1.GroupVersion.String() {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

func (h *claimSandboxHandler) observe(sb *agentsv1beta1.Sandbox, q queue) {
	if waiter, ok := h.index.Observe(sb); ok {
		q.Add(reconcile.Request{NamespacedName: waiter})
	}
}

func (h *claimSandboxHandler) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	sb, ok := e.Object.(*agentsv1beta1.Sandbox)
	if !ok {
		return
	}
	h.observe(sb, q)
	if claim, ok := claimOf(sb); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

func (h *claimSandboxHandler) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	old, okOld := e.ObjectOld.(*agentsv1beta1.Sandbox)
	cur, okCur := e.ObjectNew.(*agentsv1beta1.Sandbox)
	if !okOld || !okCur {
		return
	}
	h.observe(cur, q)
	if claimView(old) == claimView(cur) {
		return
	}
	for _, obj := range []client.Object{old, cur} {
		if claim, ok := claimOf(obj); ok {
			q.Add(reconcile.Request{NamespacedName: claim})
		}
	}
}

func (h *claimSandboxHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	h.index.Forget(e.Object.GetNamespace(), e.Object.GetName())
	if claim, ok := claimOf(e.Object); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

func (h *claimSandboxHandler) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q queue) {
	if claim, ok := claimOf(e.Object); ok {
		q.Add(reconcile.Request{NamespacedName: claim})
	}
}

// claimView is what a claim reports of its Sandbox; a Sandbox update that leaves it the
// same does not wake the claim.
func claimView(sb *agentsv1beta1.Sandbox) string {
	view := fmt.Sprint(controllerUID(sb), sb.DeletionTimestamp.IsZero(), sb.Status.PodIPs)
	for _, typ := range []string{agentsv1beta1.ConditionReady, agentsv1beta1.ConditionFinished} {
		if c := meta.FindStatusCondition(sb.Status.Conditions, typ); c != nil {
			view += fmt.Sprint("|", c.Status, c.Reason, c.Message, c.LastTransitionTime.Unix())
		}
	}
	return view
}
