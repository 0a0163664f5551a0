package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
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
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

var (
	claimGK = policy.ClaimKind
	claimGR = extv1beta1.GroupVersion.WithResource("sandboxclaims").GroupResource()
)

// ClaimWebhook stamps SandboxClaims at creation (the mutating half) and validates them (the
// validating half).
type ClaimWebhook struct {
	// Cache reads pools and templates first (the manager's cached client); nil reads them
	// from the API server. See templateOf for why a cached read is safe.
	Cache client.Reader
	// APIReader reads from the API server when the cache misses an object, and to verify a
	// stamp the client supplied.
	APIReader client.Reader
	// OperatorUser is the operator's user name, the only one that may change a stamp.
	OperatorUser string
	// Authority decides who may change or delete a claim: its creator, the operator, the
	// platform.
	Authority Authority
	// Now is the clock of webhook-first-observed-at; nil means time.Now.
	Now func() time.Time
	// Tracer traces the admission of new claims; nil is tracing off.
	Tracer *tracing.Tracer
	// LabelDomains is the allowlist of the label domains a claim's additionalPodMetadata may
	// use (the operator keeps it in step with its ConfigMap); nil is the public default.
	LabelDomains *policy.LabelDomains
	// AnnotationDomains is the allowlist of the annotation domains a claim's
	// additionalPodMetadata may use (--claim-allowed-annotation-domains); empty is
	// policy.DefaultClaimAnnotationDomains.
	AnnotationDomains []string
	// Policies checks a new claim against the ClaimPolicies of its namespace and reserves it
	// in their ledgers (claimpolicy_admission.go); nil checks none.
	Policies *ClaimPolicies
	// Shed refuses new claims while the cluster serves them late (claim_shed.go); nil refuses
	// none.
	Shed *ClaimShed
	// Demand records each admitted claim's arrival at its pool, in memory (no API write): the
	// warm pool autoscaler's earliest signal of demand (recordArrival). nil records nothing.
	Demand *demand.Recorder
}

var (
	_ admission.Defaulter[*extv1beta1.SandboxClaim] = &ClaimWebhook{}
	_ admission.Validator[*extv1beta1.SandboxClaim] = &ClaimWebhook{}
)

