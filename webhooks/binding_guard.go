package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

var (
	sandboxGK = policy.SandboxKind
	sandboxGR = agentsv1beta1.GroupVersion.WithResource("sandboxes").GroupResource()
)

// BindingGuard validates Sandboxes and is the binding guard: the one place that decides
// whether a Sandbox may become a claim's, and whether it may be a pool's.
//
// What it guarantees, whatever any controller's cache says and whoever asks:
//
//   - Binding. Only the operator binds (controller reference to a SandboxClaim, or the
//     claim-uid label), only to an existing claim that is bound to no other Sandbox, never a
//     Sandbox bound before, and only a Sandbox that IS what the claim was stamped for: the
//     guard hashes the Sandbox's own blueprint (policy.SandboxHash), it does not read a label.
//     A warm binding takes an unused member of the claim's own pool (controller reference with
//     the pool's UID) whose blueprint hashes to the stamp, and changes nothing of its spec but
//     the claim's pod metadata. A cold start creates a Sandbox whose blueprint is exactly
//     policy.ClaimBlueprint of the claim's template at the stamped version.
//   - Pool membership. Only the operator creates a Sandbox owned by a SandboxWarmPool, adds
//     such an owner, sets or changes the warm-pool and template-hash labels, or changes the
//     spec of a pool member. Anyone may take a pool's owner reference off (the garbage
//     collector orphaning members does): a Sandbox that leaves a pool never comes back.
//   - Unbinding: only the operator, or the platform and the Kubernetes controllers once the
//     claim is gone or going.
type BindingGuard struct {
	// Cache reads claims, pools, templates and Sandboxes first (the manager's cached client);
	// nil reads everything from the API server.
	Cache client.Reader
	// APIReader reads from the API server when the cache does not have an object, or has a
	// version that does not match what the request says.
	APIReader client.Reader
	// OperatorUser is the operator's user name, the only one allowed to bind.
	OperatorUser string
	// Authority decides who may act on a bound Sandbox (its claim's creator, the operator,
	// the platform) and who may write the operator's metadata.
	Authority Authority
	// Authorizer creates SubjectAccessReviews: a Sandbox someone creates or rebuilds runs a
	// pod, so they must be allowed to create pods themselves. nil skips the check (unit tests).
	Authorizer client.Client
	// Tracer traces the admission of writes that bind; nil is tracing off.
	Tracer *tracing.Tracer
}

var _ admission.Validator[*agentsv1beta1.Sandbox] = &BindingGuard{}

// ValidateCreate validates a new Sandbox. One created bound to a claim is the operator's cold
// start and must be exactly what the claim is owed; one created in a pool must be the
// operator's.
func (w *BindingGuard) ValidateCreate(ctx context.Context, sb *agentsv1beta1.Sandbox) (_ admission.Warnings, err error) {
	ctx, span := startBindAdmission(ctx, w.Tracer, &agentsv1beta1.Sandbox{}, sb)
	defer func() { tracing.End(span, err) }()
	operator := isOperator(ctx, w.OperatorUser)
	if err := w.guardBinding(ctx, &agentsv1beta1.Sandbox{}, sb, operator); err != nil {
		return nil, err
	}
	if err := w.guardMembership(ctx, &agentsv1beta1.Sandbox{}, sb, operator); err != nil {
		return nil, err
	}
	if err := w.guardMetadata(ctx, &agentsv1beta1.Sandbox{}, sb); err != nil {
		return nil, err
	}
	if err := invalid(sandboxGK, sb.Name, w.validate(sb, operator)); err != nil {
		return nil, err
	}
	return nil, w.guardPodRights(ctx, sb)
}

// ValidateUpdate runs the binding and membership guards, then the validation of what the
// update introduces.
func (w *BindingGuard) ValidateUpdate(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox) (_ admission.Warnings, err error) {
	ctx, span := startBindAdmission(ctx, w.Tracer, oldSB, newSB)
	defer func() { tracing.End(span, err) }()
	operator := isOperator(ctx, w.OperatorUser)
	if err := w.guardBinding(ctx, oldSB, newSB, operator); err != nil {
		return nil, err
	}
	if err := w.guardMembership(ctx, oldSB, newSB, operator); err != nil {
		return nil, err
	}
	if err := w.guardMetadata(ctx, oldSB, newSB); err != nil {
		return nil, err
	}
	specChanged := !equality.Semantic.DeepEqual(oldSB.Spec, newSB.Spec)
	if specChanged {
		if err := w.guardOwner(ctx, oldSB, "change"); err != nil {
			return nil, err
		}
	}
	if err := invalid(sandboxGK, newSB.Name, RatchetUpdate(w.validate(newSB, operator), w.validate(oldSB, operator))); err != nil {
		return nil, err
	}
	if !equality.Semantic.DeepEqual(oldSB.Spec.SandboxBlueprint, newSB.Spec.SandboxBlueprint) {
		return nil, w.guardPodRights(ctx, newSB)
	}
	return nil, nil
}

