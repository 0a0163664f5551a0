package reconcilers

// The binding protocol, in one place. A claim is bound to a Sandbox when the Sandbox's
// controller reference points at the claim and its claim-uid label holds the claim's UID;
// the Sandbox is the only record of that, and it is written in one request:
//
//  1. Pick: take a ready, unbound member of (namespace, pool, claim's stamp) from the
//     warmIndex and reserve it in memory, so that concurrent claims of this process do not
//     race for it; when none is ready, one that is starting (warmIndex.PickStarting). No
//     List.
//  2. Bind: ONE JSON merge patch of the member, with its resourceVersion as precondition:
//     ownerReferences = [controller → claim], labels claim-uid and launch-type=warm, the
//     warm-pool label removed (and the claim's created-by and additional pod metadata, so
//     that no second write is needed). 409 (the member changed: bound by someone else, or
//     its pool deleted it), 403 (the binding guard refused: wrong hash, already bound, not
//     the operator) or 404 → release it and pick the next one; but a 409 is first checked
//     against the API server: an earlier bind of this claim that got no answer (a timeout, a
//     cut connection, an API server killed between its write and its answer) may have been
//     applied, here or by the leader before, and then the member is this claim's. A bind
//     with no answer is remembered, and the next attempt reads that member before it binds
//     anything else: a claim is never bound to two Sandboxes. The binding guard admits the
//     patch only from the operator and only when the member's template hash equals the
//     claim's stamp, whatever this process's cache says.
//  3. Route: ONE merge patch of the member's pod with the binding's labels and the claim's
//     pod metadata, warm-pool label removed (report, in sandboxclaim_status.go): Ready
//     means routable, so the pod looks bound before the claim says Ready.
//  4. Report: ONE status patch of the claim (the claim's Reconcile writes it); the
//     SandboxAdopted event follows once claims pause.
//
// A crash between 2 and 4 loses nothing: after a restart the claim finds its Sandbox through
// the indexes.SandboxClaimUID index and writes the status then. The pool sees its member leave
// (controller reference gone) through its own Sandbox watch and refills, off this path.
//
// Cold start (no member, or env / volumeClaimTemplates on the claim): one create of a
// Sandbox named after the claim, controller-owned by it from the start, so it is bound the
// moment it exists.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

// Reasons a bind attempt lost, the values of sandgate_claim_bind_conflicts_total's label.
const (
	bindLostConflict = "conflict"
	bindLostDenied   = "denied"
	bindLostGone     = "gone"
)