// Default admits a new claim in one round trip: it applies the claim's defaults, checks the
// claim (checkNew: what ValidateCreate checks) and stamps it with the blueprint hash of its
// pool's template and the admission time. Without pool or template the claim is admitted
// unstamped: the claim reconciler stamps it once the template exists. A stamp the client
// supplied must equal the computed one.
//
// A claim's CREATE is checked here rather than by the validating webhook, which is called for
// updates only: a second webhook would cost every claim another round trip on its path
// (docs/performance.md), and nothing a later mutating webhook could change escapes either
// way: this webhook is reinvoked when one does (reinvocationPolicy IfNeeded), and the claim
// controller applies the same template rules (Ready=False) before it builds anything, while
// the binding guard decides what a claim gets.
func (w *ClaimWebhook) Default(ctx context.Context, c *extv1beta1.SandboxClaim) (err error) {
	DefaultClaim(c)
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the admission request: %w", err))
	}
	if req.Operation != admissionv1.Create {
		return nil
	}
	ctx, span := startClaimAdmission(ctx, w.Tracer, req.Namespace, c)
	defer func() { tracing.End(span, err) }()
	tmpl, hash, err := w.checkNew(ctx, req.Namespace, c)
	if err != nil {
		return err
	}
	creatorPath := field.NewPath("metadata", "annotations").Key(agentsv1beta1.AnnotationCreator)
	if supplied, ok := c.Annotations[agentsv1beta1.AnnotationCreator]; ok && supplied != req.UserInfo.Username {
		return invalid(claimGK, c.Name, field.ErrorList{field.Invalid(creatorPath, supplied,
			fmt.Sprintf("set by admission to the identity that creates the claim (%s); leave it unset", req.UserInfo.Username))})
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	// The claim belongs to whoever creates it: only they, the operator and the platform may
	// change or delete it and its Sandbox (Authority).
	if req.UserInfo.Username != "" {
		c.Annotations[agentsv1beta1.AnnotationCreator] = req.UserInfo.Username
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	admitted := now()
	at := admitted.UTC().Format(time.RFC3339Nano)
	// The first-observed times are admission's, whatever the client sent: the platform's
	// startup metrics are read from them (a value the client picked would be the client's
	// word in a platform-wide histogram), and only the operator may change them later
	// (ValidateClaimUpdate). The public project's tooling measures startup from
	// controller-first-observed-at; a claim being created has not been observed by any
	// controller before, it is first observed here, and stamping it now costs no write.
	// Reinvoked (another mutating webhook changed the claim after this one), admission sees
	// the claim it stamped: what the shed counted then is counted again below.
	w.Shed.Withdraw(c.Namespace, c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt])
	c.Annotations[agentsv1beta1.AnnotationWebhookFirstObservedAt] = at
	c.Annotations[agentsv1beta1.AnnotationControllerFirstObservedAt] = at
	if tmpl != nil {
		c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash] = hash
	}
	// Shedding before the policies: a claim refused for load reserves nothing. A dry run
	// costs the operator nothing and is answered as if the operator kept up.
	if req.DryRun == nil || !*req.DryRun {
		if err = w.Shed.Admit(req.UserInfo.Username, c); err != nil {
			return err
		}
	}
	// Policies: a claim refused above reserves nothing. Arrival last: a claim a policy refuses
	// is no demand of its pool's.
	if err = w.Policies.Admit(ctx, req, c); err != nil {
		w.Shed.Withdraw(c.Namespace, at)
		return err
	}
	if req.DryRun != nil && *req.DryRun {
		return nil
	}
	// A claim whose name the cache already holds will be refused as AlreadyExists after
	// admission: it is neither ahead of other claims nor demand.
	if c.Name != "" && w.Cache != nil &&
		w.Cache.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: c.Name}, &extv1beta1.SandboxClaim{}) == nil {
		w.Shed.Withdraw(c.Namespace, at)
		return nil
	}
	w.recordArrival(req, c, admitted)
	return nil
}

// recordArrival tells the demand recorder that a claim of its pool arrives, at the time
// written into webhook-first-observed-at: the claim informer's create carries that time, by
// which the leader's estimator recognizes the arrivals it recorded here (internal/demand). A
// dry run creates nothing, and a claim whose name the cache already holds will be refused as
// AlreadyExists after admission: neither is demand, and Default records neither. Other
// refusals after admission (a quota) count until the informer fails to confirm them
// (demand.PendingTTL).
func (w *ClaimWebhook) recordArrival(req admission.Request, c *extv1beta1.SandboxClaim, at time.Time) {
	if w.Demand == nil {
		return
	}
	w.Demand.Admitted(types.NamespacedName{Namespace: req.Namespace, Name: c.Spec.WarmPoolRef.Name}, at)
}

// checkNew checks a new claim in namespace ns: its own fields (ValidateClaim), the owner
// references and finalizers of a claim its creator sets (ValidateClaimReferences), the stamp the
// client supplied, if any, against the blueprint hash of its pool's template, and what it adds
// to that template (env, volumeClaimTemplates, pod metadata) against the template's policies.
// It returns the template (nil when the pool or the template does not exist yet: the claim
// is admitted unstamped) and its hash, or a 422 naming every problem.
func (w *ClaimWebhook) checkNew(ctx context.Context, ns string, c *extv1beta1.SandboxClaim) (*extv1beta1.SandboxTemplate, string, error) {
	errs := append(ValidateClaim(c), w.validateMetadataDomains(c)...)
	trusted := w.authority().trusted(userInfo(ctx))
	if !trusted {
		errs = append(errs, ValidateClaimReferences(c, nil)...)
	}
	errs = append(errs, ValidateNewClaimBinding(c, trusted)...)
	stampPath := field.NewPath("metadata", "annotations").Key(agentsv1beta1.AnnotationSandboxTemplateHash)
	supplied, hasStamp := c.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
	tmpl, why, err := w.templateOf(ctx, ns, c.Spec.WarmPoolRef.Name, supplied)
	if err != nil {
		return nil, "", err
	}
	var hash string
	switch {
	case tmpl == nil && hasStamp:
		errs = append(errs, field.Invalid(stampPath, supplied,
			fmt.Sprintf("cannot be verified: %s; leave it unset, sandgate stamps the claim when the template exists", why)))
	case tmpl == nil:
		ctrl.LoggerFrom(ctx).V(1).Info("admitting claim unstamped", "reason", why)
	default:
		hash = policy.TemplateHash(tmpl)
		if hasStamp && supplied != hash {
			errs = append(errs, field.Invalid(stampPath, supplied,
				fmt.Sprintf("does not match the blueprint hash %s of template %s (set by admission; leave it unset)", hash, tmpl.Name)))
		}
		if policy.AddsToTemplate(c) {
			errs = append(errs, policy.ValidateClaimAgainstTemplate(c, tmpl)...)
		}
	}
	if len(errs) > 0 {
		return nil, "", invalid(claimGK, c.Name, errs)
	}
	return tmpl, hash, nil
}

