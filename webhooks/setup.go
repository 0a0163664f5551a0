package webhooks

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/demand"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/ledger"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

// DefaultOperatorUser is the user the operator's requests come from once installed with
// config/default: the service account controller-manager in namespace sandgate-system. The
// binding guard admits bindings from this user only.
const DefaultOperatorUser = "system:serviceaccount:sandgate-system:sandgate-controller-manager"

// Admission configuration, generated into config/webhook/manifests.yaml by `make manifests`.
// failurePolicy is Fail everywhere: without the webhook no claim is stamped and no binding
// happens, which is safe; admitting them unchecked is not. The paths are the ones
// ctrl.NewWebhookManagedBy derives from each kind.
//
// A claim's CREATE costs one round trip: the stamping webhook checks the new claim as it stamps
// it (ClaimWebhook.Default), and is reinvoked if a later mutating webhook changes the claim.
// The claim validator is called for updates of the spec, the finalizers, the owner references
// or an annotation admission records or only the operator writes (the stamp, the creator, the
// first-observed times, the sandbox-name annotation: the binding clients read, so the operator's
// bookkeeping write of it costs a round trip, off the claim's path), for deletions by anyone but
// the claim's recorded creator, and for deletions that would orphan the claim's Sandbox
// (propagationPolicy Orphan, orphanDependents, or no policy on a claim with the orphan
// finalizer): a claim's other labels and annotations (a user's label) are nothing it checks, and
// a creator deleting their own claim in the background or the foreground is admitted without a
// round trip. Finalizers change on a claim's path only when it is deleted in the foreground or
// orphaned (the garbage collector removes the API server's finalizer), off the claim's path.
//
// The binding guard (which also validates Sandboxes) is called only for writes it can refuse:
// creates; updates that change the spec, the owner references, or any label or annotation
// under the reserved domains (agents.x-k8s.io, extensions.agents.x-k8s.io, sandgate.dev and
// their subdomains); and deletions of a bound Sandbox by anyone but the Kubernetes controllers
// (kube-controller-manager's user, or a service account of kube-system), whom the guard admits
// whatever the Sandbox: the garbage collector deletes every claim's Sandbox after its claim.
// Others — a label or annotation of the user's, a finalizer, a pool scaling down, the garbage
// collector — would pay a round trip for an answer known in advance.
//
// The Sandbox defaulter is called only when a default is missing: the CRD schema fills the
// spec's defaults while decoding, before admission, and the operator sets the pod-name
// annotation on the Sandboxes it creates, so every pool refill would pay a webhook round
// trip for nothing.
//
// +kubebuilder:webhook:path=/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=create,versions=v1beta1,name=stamp.sandboxclaims.extensions.agents.x-k8s.io,matchPolicy=Equivalent,reinvocationPolicy=IfNeeded,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-extensions-agents-x-k8s-io-v1beta1-sandboxclaim,mutating=false,failurePolicy=fail,sideEffects=None,groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=update;delete,versions=v1beta1,name=validate.sandboxclaims.extensions.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-refs-admission-annotations-or-checked-delete","expression":"request.operation == 'DELETE' ? ((has(oldObject.metadata.annotations) && 'sandgate.dev/creator' in oldObject.metadata.annotations && oldObject.metadata.annotations['sandgate.dev/creator'] != request.userInfo.username) || (request.options != null && (('propagationPolicy' in request.options && request.options.propagationPolicy == 'Orphan') || ('orphanDependents' in request.options && request.options.orphanDependents == true))) || (has(oldObject.metadata.finalizers) && 'orphan' in oldObject.metadata.finalizers)) : ((has(object.metadata.finalizers) ? object.metadata.finalizers : []) != (has(oldObject.metadata.finalizers) ? oldObject.metadata.finalizers : []) || (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) != (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []) || object.spec != oldObject.spec || ['agents.x-k8s.io/sandbox-template-hash', 'sandgate.dev/creator', 'policy.sandgate.dev/creator-groups', 'policy.sandgate.dev/reservation', 'agents.x-k8s.io/webhook-first-observed-at', 'agents.x-k8s.io/controller-first-observed-at', 'agents.x-k8s.io/sandbox-name'].exists(k, (has(object.metadata.annotations) && k in object.metadata.annotations ? object.metadata.annotations[k] : '') != (has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations ? oldObject.metadata.annotations[k] : '')))"}]}`
// +kubebuilder:webhook:path=/mutate-agents-x-k8s-io-v1beta1-sandbox,mutating=true,failurePolicy=fail,sideEffects=None,groups=agents.x-k8s.io,resources=sandboxes,verbs=create,versions=v1beta1,name=default.sandboxes.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"defaults-missing","expression":"!has(object.spec.shutdownPolicy) || !has(object.spec.operatingMode) || !has(object.metadata.annotations) || !('agents.x-k8s.io/pod-name' in object.metadata.annotations)"}]}`
// +kubebuilder:webhook:path=/validate-agents-x-k8s-io-v1beta1-sandbox,mutating=false,failurePolicy=fail,sideEffects=None,groups=agents.x-k8s.io,resources=sandboxes,verbs=create;update;delete,versions=v1beta1,name=binding-guard.sandboxes.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"binding-membership-spec-reserved-metadata-or-bound-delete","expression":"request.operation == 'DELETE' ? (has(oldObject.metadata.labels) && 'agents.x-k8s.io/claim-uid' in oldObject.metadata.labels && request.userInfo.username != 'system:kube-controller-manager' && !(has(request.userInfo.groups) && 'system:serviceaccounts:kube-system' in request.userInfo.groups)) : (request.operation == 'CREATE' || object.spec != oldObject.spec || (has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []) != (has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []) || ![[has(object.metadata.labels) ? object.metadata.labels : {}, has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}]].all(p, p[0].all(k, !k.matches('^([^/]*[.])?(agents[.]x-k8s[.]io|sandgate[.]dev)/') || (k in p[1] && p[1][k] == p[0][k])) && p[1].all(k, !k.matches('^([^/]*[.])?(agents[.]x-k8s[.]io|sandgate[.]dev)/') || k in p[0])) || ![[has(object.metadata.annotations) ? object.metadata.annotations : {}, has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}]].all(p, p[0].all(k, !k.matches('^([^/]*[.])?(agents[.]x-k8s[.]io|sandgate[.]dev)/') || (k in p[1] && p[1][k] == p[0][k])) && p[1].all(k, !k.matches('^([^/]*[.])?(agents[.]x-k8s[.]io|sandgate[.]dev)/') || k in p[0])))"}]}`
// +kubebuilder:webhook:path=/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxtemplate,mutating=true,failurePolicy=fail,sideEffects=None,groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=create;update,versions=v1beta1,name=default.sandboxtemplates.extensions.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-extensions-agents-x-k8s-io-v1beta1-sandboxtemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=extensions.agents.x-k8s.io,resources=sandboxtemplates,verbs=create;update,versions=v1beta1,name=validate.sandboxtemplates.extensions.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/mutate-extensions-agents-x-k8s-io-v1beta1-sandboxwarmpool,mutating=true,failurePolicy=fail,sideEffects=None,groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=create;update,versions=v1beta1,name=default.sandboxwarmpools.extensions.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-extensions-agents-x-k8s-io-v1beta1-sandboxwarmpool,mutating=false,failurePolicy=fail,sideEffects=None,groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools,verbs=create;update,versions=v1beta1,name=validate.sandboxwarmpools.extensions.agents.x-k8s.io,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/mutate-policy-sandgate-dev-v1alpha1-claimpolicy,mutating=true,failurePolicy=fail,sideEffects=None,groups=policy.sandgate.dev,resources=claimpolicies,verbs=create;update,versions=v1alpha1,name=default.claimpolicies.policy.sandgate.dev,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-policy-sandgate-dev-v1alpha1-claimpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=policy.sandgate.dev,resources=claimpolicies,verbs=create;update,versions=v1alpha1,name=validate.claimpolicies.policy.sandgate.dev,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/mutate-autoscaling-sandgate-dev-v1alpha1-warmpoolautoscaler,mutating=true,failurePolicy=fail,sideEffects=None,groups=autoscaling.sandgate.dev,resources=warmpoolautoscalers,verbs=create;update,versions=v1alpha1,name=default.warmpoolautoscalers.autoscaling.sandgate.dev,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-autoscaling-sandgate-dev-v1alpha1-warmpoolautoscaler,mutating=false,failurePolicy=fail,sideEffects=None,groups=autoscaling.sandgate.dev,resources=warmpoolautoscalers,verbs=create;update,versions=v1alpha1,name=validate.warmpoolautoscalers.autoscaling.sandgate.dev,matchPolicy=Equivalent,admissionReviewVersions=v1,timeoutSeconds=10
//
// The stamping webhook writes a claim's reservation into its ClaimPolicies' ledgers
// (claimpolicy_admission.go), and nothing on a dry run: sideEffects NoneOnDryRun.