// ValidateDelete admits the deletion of a Sandbox bound to a claim by the claim's creator, the
// operator, the platform and the Kubernetes controllers only; every other deletion is RBAC's.
func (w *BindingGuard) ValidateDelete(ctx context.Context, sb *agentsv1beta1.Sandbox) (admission.Warnings, error) {
	return nil, w.guardOwner(ctx, sb, "delete")
}

// guardMetadata keeps the reserved keys of a Sandbox's metadata (agents.x-k8s.io,
// extensions.agents.x-k8s.io, sandgate.dev and their subdomains) the operator's: they say
// which claim, pool and template a Sandbox belongs to and how it was launched, and the pod's
// selectable labels follow them. The platform may write them too (a restore from backup);
// nobody else may set, change or remove one. Two writes of them are a user's own: the pod-name
// annotation on a Sandbox they create (the defaulter sets it), and the v1alpha1 fields the
// conversion keeps in conversion.sandgate.dev annotations when the request is a v1alpha1
// client's.
func (w *BindingGuard) guardMetadata(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox) error {
	u := userInfo(ctx)
	if w.authority().trusted(u) {
		return nil
	}
	asV1alpha1 := false
	if req, err := admission.RequestFromContext(ctx); err == nil && req.RequestKind != nil {
		asV1alpha1 = req.RequestKind.Version == "v1alpha1"
	}
	creating := oldSB.UID == ""
	for _, part := range []struct {
		what         string
		old, new     map[string]string
		userWritable func(string) bool
	}{
		{"label", oldSB.Labels, newSB.Labels, func(string) bool { return false }},
		{"annotation", oldSB.Annotations, newSB.Annotations, func(k string) bool {
			return (creating && k == agentsv1beta1.AnnotationPodName) || (asV1alpha1 && strings.HasPrefix(k, conversionDomain))
		}},
	} {
		for _, k := range changedKeys(part.old, part.new) {
			if agentsv1beta1.IsReservedKey(k) && !part.userWritable(k) {
				return apierrors.NewForbidden(sandboxGR, newSB.Name, fmt.Errorf(
					"the %s %s of a Sandbox is the operator's: only the operator (%s) or the platform may set, change or remove it, not %s",
					part.what, k, w.OperatorUser, orUnknown(u.Username)))
			}
		}
	}
	return nil
}

// conversionDomain prefixes the annotations in which the conversion keeps v1alpha1's fields.
const conversionDomain = "conversion.sandgate.dev/"

// changedKeys lists the keys set, changed or removed between two maps, sorted.
func changedKeys(old, new map[string]string) []string {
	var out []string
	for k, v := range new {
		if ov, ok := old[k]; !ok || ov != v {
			out = append(out, k)
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// guardOwner admits a change of the spec, or the deletion (verb), of a Sandbox bound to a claim
// only from the claim's creator, the operator, the platform and the Kubernetes controllers:
// another tenant of the namespace cannot suspend a victim's Sandbox, change its image and resume
// it under the victim's Ready claim.
func (w *BindingGuard) guardOwner(ctx context.Context, sb *agentsv1beta1.Sandbox, verb string) error {
	u := userInfo(ctx)
	ref, _ := ClaimBindingOf(sb)
	if ref == nil || w.authority().trusted(u) {
		return nil
	}
	c, err := w.claim(ctx, sb.Namespace, ref.Name, ref.UID, nil)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("looking up claim %s/%s: %w", sb.Namespace, ref.Name, err))
	}
	if c == nil || w.authority().mayActFor(u, creatorOf(c.Annotations)) {
		return nil
	}
	return apierrors.NewForbidden(sandboxGR, sb.Name, fmt.Errorf("the Sandbox is claim %s's, which belongs to %s; %s may not %s it",
		c.Name, creatorOf(c.Annotations), orUnknown(u.Username), verb))
}

// guardPodRights admits a Sandbox that a user (not the operator, not the platform) creates or
// whose blueprint they change only if they may create pods in its namespace: the operator runs
// the pod for them, with whatever service account, secrets and volumes the blueprint names, and
// must never be a way around pod RBAC.
func (w *BindingGuard) guardPodRights(ctx context.Context, sb *agentsv1beta1.Sandbox) error {
	u := userInfo(ctx)
	if w.Authorizer == nil || w.authority().trusted(u) {
		return nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: sb.Namespace, Verb: "create", Resource: "pods"},
	}}
	if err := w.Authorizer.Create(ctx, sar); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("asking whether %s may create pods: %w", u.Username, err))
	}
	if !sar.Status.Allowed {
		return apierrors.NewForbidden(sandboxGR, sb.Name, fmt.Errorf(
			"a Sandbox runs a pod of its blueprint; %s may not create pods in namespace %s, so may not create or rebuild a Sandbox either (claim one from a pool instead)",
			orUnknown(u.Username), sb.Namespace))
	}
	return nil
}

