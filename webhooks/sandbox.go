package webhooks

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

var (
	sandboxGK = agentsv1beta1.GroupVersion.WithKind("Sandbox").GroupKind()
	sandboxGR = agentsv1beta1.GroupVersion.WithResource("sandboxes").GroupResource()
)

// SandboxWebhook defaults and validates Sandboxes and is the binding guard: the one place that
// decides whether a Sandbox may become a claim's.
type SandboxWebhook struct {
	// Cache reads claims first (the manager's cached client); nil skips it.
	Cache client.Reader
	// APIReader reads a claim from the API server when the cache does not have it (yet), or
	// has an older claim of the same name.
	APIReader client.Reader
	// OperatorUser is the operator's user name, the only one allowed to bind.
	OperatorUser string
}

var (
	_ admission.Defaulter[*agentsv1beta1.Sandbox] = &SandboxWebhook{}
	_ admission.Validator[*agentsv1beta1.Sandbox] = &SandboxWebhook{}
)

// Default applies DefaultSandbox.
func (w *SandboxWebhook) Default(_ context.Context, sb *agentsv1beta1.Sandbox) error {
	DefaultSandbox(sb)
	return nil
}

// ValidateCreate validates a new Sandbox. One created already bound to a claim (the claim
// reconciler's cold start) must come from the operator: anyone else could hand a claim a
// Sandbox of their making.
func (w *SandboxWebhook) ValidateCreate(ctx context.Context, sb *agentsv1beta1.Sandbox) (admission.Warnings, error) {
	operator := isOperator(ctx, w.OperatorUser)
	if ref, uid := ClaimBindingOf(sb); (ref != nil || uid != "") && !operator {
		return nil, w.deny(sb, claimName(ref, uid), "", "only the operator (%s) may create a Sandbox bound to a claim, not %s",
			w.OperatorUser, requester(ctx))
	}
	return nil, invalid(sandboxGK, sb.Name, w.validate(sb, operator))
}

// ValidateUpdate runs the binding guard, then the validation of what the update introduces.
func (w *SandboxWebhook) ValidateUpdate(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox) (admission.Warnings, error) {
	operator := isOperator(ctx, w.OperatorUser)
	if err := w.guardBinding(ctx, oldSB, newSB, operator); err != nil {
		return nil, err
	}
	errs := RatchetUpdate(w.validate(newSB, operator), w.validate(oldSB, operator))
	errs = append(errs, ValidateSandboxUpdate(newSB, oldSB, operator)...)
	return nil, invalid(sandboxGK, newSB.Name, errs)
}

// ValidateDelete admits every deletion.
func (w *SandboxWebhook) ValidateDelete(context.Context, *agentsv1beta1.Sandbox) (admission.Warnings, error) {
	return nil, nil
}

// validate applies ValidateSandbox. The operator copies podTemplates of templates verbatim, and
// a template created before sandgate's admission ran may hold reserved keys: the Sandbox
// controller drops those keys from the pod, so the operator's writes are not refused for them.
func (w *SandboxWebhook) validate(sb *agentsv1beta1.Sandbox, operator bool) field.ErrorList {
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
	uid := types.UID(sb.Labels[agentsv1beta1.LabelClaimUID])
	ref := metav1.GetControllerOfNoCopy(sb)
	if ref == nil || ref.Kind != claimGK.Kind {
		return nil, uid
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != claimGK.Group {
		return nil, uid
	}
	return ref, uid
}

// guardBinding admits a change of a Sandbox's binding only from the operator, only onto a
// Sandbox that is not bound to another claim, and only when the Sandbox's template-hash label
// equals the claim's stamp.
func (w *SandboxWebhook) guardBinding(ctx context.Context, oldSB, newSB *agentsv1beta1.Sandbox, operator bool) error {
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
		found, lookupErr = w.claim(ctx, newSB.Namespace, newRef.Name, newRef.UID)
		if found != nil {
			stamp = found.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
		}
	}

	switch {
	case !operator:
		return w.deny(newSB, claim, stamp, "only the operator (%s) may bind a Sandbox to a claim, not %s", w.OperatorUser, requester(ctx))
	case bound(oldRef, oldUID) != "" && bound(oldRef, oldUID) != bound(newRef, newUID):
		return w.deny(newSB, claim, stamp, "it is already bound to claim %s", claimName(oldRef, oldUID))
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
	case newSB.Labels[agentsv1beta1.LabelSandboxTemplateHash] != stamp:
		return w.deny(newSB, claim, stamp, "the Sandbox was built from another template version than the claim was stamped with")
	}
	ctrl.LoggerFrom(ctx).V(1).Info("binding admitted", "claim", claim, "templateHash", stamp)
	return nil
}

// guardUnbinding admits the removal of (part of) a binding from the operator, and from anyone
// once the claim is gone or going: the garbage collector removes the ownerReference of an
// orphaned Sandbox (`kubectl delete --cascade=orphan`), and refusing it would keep the claim's
// deletion from completing. Otherwise a user could take a Sandbox from its claim.
func (w *SandboxWebhook) guardUnbinding(ctx context.Context, oldRef *metav1.OwnerReference, oldUID types.UID, newSB *agentsv1beta1.Sandbox, operator bool) error {
	if operator || oldRef == nil {
		// Without an ownerReference the claim is already released: what remains is a label.
		return nil
	}
	c, err := w.claim(ctx, newSB.Namespace, oldRef.Name, oldRef.UID)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("looking up claim %s/%s: %w", newSB.Namespace, oldRef.Name, err))
	}
	if c == nil || c.DeletionTimestamp != nil {
		return nil
	}
	return w.deny(newSB, claimName(oldRef, oldUID), c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash],
		"only the operator (%s) may unbind it from an existing claim, not %s", w.OperatorUser, requester(ctx))
}

// claim finds the claim named name with the given uid: in the cache first, from the API server
// when the cache misses it or holds another claim of that name. nil when there is none.
func (w *SandboxWebhook) claim(ctx context.Context, ns, name string, uid types.UID) (*extv1beta1.SandboxClaim, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	if w.Cache != nil {
		var c extv1beta1.SandboxClaim
		// Any cache error (a namespace the cache does not cover, an informer not synced)
		// falls through to the API server.
		if err := w.Cache.Get(ctx, key, &c); err == nil && c.UID == uid {
			return &c, nil
		}
	}
	var c extv1beta1.SandboxClaim
	if err := w.APIReader.Get(ctx, key, &c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if c.UID != uid {
		return nil, nil // a claim of that name, but not the one the binding names
	}
	return &c, nil
}

// deny is the guard's 403: it names the Sandbox, the claim and both hashes, so that whoever
// reads it can tell a stale Sandbox from a forged request.
func (w *SandboxWebhook) deny(sb *agentsv1beta1.Sandbox, claim, claimHash, format string, args ...any) error {
	sbHash := sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]
	msg := fmt.Sprintf("binding Sandbox %s/%s (template hash %s) to SandboxClaim %s (template hash %s) is refused: %s",
		sb.Namespace, sb.Name, orNone(sbHash), claim, orNone(claimHash), fmt.Sprintf(format, args...))
	return apierrors.NewForbidden(sandboxGR, sb.Name, errors.New(msg))
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
