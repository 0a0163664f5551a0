package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// warmPoolControllerName names the SandboxWarmPool controller in logs and metrics.
const warmPoolControllerName = "sandboxwarmpool"

const warmPoolKind = "SandboxWarmPool"

// Creates go out in batches of 1, 2, 4, ... up to maxCreateBatch in parallel, so that a
// template that cannot be instantiated fails once, not replicas times; and at most
// WarmPoolPolicy.MaxBatchSize per reconcile, so a huge scale-up does not hold a worker for long.
const maxCreateBatch = 64

// warmPoolReconciler keeps spec.replicas unbound members of each pool, built from the
// pool's template, and reports them in status. Claims take members away by binding them
// (the member's controller reference moves to the claim); the pool sees that through its
// Sandbox watch and refills, off the claims' path.
type warmPoolReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Metrics  *Metrics
	Clock    clock.PassiveClock
	// Refill says when replacements of claimed members are created; see RefillPolicy.
	Refill RefillPolicy
	// WarmPool is the public controller's warm pool settings; zero fields mean its defaults.
	WarmPool WarmPoolPolicy

	expected *expectations
	// activity is when claims last took (or waited for) each pool's members; shared with the
	// claim controller.
	activity *poolActivity
	// deferring records the pools whose refill is deferred now, for one event per change;
	// holding those that hold unschedulable members.
	deferring, holding sync.Map
	// deferredSince is when each pool's current refill deferral began (RefillPolicy.MaxDeferral).
	deferredSince sync.Map
	// pacing is the replenish hold and refill rate of each pool.
	pacing *refillPacing
	// written is each pool's status as this process last wrote it, until the cache shows it.
	written ownStatuses[extv1beta1.SandboxWarmPoolStatus]
}