// validateMetadataDomains checks the labels and annotations of the claim's
// additionalPodMetadata against the allowlists in effect: in-memory lists, no API read.
func (w *ClaimWebhook) validateMetadataDomains(c *extv1beta1.SandboxClaim) field.ErrorList {
	return policy.ValidateClaimMetadataDomains(&c.Spec.AdditionalPodMetadata, field.NewPath("spec", "additionalPodMetadata"),
		w.LabelDomains.Get(), w.AnnotationDomains)
}

// templateOf reads the claim's pool and its template. A missing pool or template is not an
// error: it returns nil and says which is missing.
//
// Pool and template come from the cache, which saves the API server two reads per claim on
// the claim path; the API server is read when the cache misses either (a pool or template
// created a moment ago, a namespace the cache does not cover), and when the client supplied a
// stamp the cached template does not have (want), so that a client that just updated a
// template and must get the new version can ask for it and is checked exactly.
//
// Why a cached read is safe: the stamp never decides alone what a claim gets. The binding
// guard admits only a Sandbox whose own blueprint hashes to the stamp, so a claim gets
// exactly the version it was stamped with, never a mix. What a cache can lag by is the
// informer's delivery delay (milliseconds on a healthy control plane; docs/performance.md):
// a claim admitted within that delay after a template update is stamped with the version
// current a moment before — as if it had been created a moment earlier, which no other client
// can tell apart. Every claim admitted after the cache shows the update gets the new version.
func (w *ClaimWebhook) templateOf(ctx context.Context, ns, pool, want string) (*extv1beta1.SandboxTemplate, string, error) {
	if pool == "" {
		return nil, "the claim names no warm pool", nil
	}
	if w.Cache != nil {
		var p extv1beta1.SandboxWarmPool
		var t extv1beta1.SandboxTemplate
		if w.Cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool}, &p) == nil && p.Spec.SandboxTemplateRef.Name != "" &&
			w.Cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.Spec.SandboxTemplateRef.Name}, &t) == nil &&
			(want == "" || policy.TemplateHash(&t) == want) {
			return &t, "", nil
		}
	}
	var p extv1beta1.SandboxWarmPool
	if err := w.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("warm pool %s/%s not found", ns, pool), nil
		}
		return nil, "", apierrors.NewInternalError(fmt.Errorf("reading warm pool %s/%s: %w", ns, pool, err))
	}
	name := p.Spec.SandboxTemplateRef.Name
	if name == "" {
		return nil, fmt.Sprintf("warm pool %s/%s names no template", ns, pool), nil
	}
	var t extv1beta1.SandboxTemplate
	if err := w.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("template %s/%s of warm pool %s not found", ns, name, pool), nil
		}
		return nil, "", apierrors.NewInternalError(fmt.Errorf("reading template %s/%s: %w", ns, name, err))
	}
	return &t, "", nil
}

// ValidateCreate checks a new claim as Default does (checkNew). The API server does not call
// it: config/webhook sends a claim's CREATE to the stamping webhook only, which checks it in
// the same round trip. It answers the same for a configuration that still sends creates here.
func (w *ClaimWebhook) ValidateCreate(ctx context.Context, c *extv1beta1.SandboxClaim) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading the admission request: %w", err))
	}
	_, _, err = w.checkNew(ctx, req.Namespace, c)
	return nil, err
}