// validate applies ValidateSandbox. The operator copies podTemplates of templates verbatim, and
// a template created before sandgate's admission ran may hold reserved keys: the Sandbox
// controller leaves those keys off the pod (policy.PodMetadataFromTemplate), so the
// operator's writes are not refused for them.
func (w *BindingGuard) validate(sb *agentsv1beta1.Sandbox, operator bool) field.ErrorList {
	errs := ValidateSandbox(sb)
	if !operator {
		return errs
	}
	kept := errs[:0]
	for _, e := range errs {
		if e.Type != field.ErrorTypeForbidden {
			kept = append(kept, e)
		}
	}
	return kept
}

// ClaimBindingOf returns what binds a Sandbox to a claim: its controller ownerReference when
// that is a SandboxClaim, and the claim-uid label.
func ClaimBindingOf(sb *agentsv1beta1.Sandbox) (*metav1.OwnerReference, types.UID) {
	return policy.ControllerOf(sb, policy.ClaimKind), types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
}

// guardMembership keeps pool membership the operator's: see BindingGuard.
func (w *BindingGuard) guardMembership(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox, operator bool) error {
	if operator {
		return nil
	}
	deny := func(format string, args ...any) error {
		return apierrors.NewForbidden(sandboxGR, newSB.Name, fmt.Errorf("only the operator (%s) may %s, not %s",
			w.OperatorUser, fmt.Sprintf(format, args...), requester(ctx)))
	}
	for i := range newSB.OwnerReferences {
		if ref := &newSB.OwnerReferences[i]; policy.RefersTo(ref, policy.PoolKind) && !hasOwner(oldSB, ref.UID) {
			return deny("make a Sandbox a member of a SandboxWarmPool (owner reference to %s)", ref.Name)
		}
	}
	for _, key := range []string{agentsv1beta1.LabelWarmPoolSandbox, agentsv1beta1.LabelSandboxTemplateHash} {
		nv, nok := newSB.Labels[key]
		ov, ook := oldSB.Labels[key]
		if nok != ook || nv != ov {
			return deny("set, change or remove the label %s", key)
		}
	}
	if pool := policy.ControllerOf(oldSB, policy.PoolKind); pool != nil {
		if !equality.Semantic.DeepEqual(oldSB.Spec, newSB.Spec) {
			return deny("change the spec of a member of SandboxWarmPool %s: claims are served from it as it was built", pool.Name)
		}
		// The annotation names the pod the Sandbox runs (and would adopt, were it unowned).
		if oldSB.Annotations[agentsv1beta1.AnnotationPodName] != newSB.Annotations[agentsv1beta1.AnnotationPodName] {
			return deny("change the annotation %s of a member of SandboxWarmPool %s", agentsv1beta1.AnnotationPodName, pool.Name)
		}
	}
	return nil
}