// SetupWithManager registers the controller and its watches.
func (r *warmPoolReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.WarmPool = r.WarmPool.withDefaults()
	r.pacing = newRefillPacing()
	r.expected = newExpectations(r.Clock)
	if r.activity == nil {
		r.activity = newPoolActivity()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(warmPoolControllerName).
		WithOptions(opts).
		// Status writes do not change the generation: the pool's own writes never wake it.
		For(&extv1beta1.SandboxWarmPool{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&agentsv1beta1.Sandbox{}, &memberEventHandler{expected: r.expected}).
		Watches(&extv1beta1.SandboxTemplate{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfTemplate),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A member's pod placed frees room for the next (startingRoom): its status says so
		// only later (startingUp).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.poolOfPlacedPod), builder.WithPredicates(podPlacement)).
		// A claim that waits for a member wakes its pool (poolActivity.claimWaits).
		WatchesRawSource(source.Channel(r.activity.wakePool, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// poolsOfTemplate maps a template to the pools built from it.
func (r *warmPoolReconciler) poolsOfTemplate(ctx context.Context, obj client.Object) []reconcile.Request {
	pools := listPoolsOfTemplate(ctx, r.Client, obj)
	reqs := make([]reconcile.Request, 0, len(pools))
	for _, p := range pools {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// Reconcile brings one pool's members to spec.replicas and writes its status.
func (r *warmPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(warmPoolControllerName)
	pool := &extv1beta1.SandboxWarmPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.expected.forget(req.NamespacedName)
			r.activity.forget(req.NamespacedName)
			r.deferring.Delete(req.NamespacedName)
			r.deferredSince.Delete(req.NamespacedName)
			r.holding.Delete(req.NamespacedName)
			r.pacing.forget(req.NamespacedName)
			r.written.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // members go with it through garbage collection
	}
	if w := r.written.newer(pool); w != nil {
		pool.Status = *w.DeepCopy()
	}
	// Expectations first, the cache listing after: the informer updates the cache before it
	// reports an event, so once the expectations are satisfied the listing that follows shows
	// every member they counted. The other way round a create observed in between would be
	// missing from the listing and made again.
	satisfied := r.expected.satisfied(req.NamespacedName)
	members, err := r.members(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	old := pool.DeepCopy()
	setPoolStatus(pool, members)

	var result ctrl.Result
	var errs []error
	tmpl := &extv1beta1.SandboxTemplate{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: pool.Spec.SandboxTemplateRef.Name}, tmpl)
	switch {
	case apierrors.IsNotFound(err):
		// Nothing to build members from; the template watch brings the pool back.
		ctrl.LoggerFrom(ctx).V(1).Info("template not found", "template", pool.Spec.SandboxTemplateRef.Name)
	case err != nil:
		errs = append(errs, fmt.Errorf("reading template: %w", err))
	case !satisfied:
		// The cache does not show all of this pool's creates and deletes yet: acting on it now
		// would create or delete too many. Their events bring the pool back.
		result.RequeueAfter = expectationsTTL
	default:
		result, err = r.maintain(ctx, pool, tmpl, members)
		errs = append(errs, err)
	}

	if wrote, err := patchStatus(ctx, r.Client, old, pool, func(p *extv1beta1.SandboxWarmPool) any { return p.Status }); err != nil {
		errs = append(errs, fmt.Errorf("patching pool status: %w", err))
	} else if wrote {
		r.written.record(pool, pool.Status.DeepCopy())
	}
	return quiet(result, errors.Join(errs...))
}

// maintain deletes, refreshes and creates members as planPool says, within the pool's
// pacing, and says when to look at the pool again.
func (r *warmPoolReconciler) maintain(ctx context.Context, pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate,
	members []*agentsv1beta1.Sandbox) (ctrl.Result, error) {
	var result ctrl.Result
	key := client.ObjectKeyFromObject(pool)
	bp := policy.TemplateBlueprint(tmpl)
	now := r.Clock.Now()
	plan := planPool(members, replicas(pool), version{hash: agentsv1beta1.BlueprintHash(&bp), spec: policy.SpecHash(&bp), template: tmpl.Name},
		pool.Spec.UpdateStrategy.Type, now, poolRules{
			grace:         r.WarmPool.ReadinessGracePeriod,
			maxBatch:      r.WarmPool.MaxBatchSize,
			unschedulable: func(sb *agentsv1beta1.Sandbox) bool { return r.podUnschedulable(ctx, sb) },
			podCreated:    func(sb *agentsv1beta1.Sandbox) (time.Time, bool) { return r.podCreated(ctx, sb) },
		})
	if plan.recheckAfter > 0 {
		result.RequeueAfter = graceRecheck(plan.recheckAfter)
	}
	r.noteHold(pool, plan.held, replicas(pool))
	if plan.held > 0 {
		result = requeueWithin(result, r.WarmPool.UnschedulableRecheckInterval)
	}
	create, deferred, paced := r.paceCreates(key, plan, members, replicas(pool), now,
		func(sb *agentsv1beta1.Sandbox) bool { return statusPlaced(sb) || r.podPlaced(ctx, sb) })
	if plan.create > 0 {
		r.noteDeferral(pool, deferred, plan.create)
	}
	result = requeueWithin(requeueWithin(result, deferred), paced)
	errs := []error{r.deleteMembers(ctx, pool, plan.delete), r.refreshMembers(ctx, &bp, plan.refresh)}
	created, err := r.createMembers(ctx, pool, tmpl, create)
	r.pacing.created(key, created)
	errs = append(errs, err)
	if create < plan.create && deferred == 0 && paced == 0 && err == nil {
		// More to create than one batch: the creates' events bring the pool back; this is
		// in case they do not.
		result = requeueWithin(result, time.Millisecond)
	}
	return result, errors.Join(errs...)
}

// members lists the pool's unbound members from the cache index, those being deleted left
// out.
func (r *warmPoolReconciler) members(ctx context.Context, pool *extv1beta1.SandboxWarmPool) ([]*agentsv1beta1.Sandbox, error) {
	var list agentsv1beta1.SandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingFields{indexes.SandboxPool: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing pool members: %w", err)
	}
	out := make([]*agentsv1beta1.Sandbox, 0, len(list.Items))
	for i := range list.Items {
		sb := &list.Items[i]
		// The index goes by the pool's name; membership by its UID (a member of an earlier
		// pool of the same name is not this pool's).
		if policy.IsControlledBy(sb, policy.PoolKind, pool.UID) && sb.DeletionTimestamp.IsZero() {
			out = append(out, sb)
		}
	}
	return out, nil
}

func setPoolStatus(pool *extv1beta1.SandboxWarmPool, members []*agentsv1beta1.Sandbox) {
	ready := 0
	for _, m := range members {
		if meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady) {
			ready++
		}
	}
	pool.Status = extv1beta1.SandboxWarmPoolStatus{
		Replicas:           int32(len(members)),
		ReadyReplicas:      int32(ready),
		Selector:           agentsv1beta1.LabelWarmPoolSandbox + "=" + agentsv1beta1.NameHash(pool.Name),
		ObservedGeneration: pool.Generation,
	}
}

// version is the template version members are built from: its hash, its hash but for pod
// metadata (policy.SpecHash), and the template's name.
type version struct{ hash, spec, template string }

// poolPlan is what one reconcile of a pool does.
type poolPlan struct {
	create int
	delete []*agentsv1beta1.Sandbox
	// refresh are members of an earlier version that differs from the current one only in
	// pod metadata: they take on the current metadata in place rather than being replaced.
	refresh []*agentsv1beta1.Sandbox
	// recheckAfter is when the oldest not-ready member has run out of time (graceRequeueSlack
	// after); 0 when none waits.
	recheckAfter time.Duration
	// held counts the unschedulable members kept past their grace; active the members kept.
	held, active int
}

// poolRules are the settings planPool applies.
type poolRules struct {
	// grace is how long a member may stay not Ready (WarmPoolPolicy.ReadinessGracePeriod).
	grace time.Duration
	// maxBatch bounds the surplus members deleted at once (WarmPoolPolicy.MaxBatchSize).
	maxBatch int
	// unschedulable says whether a member's pod is unschedulable; asked only of members past
	// their grace.
	unschedulable func(*agentsv1beta1.Sandbox) bool
	// podCreated says when a member's pod was created, and false when it has none (yet): a
	// not-Ready member's grace runs from then (graceStart). nil counts from the member's
	// own creation.
	podCreated func(*agentsv1beta1.Sandbox) (time.Time, bool)
}

// graceStart is when a not-Ready member's readiness grace started: when its pod was created.
// A member this operator has not made a pod for yet is not stuck but queued behind the
// Sandbox controller's other work (a pool of thousands filled at once: its last members wait
// minutes for their pods), and a replacement would only queue behind it, one more create and
// delete for an API server that is already the bottleneck; so its grace has not started
// (zero). Without rules.podCreated, the member's creation.
func graceStart(m *agentsv1beta1.Sandbox, rules poolRules) time.Time {
	if rules.podCreated == nil {
		return m.CreationTimestamp.Time
	}
	created, ok := rules.podCreated(m)
	if !ok {
		return time.Time{}
	}
	return created
}

// planPool decides which members go and how many are made: failed members and members not
// Ready for longer than the grace period are replaced, but for those whose pod is
// unschedulable, which are held (see sandboxwarmpool_readiness.go); with Recreate, members of
// an older template version go at once (with OnReplenish they stay until claimed); beyond
// replicas, not-ready members go first, then stale ones, then the newest, at most maxBatch.
func planPool(members []*agentsv1beta1.Sandbox, replicas int, current version, strategy extv1beta1.UpdateStrategyType,
	now time.Time, rules poolRules) poolPlan {
	var plan poolPlan
	hash := current.hash
	keep := make([]*agentsv1beta1.Sandbox, 0, len(members))
	for _, m := range members {
		ready := meta.IsStatusConditionTrue(m.Status.Conditions, agentsv1beta1.ConditionReady)
		var since time.Time
		if !ready {
			since = graceStart(m, rules)
		}
		stale := m.Labels[agentsv1beta1.LabelSandboxTemplateHash] != hash
		if stale && !memberFailed(m) && policy.SpecHash(&m.Spec.SandboxBlueprint) == current.spec &&
			m.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelSandboxTemplateRefHash] == agentsv1beta1.NameHash(current.template) {
			// Only the template's pod metadata changed: the member takes it on in place,
			// whatever the strategy (Recreate replaces what runs differently, not what is
			// labelled so). A member of another template is no such member: its pod is
			// another template's, which that template's NetworkPolicy selects.
			plan.refresh = append(plan.refresh, m)
			stale = false
		}
		switch {
		case memberFailed(m):
			plan.delete = append(plan.delete, m)
		case stale && strategy == extv1beta1.RecreateUpdateStrategy:
			plan.delete = append(plan.delete, m)
		case !ready && !since.IsZero() && now.Sub(since) > rules.grace:
			if rules.unschedulable != nil && rules.unschedulable(m) {
				plan.held++
				keep = append(keep, m)
				break
			}
			plan.delete = append(plan.delete, m)
		default:
			if !ready {
				// A member without a pod is looked at again a grace period from now, in case
				// nothing else brings its pool back.
				left := rules.grace + graceRequeueSlack
				if !since.IsZero() {
					left = since.Add(rules.grace).Sub(now) + graceRequeueSlack
				}
				if plan.recheckAfter == 0 || left < plan.recheckAfter {
					plan.recheckAfter = left
				}
			}
			keep = append(keep, m)
		}
	}
	plan.active = len(keep)
	if excess := len(keep) - replicas; excess > 0 {
		sort.SliceStable(keep, func(i, j int) bool { return scaleDownBefore(keep[i], keep[j], hash) })
		if rules.maxBatch > 0 {
			excess = min(excess, rules.maxBatch)
		}
		plan.delete = append(plan.delete, keep[:excess]...)
	} else {
		plan.create = -excess
	}
	return plan
}

// scaleDownBefore orders members for scale-down: not ready, then stale, then newest.
func scaleDownBefore(a, b *agentsv1beta1.Sandbox, hash string) bool {
	ra := meta.IsStatusConditionTrue(a.Status.Conditions, agentsv1beta1.ConditionReady)
	rb := meta.IsStatusConditionTrue(b.Status.Conditions, agentsv1beta1.ConditionReady)
	if ra != rb {
		return !ra
	}
	sa := a.Labels[agentsv1beta1.LabelSandboxTemplateHash] != hash
	sb := b.Labels[agentsv1beta1.LabelSandboxTemplateHash] != hash
	if sa != sb {
		return sa
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// memberFailed: a member whose pod ended (or that reports Finished) never becomes Ready again.
func memberFailed(sb *agentsv1beta1.Sandbox) bool {
	if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionFinished) {
		return true
	}
	c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	return c != nil && (c.Reason == agentsv1beta1.ReasonPodFailed || c.Reason == agentsv1beta1.ReasonPodSucceeded)
}

// deleteMembers deletes members on condition that they are unchanged since the cache saw
// them: a member a claim bound meanwhile fails the precondition and is left alone.
func (r *warmPoolReconciler) deleteMembers(ctx context.Context, pool *extv1beta1.SandboxWarmPool, members []*agentsv1beta1.Sandbox) error {
	key := client.ObjectKeyFromObject(pool)
	var errs []error
	for _, m := range members {
		uid, rv := m.UID, m.ResourceVersion
		item := deleteItem(m.Name)
		r.expected.expect(key, item)
		err := r.Client.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			ctrl.LoggerFrom(ctx).V(1).Info("deleted pool member", "sandbox", klog.KObj(m))
		case apierrors.IsNotFound(err):
			r.expected.observe(key, item) // gone already
		case apierrors.IsConflict(err):
			// Changed since the cache saw it: bound, or written by the Sandbox controller, whose
			// writes do not wake the pool. The conflict makes Reconcile look again soon (quiet).
			r.expected.observe(key, item)
			errs = append(errs, fmt.Errorf("deleting pool member %s: %w", m.Name, err))
		default:
			r.expected.observe(key, item)
			errs = append(errs, fmt.Errorf("deleting pool member %s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// refreshMembers gives members of an earlier version the current pod metadata, and the
// current version's template-hash label with it (memberLabelsPatch), in one patch each on
// condition that they are unchanged since the cache saw them (a member a claim bound
// meanwhile is left alone; one that changed otherwise is tried again on the next, prompt,
// reconcile).
// The Sandbox controller moves the metadata onto the running pod. Until a member's patch
// lands it keeps its old label, so no claim stamped with the current version is bound to it
// before it is what that version builds.
func (r *warmPoolReconciler) refreshMembers(ctx context.Context, bp *agentsv1beta1.SandboxBlueprint, members []*agentsv1beta1.Sandbox) error {
	hash := agentsv1beta1.BlueprintHash(bp)
	want := bp.PodTemplate.ObjectMeta
	var errs []error
	for _, m := range members {
		have := m.Spec.PodTemplate.ObjectMeta
		metadata := map[string]any{
			"resourceVersion": m.ResourceVersion,
			"labels":          memberLabelsPatch(hash),
		}
		if _, own := want.Annotations[AnnotationSafeToEvict]; !own && !r.WarmPool.DisableEviction &&
			have.Annotations[AnnotationSafeToEvict] == "true" && m.Annotations[AnnotationSafeToEvict] != "true" {
			// A member the public controller made carries its eviction mark in the podTemplate,
			// which the refresh replaces: the mark moves to where sandgate keeps it, so that
			// the idle pod stays evictable and a claim still removes it.
			metadata["annotations"] = map[string]any{AnnotationSafeToEvict: "true"}
		}
		body := map[string]any{
			"metadata": metadata,
			"spec": map[string]any{"podTemplate": map[string]any{"metadata": map[string]any{
				"labels":      mapPatch(have.Labels, want.Labels),
				"annotations": mapPatch(have.Annotations, want.Annotations),
			}}},
		}
		err := mergePatch(ctx, r.Client, m, body)
		switch {
		case err == nil:
			ctrl.LoggerFrom(ctx).V(1).Info("refreshed pool member's pod metadata", "sandbox", klog.KObj(m), "templateHash", hash)
		case apierrors.IsNotFound(err):
			// gone
		case apierrors.IsConflict(err):
			// Changed since the cache saw it: bound, or written by the Sandbox controller (which
			// records the pod name and status of members it did not create, as after a take-over
			// from another controller), whose writes do not wake the pool. The conflict makes
			// Reconcile look again soon (quiet), not an error.
			errs = append(errs, fmt.Errorf("refreshing pool member %s: %w", m.Name, err))
		default:
			errs = append(errs, fmt.Errorf("refreshing pool member %s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}

// labelPublicPodTemplateHash is a label the public agent-sandbox controller puts on its pool
// members (the hash of the template's podTemplate, deprecated there); sandgate neither sets nor
// reads it.
const labelPublicPodTemplateHash = "agents.x-k8s.io/sandbox-pod-template-hash"

// memberLabelsPatch is the label part of a refresh: the current version's template hash, and
// the labels the public agent-sandbox controller puts on the members it makes that sandgate's
// members do not carry, removed. Its members are labelled launch-type=warm from their creation,
// which to the binding guard marks a Sandbox bound before (sandgate labels launch-type only
// when it binds), and created-by=controller, which a bound Sandbox would pass off as its
// claim's; for sandgate's own members removing them changes nothing.
func memberLabelsPatch(hash string) map[string]any {
	return map[string]any{
		agentsv1beta1.LabelSandboxTemplateHash: hash,
		agentsv1beta1.LabelLaunchType:          nil,
		agentsv1beta1.LabelCreatedBy:           nil,
		labelPublicPodTemplateHash:             nil,
	}
}

// mapPatch is the merge patch that turns map have into want: want's entries, and null for
// the keys want no longer has.
func mapPatch(have, want map[string]string) map[string]any {
	out := make(map[string]any, len(have)+len(want))
	for k := range have {
		out[k] = nil
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

// createMembers creates n members in growing batches, stopping at the first batch with an
// error, and returns how many it created.
func (r *warmPoolReconciler) createMembers(ctx context.Context, pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, n int) (int, error) {
	key := client.ObjectKeyFromObject(pool)
	created := 0
	for batch := 1; n > 0; batch = min(2*batch, maxCreateBatch) {
		size := min(batch, n)
		n -= size
		members := make([]*agentsv1beta1.Sandbox, size)
		items := make([]string, size)
		used := map[string]bool{}
		for i := range members {
			members[i] = newPoolMember(pool, tmpl, !r.WarmPool.DisableEviction)
			for attempt := 1; attempt < maxNameAttempts && r.nameTaken(ctx, members[i], used); attempt++ {
				members[i] = newPoolMember(pool, tmpl, !r.WarmPool.DisableEviction)
			}
			used[members[i].Name] = true
			items[i] = createItem(sandboxKind, members[i].Name)
		}
		r.expected.expect(key, items...)
		var wg sync.WaitGroup
		errs := make([]error, size)
		for i, sb := range members {
			wg.Go(func() {
				if err := r.Client.Create(ctx, sb); err != nil {
					r.expected.observe(key, items[i])
					errs[i] = fmt.Errorf("creating pool member: %w", err)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err == nil {
				created++
			}
		}
		if err := errors.Join(errs...); err != nil {
			return created, err
		}
	}
	return created, nil
}

// maxNameAttempts bounds the names createMembers tries for one member before it sends the
// last one anyway (the create then fails with 409 and the next reconcile makes another).
const maxNameAttempts = 8

// nameTaken reports whether sb's name is one the cache has a Sandbox of, or one of used. Five
// random characters collide once in 14 million per pair: a pool of hundreds refilling beside
// its used members would otherwise hit one every few dozen refills, each a 409 (the API
// server retries collisions of names it generates; these it does not generate).
func (r *warmPoolReconciler) nameTaken(ctx context.Context, sb *agentsv1beta1.Sandbox, used map[string]bool) bool {
	if used[sb.Name] {
		return true
	}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(sb), &agentsv1beta1.Sandbox{})
	return err == nil
}

// newPoolMember is a new member of pool built from tmpl, named <pool>-<random> as GenerateName
// would name it. The name is chosen here rather than by the API server so that the pool's
// expectations know it before the create is sent (its watch event may come first);
// createMembers picks one the namespace does not have yet (nameTaken). With evictable, and
// unless the template says itself whether its pods are safe to evict, the member is marked
// so that its pod is while it is idle (AnnotationSafeToEvict).
func newPoolMember(pool *extv1beta1.SandboxWarmPool, tmpl *extv1beta1.SandboxTemplate, evictable bool) *agentsv1beta1.Sandbox {
	// The member's blueprint is policy.TemplateBlueprint verbatim, so that what it is hashes to
	// its label, which is what the binding guard checks against a claim's stamp.
	sb := sandboxFromTemplate(tmpl, policy.TemplateBlueprint(tmpl))
	sb.Name = names.SimpleNameGenerator.GenerateName(pool.Name + "-")
	sb.Namespace = pool.Namespace
	sb.Annotations[agentsv1beta1.AnnotationPodName] = sb.Name // its pod's, recorded without a write of its own
	sb.Labels[agentsv1beta1.LabelWarmPoolSandbox] = agentsv1beta1.NameHash(pool.Name)
	sb.Labels[agentsv1beta1.LabelSandboxTemplateHash] = policy.TemplateHash(tmpl)
	sb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind(warmPoolKind))}
	if _, own := sb.Spec.PodTemplate.ObjectMeta.Annotations[AnnotationSafeToEvict]; evictable && !own {
		sb.Annotations[AnnotationSafeToEvict] = "true"
	}
	return sb
}