// serve gives an unbound claim a Sandbox: warm when a member of its template version is
// ready or starting, after a bounded wait for members on their way, cold otherwise.
func (r *claimReconciler) serve(ctx context.Context, s *claimStep) (result ctrl.Result, err error) {
	claim := s.claim
	nn := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	waiting := false
	defer func() {
		if !waiting {
			r.stopWaiting(nn) // served, cold-started, or waiting for something other than a member
		}
	}()
	poolNN := poolOfClaim(claim)
	if !s.mem.servedOnce {
		// Whether the claim came while other claims of its pool kept coming (within the
		// refill's quiet period, BookkeepingDelay), decided when it is first served: its own
		// later looks do not count.
		last, seen := r.activity.lastClaim(poolNN, r.Clock.Now())
		s.mem.servedOnce, s.mem.amidClaims = true, seen && r.Clock.Since(last) < r.BookkeepingDelay
	}
	r.activity.touch(poolNN, r.Clock.Now())
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonWarmPoolNotFound, fmt.Sprintf(messageWarmPoolNotFoundFmt, claim.Spec.WarmPoolRef.Name))
			return ctrl.Result{}, nil // the pool watch wakes the claim
		}
		return ctrl.Result{}, fmt.Errorf("reading pool: %w", err)
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: pool.Spec.SandboxTemplateRef.Name}, tmpl); err != nil {
		if apierrors.IsNotFound(err) {
			r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonTemplateNotFound, fmt.Sprintf(messageTemplateNotFoundFmt, pool.Spec.SandboxTemplateRef.Name))
			return ctrl.Result{}, nil // the template watch wakes the claim
		}
		return ctrl.Result{}, fmt.Errorf("reading template: %w", err)
	}
	stamp, err := r.ensureStamp(ctx, claim, tmpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	// What admission checked, again: a claim admitted before a rule existed, or while the
	// template was missing, is not served against the rules.
	// The label and annotation allowlists are the ones in effect now, as the public
	// controller checks its label allowlist.
	mdPath := field.NewPath("spec", "additionalPodMetadata")
	errs := policy.ValidateClaimPodMetadata(&claim.Spec.AdditionalPodMetadata, mdPath)
	errs = append(errs, policy.ValidateClaimMetadataDomains(&claim.Spec.AdditionalPodMetadata, mdPath, r.LabelDomains.Get(), r.AnnotationDomains)...)
	if len(errs) > 0 {
		r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonInvalidMetadata, errs.ToAggregate().Error())
		return ctrl.Result{}, nil
	}
	if policy.AddsToTemplate(claim) { // only then can the template's policies refuse it
		if _, errs := policy.ClaimBlueprint(tmpl, claim); len(errs) > 0 {
			reason, msg := claimRejection(errs)
			r.setReady(claim, metav1.ConditionFalse, reason, msg)
			return ctrl.Result{}, nil
		}
	}
	if len(claim.Spec.Env) > 0 || len(claim.Spec.VolumeClaimTemplates) > 0 {
		s.mem.coldReason = fairshare.ColdClaimSpec
		return r.coldStart(ctx, s, tmpl, stamp)
	}

	key := memberKey{Namespace: claim.Namespace, Pool: pool.Name, Hash: stamp}
	take, notWarm, bindDone, err := r.decideWarmShare(ctx, s, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if notWarm != nil {
		return r.beyondWarmShare(ctx, s, tmpl, stamp, key, notWarm)
	}
	// A ready member; else one that is starting (PickStarting), whose start is under way. A
	// claim whose ready members other tenants' guarantees keep takes a starting one only.
	var sb *agentsv1beta1.Sandbox
	if take == fairshare.TakeAny {
		sb, err = r.bindWarm(ctx, s, pool, key, tmpl.Name)
	}
	if err == nil && sb == nil {
		sb, err = r.bindStarting(ctx, s, pool, key, tmpl.Name)
	}
	bindDone(sb != nil)
	if err != nil || sb != nil {
		if sb == nil {
			return ctrl.Result{}, err
		}
		if hold := r.holdInterimReport(s, sb); hold > 0 {
			return ctrl.Result{RequeueAfter: hold}, nil // a starting member: reported once Ready, or after the hold
		}
		wait, err := r.report(ctx, claim, sb)
		return ctrl.Result{RequeueAfter: wait}, err
	}

	// No member to take. Wait while members of the claim's version are on their way: created
	// but not startable yet (PickStarting), or about to be (the pool refills with the current
	// version when it has fewer members than replicas; stale members kept under OnReplenish
	// fill it too). The pool does not defer its refill while a claim waits (waitingClaims),
	// and a member it creates wakes the claim, which takes it starting. But not for members
	// yet to be created when the claim came amid others of its pool: those claims took the
	// members there were, the pool starts more only a few at a time (MaxStartingPercent), and
	// a cold start, first in every queue, is the quicker way; it costs the same one Sandbox
	// and leaves the pool's members to the claims after it. (Measured with the rapid-burst
	// recipe: the third burst's claims waited out their grace for the refill, then cold-started.)
	_, pending := r.Index.Counts(key)
	coming := pending > 0 || (!s.mem.amidClaims &&
		stamp == policy.TemplateHash(tmpl) && r.Index.PoolMembers(pool.Namespace, pool.Name) < replicas(pool))
	left := s.mem.firstSeen.Add(r.ColdStartGrace).Sub(r.Clock.Now())
	if coming && left > 0 {
		waiting = true
		r.Index.Wait(key, nn)
		r.activity.claimWaits(poolNN, nn)
		hold := r.holdWaitingReport(s)
		if hold <= 0 {
			r.setReady(claim, metav1.ConditionFalse, extv1beta1.ReasonSandboxCreatePending, messageWaitingForMember)
		}
		if available, _ := r.Index.Counts(key); available > 0 && take == fairshare.TakeAny {
			// A member became ready between the pick and the registration.
			return ctrl.Result{RequeueAfter: time.Millisecond}, nil
		}
		if hold > 0 {
			return ctrl.Result{RequeueAfter: min(left, hold)}, nil
		}
		return ctrl.Result{RequeueAfter: left}, nil
	}
	s.mem.coldReason = fairshare.ColdPoolEmpty
	return r.coldStart(ctx, s, tmpl, stamp)
}