func hasOwner(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// guardBinding admits a change of a Sandbox's binding only as BindingGuard says.
func (w *BindingGuard) guardBinding(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox, operator bool) error {
	oldRef, oldUID := ClaimBindingOf(oldSB)
	newRef, newUID := ClaimBindingOf(newSB)
	if sameRef(oldRef, newRef) && oldUID == newUID {
		return nil // the binding does not change: not the guard's business
	}
	claim := claimName(newRef, newUID)
	if (newRef == nil || sameRef(oldRef, newRef)) && (newUID == "" || newUID == oldUID) {
		return w.guardUnbinding(ctx, oldRef, oldUID, newSB, operator)
	}

	var stamp string
	var lookupErr error
	var found *extv1beta1.SandboxClaim
	if newRef != nil {
		// The operator stamps (or restamps) a claim right before it creates the claim's
		// Sandbox, so the cache may not show the stamp yet: for the operator's requests (no
		// one else's can be admitted), a cached stamp other than the version the Sandbox is
		// labelled with is read again from the API server before anything is decided. The
		// label only chooses where to read; the checks below compare the stamp with what the
		// Sandbox is really built from.
		version := newSB.Labels[agentsv1beta1.LabelSandboxTemplateHash]
		found, lookupErr = w.claim(ctx, newSB.Namespace, newRef.Name, newRef.UID, func(c *extv1beta1.SandboxClaim) bool {
			return !operator || c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] == version
		})
		if found != nil {
			stamp = found.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
		}
	}

	switch {
	case !operator:
		return w.deny(newSB, claim, stamp, "only the operator (%s) may bind a Sandbox to a claim, not %s", w.OperatorUser, requester(ctx))
	case bound(oldRef, oldUID) != "" && bound(oldRef, oldUID) != bound(newRef, newUID):
		return w.deny(newSB, claim, stamp, "it is already bound to claim %s", claimName(oldRef, oldUID))
	case oldSB.Labels[agentsv1beta1.LabelClaimUID] != "" || oldSB.Labels[agentsv1beta1.LabelLaunchType] != "":
		return w.deny(newSB, claim, stamp, "it was bound to a claim before, and a used Sandbox is never handed out again")
	case newRef == nil:
		return w.deny(newSB, claim, stamp, "a binding sets the claim-uid label together with a controller ownerReference to the claim")
	case newUID != "" && newUID != newRef.UID:
		return w.deny(newSB, claim, stamp, "the claim-uid label %s and the controller ownerReference (uid %s) name different claims", newUID, newRef.UID)
	case lookupErr != nil:
		return apierrors.NewInternalError(fmt.Errorf("looking up claim %s/%s: %w", newSB.Namespace, newRef.Name, lookupErr))
	case found == nil:
		return w.deny(newSB, claim, stamp, "the claim does not exist")
	case stamp == "":
		return w.deny(newSB, claim, stamp, "the claim has no template-hash stamp yet")
	}
	if err := w.claimUnbound(ctx, newSB, found); err != nil {
		return err
	}
	var err error
	if oldSB.UID == "" {
		err = w.guardColdStart(ctx, newSB, found)
	} else {
		err = w.guardWarmBinding(ctx, oldSB, newSB, found)
	}
	if err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("binding admitted", "claim", claim, "templateHash", stamp)
	return nil
}

// claimUnbound refuses a second Sandbox for a claim: one its status reports, or one the cache
// shows bound to it. (The claim controller never asks for a second; the check keeps a bug or a
// second operator instance from making one.)
func (w *BindingGuard) claimUnbound(ctx context.Context, sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) error {
	if other := claim.Status.Sandbox.Name; other != "" && other != sb.Name {
		return w.denyFor(sb, claim, "the claim is bound to Sandbox %s already", other)
	}
	others, err := w.sandboxesOfClaim(ctx, sb.Namespace, claim.UID)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("listing the Sandboxes of claim %s: %w", claim.Name, err))
	}
	for i := range others {
		if other := &others[i]; other.Name != sb.Name && other.DeletionTimestamp.IsZero() &&
			policy.IsControlledBy(other, policy.ClaimKind, claim.UID) {
			return w.denyFor(sb, claim, "the claim is bound to Sandbox %s already", other.Name)
		}
	}
	return nil
}

// sandboxesOfClaim lists the Sandboxes of namespace ns labelled with claim uid: through the
// cache's indexes.SandboxClaimUID index (a lookup, not a scan of the namespace on every
// binding), and by label from the API server when the cache cannot answer (a namespace it does
// not cover, a cache without the index).
func (w *BindingGuard) sandboxesOfClaim(ctx context.Context, ns string, uid types.UID) ([]agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	if w.Cache != nil {
		if err := w.Cache.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexes.SandboxClaimUID: string(uid)}); err == nil {
			return list.Items, nil
		}
	}
	if err := w.APIReader.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.LabelClaimUID: string(uid)}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// guardWarmBinding admits the binding of a pool member: an unused member of the claim's own