// The webhooks read pools and templates (stamping) and claims (binding guard).
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxwarmpools;sandboxtemplates,verbs=get
// +kubebuilder:rbac:groups=extensions.agents.x-k8s.io,resources=sandboxclaims,verbs=get;list;watch
// Admission reads the namespace's ClaimPolicies and reserves new claims in their ledgers.
// +kubebuilder:rbac:groups=policy.sandgate.dev,resources=claimpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.sandgate.dev,resources=claimledgers,verbs=get;list;watch;patch
// The binding guard asks whether a user who creates a Sandbox may create pods.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options configure Setup.
type Options struct {
	// OperatorUser is the user name of the operator's requests (its service account); only it
	// may bind Sandboxes to claims and change stamps. "" means DefaultOperatorUser.
	OperatorUser string
	// Now is the clock of the claims' webhook-first-observed-at; nil means time.Now.
	Now func() time.Time
	// PlatformGroups are the groups trusted to act on every claim and Sandbox (Authority);
	// nil means DefaultPlatformGroups.
	PlatformGroups []string
	// Tracer traces the admission of claims and bindings; nil is tracing off.
	Tracer *tracing.Tracer
	// LabelDomains is the claims' label allowlist, shared with the claim controller; nil is
	// the public default (policy.DefaultClaimLabelDomains).
	LabelDomains *policy.LabelDomains
	// AnnotationDomains is the claims' annotation allowlist; empty is the default
	// (policy.DefaultClaimAnnotationDomains).
	AnnotationDomains []string
	// ClaimPolicies turns on the admission of ClaimPolicies' limits (the leader's claim policy
	// controller must run: it counts the ledgers admission reserves in).
	ClaimPolicies bool
	// LedgerClient writes the ledgers. Every replica admits claims, so it must not be the
	// manager's client, whose writes only the leader may send (the lease fence): a
	// reservation is a write conditional on the ledger's resourceVersion, safe from any
	// replica at any time. nil writes with the manager's client (a manager without leader
	// election).
	LedgerClient client.Client
	// FairShareMetrics count refusals and the time admission spends on policies.
	FairShareMetrics *fairshare.Metrics
	// Demand receives the arrival of every admitted claim, for the warm pool autoscaler
	// (ClaimWebhook.Demand); nil records nothing.
	Demand *demand.Recorder
	// ClaimMaxWait refuses a new claim with 429 when the claims ahead of it in the control
	// plane, at the rate claims are served, would take longer than this (ClaimShed); 0
	// refuses none. Only where the claim controller runs (the extensions): without it no claim
	// is served.
	ClaimMaxWait time.Duration
}

