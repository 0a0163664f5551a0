package reconcilers

// The binding protocol, in one place. A claim is bound to a Sandbox when the Sandbox's
// controller reference points at the claim and its claim-uid label holds the claim's UID;
// the Sandbox is the only record of that, and it is written in one request:
//
//  1. Pick: take a ready, unbound member of (namespace, pool, claim's stamp) from the
//     warmIndex and reserve it in memory, so that concurrent claims of this process do not
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
// the indexes.SandboxClaimUID index and writes the status then. The pool sees its member leave
// (controller reference gone) through its own Sandbox watch and refills, off this path; the
// Sandbox controller moves the new labels to the pod, off this path too.
//
// Cold start (no member, or env / volumeClaimTemplates on the claim): one create of a
// Sandbox named after the claim, controller-owned by it from the start, so it is bound the
// moment it exists.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
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
func (r *claimReconciler) bindWarm(ctx context.Context, s *claimStep, pool *extv1beta1.SandboxWarmPool, key memberKey, template string) (*agentsv1beta1.Sandbox, error) {
	for {
		member, ok := r.Index.Pick(key)
		if !ok {
			return nil, nil
		}
		if !policy.IsControlledBy(member, policy.PoolKind, pool.UID) {
			// A member of an earlier pool of the same name, which the garbage collector is
			// about to delete: never this pool's to hand out.
			r.Index.Release(member, releaseRejected)
			continue
		}
		if policy.SandboxHash(member) != key.Hash {
			// Its labels say the claim's version, its blueprint is another (someone with the
			// platform's rights edited it): the guard would refuse it to every claim, so the
			// pool must not keep it as ready. It goes, and the pool replaces it.
			r.Index.Release(member, releaseRejected)
			r.retireMember(ctx, member)
			continue
		}
		bound := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: member.Namespace, Name: member.Name}}
		start := r.Clock.Now()
		err := mergePatch(ctx, r.Client, bound, bindPatch(s.claim, member))
		lost := ""
		switch {
		case err == nil:
			r.Metrics.claimPhase(PhaseBind, r.Clock.Since(start))
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
		r.expected.expect(client.ObjectKeyFromObject(s.claim), bindItem(bound.Name))
		s.mem.launchType, s.mem.template = agentsv1beta1.LaunchTypeWarm, template
		r.Metrics.warmHit()
		ctrl.LoggerFrom(ctx).V(1).Info("bound warm sandbox", "sandbox", klog.KObj(bound))
		// The SandboxAdopted event is bookkeeping too: it is sent with the sandbox-name
		// annotation, once claims pause (recordSandboxName), not on the claim's path.
		s.mem.adopted = bound.Name
		return bound, nil
	}
}

// retireMember deletes a pool member that cannot be handed out, on condition that it is still
// what the cache showed (a member bound or changed meanwhile is left alone). A failure only
// leaves it to the next claim's check.
func (r *claimReconciler) retireMember(ctx context.Context, member *agentsv1beta1.Sandbox) {
	uid, rv := member.UID, member.ResourceVersion
	err := r.Client.Delete(ctx, member, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	ctrl.LoggerFrom(ctx).Info("retired a pool member whose blueprint is not the version its labels say",
		"sandbox", klog.KObj(member), "labelledHash", member.Labels[agentsv1beta1.LabelSandboxTemplateHash],
		"blueprintHash", policy.SandboxHash(member), "error", client.IgnoreNotFound(err))
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

// coldStart creates the claim's own Sandbox from the template: policy.ClaimBlueprint of the
// template at the claim's version. A rejection by the template's policies is reported in the
// claim's Ready condition and is not an error: nothing changes until the claim or the template
// does. The Sandbox is named after the claim; when that name is taken by a Sandbox this claim
// does not control (someone else's, whatever its owner references say), it is never adopted:
// the claim gets a Sandbox under a generated name instead, and an event says why.
func (r *claimReconciler) coldStart(ctx context.Context, s *claimStep, tmpl *extv1beta1.SandboxTemplate, stamp string) error {
	claim := s.claim
	tmpl, err := r.templateOfVersion(ctx, s, tmpl, stamp)
	if err != nil || tmpl == nil {
		return err
	}
	bp, errs := policy.ClaimBlueprint(tmpl, claim)
	if len(errs) > 0 {
		reason, msg := claimRejection(errs)
		r.setReady(claim, metav1.ConditionFalse, reason, msg)
		return nil
	}
	sb := sandboxFromTemplate(tmpl, bp)
	sb.Name, sb.Namespace = claim.Name, claim.Namespace
	sb.Labels[agentsv1beta1.LabelClaimUID] = string(claim.UID)
	sb.Labels[agentsv1beta1.LabelLaunchType] = agentsv1beta1.LaunchTypeCold
	// The version the Sandbox is built from, which is the claim's stamp (templateOfVersion).
	sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] = policy.TemplateHash(tmpl)
	if cb := createdBy(claim); cb != "" {
		sb.Labels[agentsv1beta1.LabelCreatedBy] = cb
	}
	sb.OwnerReferences = []metav1.OwnerReference{claimRef(claim)}

	sb, err = r.createClaimSandbox(ctx, s, sb)
	if err != nil {
		return err
	}
	if sb.UID == "" {
		return nil // not created; the claim is not served yet
	}
	r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventSandboxProvisioned, "Provision", "Created sandbox %s from template %s", sb.Name, tmpl.Name)
	r.expected.expect(client.ObjectKeyFromObject(claim), createItem(sandboxKind, sb.Name))
	s.mem.launchType, s.mem.template = agentsv1beta1.LaunchTypeCold, tmpl.Name
	r.mirror(claim, sb)
	return nil
}