// poolOfClaim names the pool the claim asks for.
func poolOfClaim(claim *extv1beta1.SandboxClaim) types.NamespacedName {
	return types.NamespacedName{Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name}
}

// stopWaiting ends the claim's wait for a member, in the index and in what the pool is told.
func (r *claimReconciler) stopWaiting(claim types.NamespacedName) {
	r.Index.StopWaiting(claim)
	r.activity.claimDone(claim)
}

// claimsRefusedForMetadata wakes the unbound claims serve refused for their pod metadata
// (Ready=False InvalidMetadata) when the label allowlist changed: they may be served now. A
// served claim is not judged again.
func (r *claimReconciler) claimsRefusedForMetadata(ctx context.Context, _ client.Object) []reconcile.Request {
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing claims after the label allowlist changed")
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range claims.Items {
		ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady)
		if c.Status.Sandbox.Name == "" && ready != nil && ready.Reason == extv1beta1.ReasonInvalidMetadata {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return reqs
}

// ensureStamp returns the claim's stamp, stamping it with the hash of the template as the
// API server has it when admission could not (the pool or template did not exist yet, or no
// webhook runs).
func (r *claimReconciler) ensureStamp(ctx context.Context, claim *extv1beta1.SandboxClaim, cached *extv1beta1.SandboxTemplate) (string, error) {
	if stamp := claim.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]; stamp != "" {
		return stamp, nil
	}
	tmpl := &extv1beta1.SandboxTemplate{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), tmpl); err != nil {
		return "", fmt.Errorf("reading template for the stamp: %w", err)
	}
	stamp := policy.TemplateHash(tmpl)
	if err := r.annotateClaim(ctx, claim, agentsv1beta1.AnnotationSandboxTemplateHash, stamp); err != nil {
		return "", fmt.Errorf("stamping claim: %w", err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("stamped claim", "templateHash", stamp)
	return stamp, nil
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

// coldStart creates the claim's own Sandbox from the template: policy.ClaimBlueprint of the
// template at the claim's version. A rejection by the template's policies is reported in the
// claim's Ready condition and is not an error: nothing changes until the claim or the template
// does. The Sandbox is named after the claim; when that name is taken by a Sandbox this claim
// does not control (someone else's, whatever its owner references say), it is never adopted:
// the claim gets a Sandbox under a generated name instead, and an event says why.
//
// The claim's status does not report the new Sandbox at once: a Sandbox that is Ready within
// interimReportDelay of the claim's first sight (a kwok or warm-image start) is reported once,
// Ready, and the claim's status is written once on its cold path, not twice
// (holdInterimReport).
func (r *claimReconciler) coldStart(ctx context.Context, s *claimStep, tmpl *extv1beta1.SandboxTemplate, stamp string) (ctrl.Result, error) {
	claim := s.claim
	tmpl, err := r.templateOfVersion(ctx, s, tmpl, stamp)
	if err != nil || tmpl == nil {
		return ctrl.Result{}, err
	}
	bp, errs := policy.ClaimBlueprint(tmpl, claim)
	if len(errs) > 0 {
		reason, msg := claimRejection(errs)
		r.setReady(claim, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
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

	bctx, span := r.startBind(ctx, claim, agentsv1beta1.LaunchTypeCold, sb.Name)
	r.tracedCreate(bctx, sb)
	sb, err = r.createClaimSandbox(bctx, s, sb)
	tracing.End(span, err)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sb.UID == "" {
		return ctrl.Result{}, nil // not created; the claim is not served yet
	}
	// A claim that found its pool without a member to take tells the pool's refill how far it
	// falls short (poolActivity.shortfall); one cold-started for its spec or beyond its warm
	// share does not: the pool had, or could not have had, a member for it.
	r.activity.claimServed(poolOfClaim(claim), client.ObjectKeyFromObject(claim), r.Clock.Now(), s.mem.coldReason == fairshare.ColdPoolEmpty)
	r.eventf(s, corev1.EventTypeNormal, extv1beta1.EventSandboxProvisioned, "Provision", "Created sandbox %s from template %s", sb.Name, tmpl.Name)
	r.expected.expect(client.ObjectKeyFromObject(claim), createItem(sandboxKind, sb.Name))
	s.mem.launchType, s.mem.template = agentsv1beta1.LaunchTypeCold, tmpl.Name
	s.mem.unreported = sb.Name
	if wait := r.holdInterimReport(s, sb); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	r.mirror(claim, sb)
	return ctrl.Result{}, nil
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

// createdBy is the created-by label the claim passes on to its Sandbox, "" for none.
func createdBy(claim *extv1beta1.SandboxClaim) string {
	v, ok := claim.Labels[agentsv1beta1.LabelCreatedBy]
	if !ok {
		return ""
	}
	switch v {
	case agentsv1beta1.CreatedByGoClient, agentsv1beta1.CreatedByPythonClient, agentsv1beta1.CreatedByController:
		return v
	}
	return agentsv1beta1.CreatedByUnknown
}

// claimRef is the controller reference a claim's Sandbox carries.
func claimRef(claim *extv1beta1.SandboxClaim) metav1.OwnerReference {
	return *metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind(claimKind))
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
		r.meterServed(ctx, claim, false, s.mem.coldReason)
		r.Metrics.claimCreated(claim, sb.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef], agentsv1beta1.LaunchTypeCold, PodConditionNotReady)
		ctrl.LoggerFrom(ctx).V(1).Info("cold-started sandbox", "sandbox", klog.KObj(sb))
		return sb, nil
	}
	if !apierrors.IsAlreadyExists(err) || sb.Name == "" {
		if sb.Name != "" && answerUnknown(err) {
			// The create may have been applied: nothing else is bound or created for the
			// claim until a read of it says (bindWarm).
			s.mem.uncertainBind = sb.Name
		}
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

// bindWarm binds the claim to a ready member of key, trying members until one binds or none
// is left. It returns the bound Sandbox as the API server returned it, or nil.
func (r *claimReconciler) bindWarm(ctx context.Context, s *claimStep, pool *extv1beta1.SandboxWarmPool, key memberKey, template string) (*agentsv1beta1.Sandbox, error) {
	return r.bindFrom(ctx, s, pool, key, template, r.Index.Pick)
}

// bindStarting binds the claim to a member of key that is not ready yet (PickStarting), as
// bindWarm does.
func (r *claimReconciler) bindStarting(ctx context.Context, s *claimStep, pool *extv1beta1.SandboxWarmPool, key memberKey, template string) (*agentsv1beta1.Sandbox, error) {
	return r.bindFrom(ctx, s, pool, key, template, r.Index.PickStarting)
}

// bindFrom binds the claim to a member of key that pick reserves, trying members until one
// binds or none is left.
func (r *claimReconciler) bindFrom(ctx context.Context, s *claimStep, pool *extv1beta1.SandboxWarmPool, key memberKey, template string,
	pick func(memberKey) (*agentsv1beta1.Sandbox, bool)) (*agentsv1beta1.Sandbox, error) {
	if name := s.mem.uncertainBind; name != "" {
		sb, err := r.boundByClaim(ctx, s, name)
		if err != nil {
			return nil, fmt.Errorf("reading sandbox %s, whose binding got no answer: %w", name, err)
		}
		s.mem.uncertainBind = ""
		if sb != nil {
			ctrl.LoggerFrom(ctx).Info("a bind or create that got no answer had been applied", "sandbox", klog.KObj(sb))
			if sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeCold {
				r.expected.expect(client.ObjectKeyFromObject(s.claim), bindItem(sb.Name))
				s.mem.launchType, s.mem.template = agentsv1beta1.LaunchTypeCold, template
				return sb, nil
			}
			return r.boundWarm(ctx, s, sb, sb, template), nil
		}
	}
	for {
		member, ok := pick(key)
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
		bctx, span := r.startBind(ctx, s.claim, agentsv1beta1.LaunchTypeWarm, member.Name)
		err := mergePatch(bctx, r.Client, bound, r.tracedBind(bctx, bindPatch(s.claim, member)))
		tracing.End(span, err)
		lost := ""
		switch {
		case err == nil:
			r.Metrics.claimPhase(PhaseBind, r.Clock.Since(start))
			r.Index.Release(member, releaseBound)
		case apierrors.IsConflict(err):
			// The member changed since the cache showed it: bound to another claim, or to
			// this one by an earlier attempt that got no answer (a restarted API server
			// applies a write and dies before it answers), here or in the leader before.
			if sb, rerr := r.boundByClaim(ctx, s, member.Name); rerr == nil && sb != nil {
				r.Index.Release(member, releaseBound)
				ctrl.LoggerFrom(ctx).Info("a conflicting binding was this claim's own", "sandbox", klog.KObj(sb))
				return r.boundWarm(ctx, s, member, sb, template), nil
			}
			lost = bindLostConflict
		case apierrors.IsForbidden(err):
			lost = bindLostDenied
		case apierrors.IsNotFound(err):
			lost = bindLostGone
		default:
			// No answer: the binding may have been applied. The next attempt reads the
			// member first, and binds nothing else meanwhile.
			r.Index.Release(member, releaseRetry)
			s.mem.uncertainBind = member.Name
			return nil, fmt.Errorf("binding sandbox %s: %w", member.Name, err)
		}
		if lost != "" {
			r.Index.Release(member, releaseRejected)
			r.Metrics.bindLost(lost)
			ctrl.LoggerFrom(ctx).V(1).Info("member not bound, trying the next one", "sandbox", klog.KObj(member), "reason", lost, "error", err.Error())
			continue
		}
		return r.boundWarm(ctx, s, member, bound, template), nil
	}
}

// answerUnknown reports whether a write's error leaves its outcome unknown: no answer (a cut
// connection, a timeout) or a 5xx, which a killed or restarting API server may give for a
// write it applied.
func answerUnknown(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code == 0 || code >= 500
}

// boundByClaim reads the named Sandbox from the API server and returns it when it is bound
// to the claim (controlled by it), nil when it is not or is gone.
func (r *claimReconciler) boundByClaim(ctx context.Context, s *claimStep, name string) (*agentsv1beta1.Sandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.claim.Namespace, Name: name}, sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case policy.IsControlledBy(sb, policy.ClaimKind, s.claim.UID) && sb.DeletionTimestamp.IsZero():
		return sb, nil
	default:
		return nil, nil
	}
}

// boundWarm records that the claim is bound to the warm member (bound, as the API server
// returned it) and returns bound.
func (r *claimReconciler) boundWarm(ctx context.Context, s *claimStep, member, bound *agentsv1beta1.Sandbox, template string) *agentsv1beta1.Sandbox {
	r.expected.expect(client.ObjectKeyFromObject(s.claim), bindItem(bound.Name))
	// A member taken while it starts is the pool falling short too (poolActivity.shortfall).
	r.activity.claimServed(poolOfClaim(s.claim), client.ObjectKeyFromObject(s.claim), r.Clock.Now(), servedPodCondition(member) == PodConditionNotReady)
	s.mem.launchType, s.mem.template = agentsv1beta1.LaunchTypeWarm, template
	r.Metrics.warmHit()
	r.meterServed(ctx, s.claim, true, "")
	r.Metrics.claimCreated(s.claim, template, agentsv1beta1.LaunchTypeWarm, servedPodCondition(member))
	ctrl.LoggerFrom(ctx).V(1).Info("bound warm sandbox", "sandbox", klog.KObj(bound))
	// The SandboxAdopted event is bookkeeping too: it is sent with the sandbox-name
	// annotation, once claims pause (recordSandboxName), not on the claim's path.
	s.mem.adopted = bound.Name
	if !meta.IsStatusConditionTrue(bound.Status.Conditions, agentsv1beta1.ConditionReady) {
		// A member taken while starting: like a cold start's Sandbox, it is reported once
		// Ready, in one status write, unless the claim's first report comes due before.
		s.mem.unreported = bound.Name
	}
	return bound
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
	if _, marked := member.Annotations[AnnotationSafeToEvict]; marked {
		// The pool's eviction mark goes with the membership (its pod loses it in report).
		body["metadata"].(map[string]any)["annotations"] = map[string]any{AnnotationSafeToEvict: nil}
	}
	// Additional pod metadata goes into the podTemplate, from where it reaches the running pod
	// with the binding's labels before the claim reports Ready (report).
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