// Setup registers every webhook with the manager's webhook server (the conversion webhook at
// ConvertPath too). The claim webhooks and the binding guard read through the manager's
// cache and fall back to the API server (see ClaimWebhook.templateOf and BindingGuard).
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.OperatorUser == "" {
		opts.OperatorUser = DefaultOperatorUser
	}
	authority := Authority{OperatorUser: opts.OperatorUser, PlatformGroups: opts.PlatformGroups}
	claims := &ClaimWebhook{Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), OperatorUser: opts.OperatorUser, Authority: authority, Now: opts.Now, Tracer: opts.Tracer,
		LabelDomains: opts.LabelDomains, AnnotationDomains: opts.AnnotationDomains, Policies: claimPolicies(mgr, opts),
		Demand: opts.Demand}
	if opts.ClaimMaxWait > 0 {
		claims.Shed = &ClaimShed{MaxWait: opts.ClaimMaxWait, Now: opts.Now}
		inf, err := mgr.GetCache().GetInformer(context.Background(), &extv1beta1.SandboxClaim{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching SandboxClaims for load shedding: %w", err)
		}
		claimsSeen, err := inf.AddEventHandler(claims.Shed.Handler())
		if err != nil {
			return fmt.Errorf("watching SandboxClaims for load shedding: %w", err)
		}
		// A claim whose pod starts on its node is past the control plane's queues, and a ready
		// pool member serves a claim at once (ClaimShed.ObservePod, ObserveSandbox). Every
		// replica admits claims, so every replica watches the pods and Sandboxes the leader's
		// controllers watch, with the same cache settings (--cache-label-selectors scopes them).
		pods, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Pod{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching Pods for load shedding: %w", err)
		}
		podsSeen, err := pods.AddEventHandler(claims.Shed.PodHandler())
		if err != nil {
			return fmt.Errorf("watching Pods for load shedding: %w", err)
		}
		sandboxes, err := mgr.GetCache().GetInformer(context.Background(), &agentsv1beta1.Sandbox{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("watching Sandboxes for load shedding: %w", err)
		}
		sandboxesSeen, err := sandboxes.AddEventHandler(claims.Shed.SandboxHandler())
		if err != nil {
			return fmt.Errorf("watching Sandboxes for load shedding: %w", err)
		}
		claims.Shed.Synced = func() bool {
			return claimsSeen.HasSynced() && podsSeen.HasSynced() && sandboxesSeen.HasSynced()
		}
	}
	guard := &BindingGuard{Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), OperatorUser: opts.OperatorUser,
		Authority: authority, Authorizer: mgr.GetClient(), Tracer: opts.Tracer}
	for _, err := range []error{
		wrap("SandboxClaim (stamping, validation)", register(mgr, &extv1beta1.SandboxClaim{}, claims, claims)),
		wrap("Sandbox (defaulting, binding guard)", register(mgr, &agentsv1beta1.Sandbox{}, SandboxDefaulter{}, guard)),
		wrap("SandboxTemplate", register(mgr, &extv1beta1.SandboxTemplate{}, TemplateWebhook{}, TemplateWebhook{})),
		wrap("SandboxWarmPool", register(mgr, &extv1beta1.SandboxWarmPool{}, PoolWebhook{}, PoolWebhook{})),
		wrap("ClaimPolicy", register(mgr, &tenancyv1alpha1.ClaimPolicy{}, ClaimPolicyWebhook{Cache: mgr.GetClient()}, ClaimPolicyWebhook{Cache: mgr.GetClient()})),
		wrap("WarmPoolAutoscaler", register(mgr, &autoscalingv1alpha1.WarmPoolAutoscaler{}, AutoscalerWebhook{}, AutoscalerWebhook{})),
		wrap("conversion", registerConversion(mgr)),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// claimPolicies is the claim stamper's admission of ClaimPolicies, nil when off.
func claimPolicies(mgr ctrl.Manager, opts Options) *ClaimPolicies {
	if !opts.ClaimPolicies {
		return nil
	}
	writer := opts.LedgerClient
	if writer == nil {
		writer = mgr.GetClient()
	}
	var now func() time.Time
	if opts.Now != nil {
		now = opts.Now
	}
	return &ClaimPolicies{Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metrics: opts.FairShareMetrics,
		Reserver: &ledger.Reserver{Client: writer, Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Metrics: opts.FairShareMetrics, Now: now}}
}

// register serves a kind's defaulter and validator at the paths ctrl.NewWebhookManagedBy would
// use (and config/webhook names), each behind decodeErrors; the defaulter's patch also behind
// omitNulls.
func register[T runtime.Object](mgr ctrl.Manager, obj T, d admission.Defaulter[T], v admission.Validator[T]) error {
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return err
	}
	suffix := strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
	server := mgr.GetWebhookServer()
	mutating := admission.WithDefaulter(mgr.GetScheme(), d)
	mutating.Handler = decodeErrors{next: omitNulls{next: mutating.Handler}, gk: gvk.GroupKind(), proto: obj}
	server.Register("/mutate-"+suffix, mutating)
	validating := admission.WithValidator(mgr.GetScheme(), v)
	validating.Handler = decodeErrors{next: validating.Handler, gk: gvk.GroupKind(), proto: obj}
	server.Register("/validate-"+suffix, validating)
	return nil
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("registering the %s webhooks: %w", what, err)
	}
	return nil
}