// ValidateUpdate checks that whoever changes the claim's spec may (its creator, the operator,
// the platform), the updated claim (problems the old one had already are not held against the
// update), that warmPoolRef and the creator did not change, that only the operator changed the
// stamp, that its creator added no owner reference or finalizer, and a changed spec against the
// template's policies, as at creation.
func (w *ClaimWebhook) ValidateUpdate(ctx context.Context, oldClaim, newClaim *extv1beta1.SandboxClaim) (admission.Warnings, error) {
	if u := userInfo(ctx); !equality.Semantic.DeepEqual(oldClaim.Spec, newClaim.Spec) && !w.authority().mayActFor(u, creatorOf(oldClaim.Annotations)) {
		return nil, w.notYours(newClaim, u, "change")
	}
	errs := RatchetUpdate(append(ValidateClaim(newClaim), w.validateMetadataDomains(newClaim)...),
		append(ValidateClaim(oldClaim), w.validateMetadataDomains(oldClaim)...))
	errs = append(errs, ValidateClaimUpdate(newClaim, oldClaim, isOperator(ctx, w.OperatorUser))...)
	if !w.authority().trusted(userInfo(ctx)) {
		errs = append(errs, ValidateClaimReferences(newClaim, oldClaim)...)
	}
	if len(errs) == 0 && !equality.Semantic.DeepEqual(oldClaim.Spec, newClaim.Spec) && policy.AddsToTemplate(newClaim) {
		tmpl, _, err := w.templateOf(ctx, newClaim.Namespace, newClaim.Spec.WarmPoolRef.Name, "")
		if err != nil {
			return nil, err
		}
		if tmpl != nil {
			errs = append(errs, RatchetUpdate(policy.ValidateClaimAgainstTemplate(newClaim, tmpl), policy.ValidateClaimAgainstTemplate(oldClaim, tmpl))...)
		}
	}
	return nil, invalid(claimGK, newClaim.Name, errs)
}

// ValidateDelete admits the deletion of a claim by its creator, the operator and the
// platform (and of a claim created before admission recorded creators, by anyone RBAC lets),
// and from anyone but the operator, the platform and the Kubernetes controllers only a
// deletion that ends the claim's Sandbox with it (ValidateClaimDeletion). The platform may
// orphan a Sandbox deliberately (to keep it for inspection): it may delete it as well.
func (w *ClaimWebhook) ValidateDelete(ctx context.Context, c *extv1beta1.SandboxClaim) (admission.Warnings, error) {
	u := userInfo(ctx)
	if !w.authority().mayActFor(u, creatorOf(c.Annotations)) {
		return nil, w.notYours(c, u, "delete")
	}
	if w.authority().trusted(u) {
		return nil, nil
	}
	opts, err := deleteOptions(ctx)
	if err != nil {
		return nil, err
	}
	return nil, invalid(claimGK, c.Name, ValidateClaimDeletion(opts, c))
}

// deleteOptions are the options of the DELETE request in ctx (nil when it carries none).
func deleteOptions(ctx context.Context) (*metav1.DeleteOptions, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading the admission request: %w", err))
	}
	if len(req.Options.Raw) == 0 {
		return nil, nil
	}
	opts := &metav1.DeleteOptions{}
	if err := json.Unmarshal(req.Options.Raw, opts); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding the delete options: %v", err))
	}
	return opts, nil
}

// notYours is the 403 for a request on someone else's claim.
func (w *ClaimWebhook) notYours(c *extv1beta1.SandboxClaim, u authenticationv1.UserInfo, verb string) error {
	return apierrors.NewForbidden(claimGR, c.Name, fmt.Errorf("the claim belongs to %s, who created it; %s may not %s it",
		creatorOf(c.Annotations), orUnknown(u.Username), verb))
}

func orUnknown(user string) string {
	if user == "" {
		return "an unknown user"
	}
	return user
}

// authority is w.Authority, with OperatorUser as its operator when it names none.
func (w *ClaimWebhook) authority() Authority { return w.Authority.withOperator(w.OperatorUser) }