// pool, built from the stamped template version, whose spec the binding changes only by the
// claim's pod metadata.
func (w *BindingGuard) guardWarmBinding(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) error {
	stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
	poolName := claim.Spec.WarmPoolRef.Name
	ref := policy.ControllerOf(oldSB, policy.PoolKind)
	if ref == nil || ref.Name != poolName {
		return w.denyFor(newSB, claim, "only an unused member of the claim's pool %s can be bound to it", poolName)
	}
	pool := &extv1beta1.SandboxWarmPool{}
	if err := w.read(ctx, types.NamespacedName{Namespace: newSB.Namespace, Name: poolName}, pool,
		func() bool { return pool.UID == ref.UID }); err != nil {
		if apierrors.IsNotFound(err) {
			return w.denyFor(newSB, claim, "the claim's pool %s does not exist", poolName)
		}
		return apierrors.NewInternalError(fmt.Errorf("reading pool %s: %w", poolName, err))
	}
	if pool.UID != ref.UID {
		return w.denyFor(newSB, claim, "it belongs to an earlier pool named %s (uid %s), not to the claim's (uid %s)", poolName, ref.UID, pool.UID)
	}
	if len(claim.Spec.Env) > 0 || len(claim.Spec.VolumeClaimTemplates) > 0 {
		return w.denyFor(newSB, claim, "a claim with env or volumeClaimTemplates gets a Sandbox of its own (a cold start), not a pool member")
	}
	if got := policy.SandboxHash(oldSB); got != stamp {
		return w.denyFor(newSB, claim, "the Sandbox's blueprint hashes to %s: it was not built from the template version the claim was stamped with", got)
	}
	want := oldSB.Spec.DeepCopy()
	if errs := policy.WithPodMetadata(&want.SandboxBlueprint, claim.Spec.AdditionalPodMetadata, pool.Spec.SandboxTemplateRef.Name,
		field.NewPath("spec", "additionalPodMetadata")); len(errs) > 0 {
		return w.denyFor(newSB, claim, "the claim's pod metadata does not fit the member: %v", errs.ToAggregate())
	}
	if !equality.Semantic.DeepEqual(*want, newSB.Spec) {
		return w.denyFor(newSB, claim, "the binding changes the Sandbox's spec beyond adding the claim's pod metadata")
	}
	return nil
}

// guardColdStart admits a Sandbox created bound to a claim when it is exactly what the claim
// is owed: policy.ClaimBlueprint of its pool's template, at the version of the claim's stamp.
func (w *BindingGuard) guardColdStart(ctx context.Context, sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim) error {
	stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
	poolName := claim.Spec.WarmPoolRef.Name
	pool := &extv1beta1.SandboxWarmPool{}
	if err := w.read(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: poolName}, pool, nil); err != nil {
		if apierrors.IsNotFound(err) {
			return w.denyFor(sb, claim, "the claim's pool %s does not exist", poolName)
		}
		return apierrors.NewInternalError(fmt.Errorf("reading pool %s: %w", poolName, err))
	}
	tmplName := pool.Spec.SandboxTemplateRef.Name
	tmpl := &extv1beta1.SandboxTemplate{}
	// The cache may lag the version the claim was stamped with (just restamped by the
	// operator): then the API server's copy decides.
	if err := w.read(ctx, types.NamespacedName{Namespace: sb.Namespace, Name: tmplName}, tmpl,
		func() bool { return policy.TemplateHash(tmpl) == stamp }); err != nil {
		if apierrors.IsNotFound(err) {
			return w.denyFor(sb, claim, "the claim's template %s does not exist", tmplName)
		}
		return apierrors.NewInternalError(fmt.Errorf("reading template %s: %w", tmplName, err))
	}
	if got := policy.TemplateHash(tmpl); got != stamp {
		return w.denyFor(sb, claim, "template %s is at version %s now; the claim must be restamped before its Sandbox is built", tmplName, got)
	}
	want, errs := policy.ClaimBlueprint(tmpl, claim)
	if len(errs) > 0 {
		return w.denyFor(sb, claim, "template %s does not allow what the claim asks for: %v", tmplName, errs.ToAggregate())
	}
	if !equality.Semantic.DeepEqual(want, sb.Spec.SandboxBlueprint) {
		return w.denyFor(sb, claim, "the Sandbox is not what template %s at version %s builds for the claim", tmplName, stamp)
	}
	return nil
}