// createClaimSandbox creates sb, named after the claim, and returns it as created or as an
// earlier attempt of this claim created it. When the name belongs to a Sandbox the claim does
// not control, sb is created under a generated name instead.
func (r *claimReconciler) createClaimSandbox(ctx context.Context, s *claimStep, sb *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	claim := s.claim
	if s.mem.nameTaken {
		sb.Name, sb.GenerateName = "", claim.Name+"-"
	}
	if sb.Name != "" {
		sb.Annotations[agentsv1beta1.AnnotationPodName] = sb.Name // its pod's, recorded without a write of its own
	} else {
		delete(sb.Annotations, agentsv1beta1.AnnotationPodName)
	}
	err := r.Client.Create(ctx, sb)
	if err == nil {
		r.Metrics.coldStart()
		ctrl.LoggerFrom(ctx).V(1).Info("cold-started sandbox", "sandbox", klog.KObj(sb))
		return sb, nil
	}
	if !apierrors.IsAlreadyExists(err) || sb.Name == "" {
		return nil, fmt.Errorf("creating sandbox: %w", err)
	}
	// Ours from an earlier attempt the cache does not show yet, or someone else's.
	existing := &agentsv1beta1.Sandbox{}
	if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(sb), existing); gerr != nil {
		return nil, fmt.Errorf("reading existing sandbox: %w", gerr)
	}
	if policy.IsControlledBy(existing, policy.ClaimKind, claim.UID) {
		return existing, nil
	}
	s.mem.nameTaken = true
	ctrl.LoggerFrom(ctx).Info("the claim's sandbox name is taken by a sandbox it does not control; using a generated name", "sandbox", klog.KObj(existing))
	r.eventf(s, corev1.EventTypeWarning, extv1beta1.EventSandboxNameTaken, "Provision",
		"Sandbox %s exists and is not this claim's: the claim's Sandbox gets a generated name", existing.Name)
	return r.createClaimSandbox(ctx, s, sb)
}

// claimRejection is the Ready reason and message of a claim its template cannot serve: the
// reason of the first problem's field (env, volumeClaimTemplates, additionalPodMetadata) and
// every problem in the message.
func claimRejection(errs field.ErrorList) (reason, message string) {
	reason = extv1beta1.ReasonInvalidMetadata
	switch first := errs[0].Field; {
	case strings.HasPrefix(first, "spec.env"):
		reason = extv1beta1.ReasonEnvVarsInjectionRejected
	case strings.HasPrefix(first, "spec.volumeClaimTemplates"):
		reason = extv1beta1.ReasonVolumeClaimTemplatesError
	}
	return reason, errs.ToAggregate().Error()
}

// templateOfVersion returns the template to cold-start claim from, so that the Sandbox is
// built from exactly the version the claim is stamped with. The cached template may lag the
// API server (the claim was stamped from a newer version): then the API server's copy is
// used. The template may also have moved on since the claim was admitted, with no warm member
// of the claim's version left to bind: old versions are not kept, so the claim is restamped
// with the current version (only the operator may) before its Sandbox exists, and the stamp
// and the Sandbox's hash never disagree. A restamp is visible: a ClaimRestamped Warning event
// and Ready=False with reason Restamped until the claim is served. With RefuseRestamp the
// claim is not restamped but reported StampedVersionGone, and nil is returned.
func (r *claimReconciler) templateOfVersion(ctx context.Context, s *claimStep, cached *extv1beta1.SandboxTemplate, stamp string) (*extv1beta1.SandboxTemplate, error) {
	claim := s.claim
	if policy.TemplateHash(cached) == stamp {
		return cached, nil
	}
	current := &extv1beta1.SandboxTemplate{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), current); err != nil {
		return nil, fmt.Errorf("reading template: %w", err)
	}
	hash := policy.TemplateHash(current)
	if hash == stamp {
		return current, nil
	}
	if r.RefuseRestamp {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonStampedVersionGone, fmt.Sprintf(
			"template %s no longer builds version %s the claim was stamped with (it is at %s) and restamping is off (--restamp=false)",
			current.Name, stamp, hash))
		return nil, nil
	}
	if err := r.annotateClaim(ctx, claim, agentsv1beta1.AnnotationSandboxTemplateHash, hash); err != nil {
		return nil, fmt.Errorf("restamping claim: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("restamped claim: its template version is gone and no warm sandbox of it is left",
		"oldTemplateHash", stamp, "templateHash", hash)
	msg := fmt.Sprintf("template %s no longer builds version %s the claim was stamped with; restamped to %s", current.Name, stamp, hash)
	r.eventf(s, corev1.EventTypeWarning, extv1beta1.EventClaimRestamped, "Restamp", "%s", msg)
	r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonRestamped, msg)
	return current, nil
}

// claimSandboxHandler feeds the warmIndex from the Sandbox informer, in event order, and
// wakes claims: the claim bound to a Sandbox whose readiness, IPs or existence changed, and
// the longest-waiting claim when a member becomes available.
type claimSandboxHandler struct {
	index *warmIndex
}

func claimOf(obj client.Object) (types.NamespacedName, bool) {
	ref := policy.ControllerOf(obj, policy.ClaimKind)
	if ref == nil {
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