// guardUnbinding admits the removal of (part of) a binding from the operator, and once the
// claim is gone or going from the platform and the Kubernetes controllers too: the garbage
// collector removes the ownerReference of a Sandbox the platform orphans (`kubectl delete
// --cascade=orphan`), and refusing it would keep the claim's deletion from completing.
// Otherwise a user could take a Sandbox from its claim, and one who took it from a claim being
// deleted would keep it running after the claim, which the claim's deletion ends
// (ValidateClaimDeletion).
func (w *BindingGuard) guardUnbinding(ctx context.Context, oldRef *metav1.OwnerReference, oldUID types.UID, newSB *agentsv1beta1.Sandbox, operator bool) error {
	if operator || oldRef == nil {
		// Without an ownerReference the claim is already released: what remains is a label.
		return nil
	}
	c, err := w.claim(ctx, newSB.Namespace, oldRef.Name, oldRef.UID, nil)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("looking up claim %s/%s: %w", newSB.Namespace, oldRef.Name, err))
	}
	var stamp string
	if c != nil {
		stamp = c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
	}
	switch {
	case c != nil && c.DeletionTimestamp == nil:
		return w.deny(newSB, claimName(oldRef, oldUID), stamp,
			"only the operator (%s) may unbind it from an existing claim, not %s", w.OperatorUser, requester(ctx))
	case !w.authority().trusted(userInfo(ctx)):
		return w.deny(newSB, claimName(oldRef, oldUID), stamp,
			"its claim is being deleted, and a claim's deletion ends its Sandbox: only the garbage collector, the operator and the platform may take the claim's reference off, not %s",
			requester(ctx))
	}
	return nil
}

// claim finds the claim named name with the given uid: in the cache first, from the API server
// when the cache misses it, holds another claim of that name, or holds a copy current (nil:
// any) says may predate what the request needs. nil when there is none.
func (w *BindingGuard) claim(ctx context.Context, ns, name string, uid types.UID, current func(*extv1beta1.SandboxClaim) bool) (*extv1beta1.SandboxClaim, error) {
	c := &extv1beta1.SandboxClaim{}
	if err := w.read(ctx, types.NamespacedName{Namespace: ns, Name: name}, c, func() bool {
		return c.UID == uid && (current == nil || current(c))
	}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if c.UID != uid {
		return nil, nil // a claim of that name, but not the one the binding names
	}
	return c, nil
}

// read gets an object from the cache, and from the API server when the cache fails (a
// namespace it does not cover, an informer not synced, no such object yet) or when ok says the
// cached version is not the one the request needs. ok nil accepts any cached version.
func (w *BindingGuard) read(ctx context.Context, key types.NamespacedName, obj client.Object, ok func() bool) error {
	if w.Cache != nil {
		if err := w.Cache.Get(ctx, key, obj); err == nil && (ok == nil || ok()) {
			return nil
		}
	}
	return w.APIReader.Get(ctx, key, obj)
}

// deny is the guard's 403: it names the Sandbox, the claim and both hashes (the Sandbox's is
// computed from its blueprint), so that whoever reads it can tell a stale Sandbox from a
// forged request.
func (w *BindingGuard) deny(sb *agentsv1beta1.Sandbox, claim, claimHash, format string, args ...any) error {
	msg := fmt.Sprintf("binding Sandbox %s/%s (template hash %s) to SandboxClaim %s (template hash %s) is refused: %s",
		sb.Namespace, sb.Name, policy.SandboxHash(sb), claim, orNone(claimHash), fmt.Sprintf(format, args...))
	return apierrors.NewForbidden(sandboxGR, sb.Name, errors.New(msg))
}

// denyFor is deny for a binding to claim, found and read.
func (w *BindingGuard) denyFor(sb *agentsv1beta1.Sandbox, claim *extv1beta1.SandboxClaim, format string, args ...any) error {
	return w.deny(sb, claimName(&metav1.OwnerReference{Name: claim.Name, UID: claim.UID}, ""),
		claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash], format, args...)
}

func claimName(ref *metav1.OwnerReference, uid types.UID) string {
	switch {
	case ref != nil:
		return fmt.Sprintf("%s (uid %s)", ref.Name, ref.UID)
	case uid != "":
		return fmt.Sprintf("with uid %s", uid)
	}
	return "<none>"
}

// bound is the UID of the claim a binding names, "" for none.
func bound(ref *metav1.OwnerReference, uid types.UID) types.UID {
	if uid != "" {
		return uid
	}
	if ref != nil {
		return ref.UID
	}
	return ""
}

func sameRef(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.Name == b.Name
}

func requester(ctx context.Context) string {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.UserInfo.Username == "" {
		return "an unknown user"
	}
	return req.UserInfo.Username
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// authority is w.Authority, with OperatorUser as its operator when it names none.
func (w *BindingGuard) authority() Authority { return w.Authority.withOperator(w.OperatorUser) }
