package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	"github.com/sandgate-dev/sandgate/internal/demand"
)

// autoscalerControllerName names the WarmPoolAutoscaler controller in logs and metrics.
const autoscalerControllerName = "warmpoolautoscaler"

// AutoscalerFieldManager is the field manager of the autoscaler's writes of a pool's
// spec.replicas (through /scale): how it tells its own writes from another writer's in the
// pool's managedFields.
const AutoscalerFieldManager = "sandgate-warmpoolautoscaler"

const (
	// autoscalerDemandRecheck is how often an autoscaler whose pool had claims in the long
	// window looks again: the estimate falls as arrivals age out, with no event to say so.
	autoscalerDemandRecheck = 2 * time.Second
	// autoscalerStatusRefresh bounds how often a status whose only change is the demand
	// estimate or the ready count is written: during a burst they change with every claim,
	// and the decision (desired replicas, conditions) is written at once anyway.
	autoscalerStatusRefresh = 10 * time.Second
)

// autoscalerReconciler keeps each WarmPoolAutoscaler's pool at the replicas its demand asks
// for (warmpoolautoscaler_desired.go), writing only the pool's /scale subresource, and only
// while no other writer sets them (warmpoolautoscaler_conflict.go). Demand comes from the
// recorder the stamping webhook and the claim informer feed (internal/demand); an arrival
// wakes the pool's autoscalers at once (warmpoolautoscaler_events.go), so scale-up follows
// admission, not a timer.
type autoscalerReconciler struct {
	Client client.Client
	// APIReader reads the pool with its managedFields, which the cache strips.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Metrics   *Metrics
	Clock     clock.PassiveClock
	Demand    *demand.Recorder

	mu    sync.Mutex
	state map[types.NamespacedName]*autoscalerState
	// written is each autoscaler's status as this process last wrote it, until the cache shows it.
	written ownStatuses[autoscalingv1alpha1.WarmPoolAutoscalerStatus]
	// wake carries the pools the demand recorder saw a claim of; wakePending the pools with
	// an event in it (one at a time per pool).
	wake        chan event.GenericEvent
	wakePending sync.Map
}

// autoscalerState is what one autoscaler keeps in memory. A new leader starts it empty and
// fills it from the status (the last scale) and the pool (the replicas the history starts
// with).
type autoscalerState struct {
	history          autoscalerHistory
	lastUp, lastDown time.Time
	// verified is the pool's spec.replicas at which this process last knew the autoscaler
	// owned the field (it wrote it, or read it in the managedFields); verifiedOK says it knows.
	verified   int32
	verifiedOK bool
	// conflict is the other writer foreignReplicasWriter found, while the pool's replicas
	// are still conflictReplicas.
	conflict         *autoscalerConflict
	conflictReplicas int32
	// statusWritten is when this process last wrote the status.
	statusWritten time.Time
}

func (r *autoscalerReconciler) stateOf(key types.NamespacedName, wpa *autoscalingv1alpha1.WarmPoolAutoscaler) *autoscalerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[types.NamespacedName]*autoscalerState{}
	}
	st := r.state[key]
	if st == nil {
		st = &autoscalerState{}
		if t := wpa.Status.LastScaleTime; t != nil {
			switch {
			case strings.HasPrefix(wpa.Status.LastScaleReason, autoscalingv1alpha1.EventScaledUp):
				st.lastUp = t.Time
			case strings.HasPrefix(wpa.Status.LastScaleReason, autoscalingv1alpha1.EventScaledDown):
				st.lastDown = t.Time
			}
		}
		r.state[key] = st
	}
	return st
}

// forget drops what this process keeps of an autoscaler that is gone. The pool's demand
// stays: another autoscaler may read it, and admission records it for every pool anyway.
func (r *autoscalerReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.state, key)
	r.mu.Unlock()
	r.written.forget(key)
	r.Metrics.autoscalerGone(key)
}

// autoscalerEvent is an event decided during a reconcile, sent after the status write.
type autoscalerEvent struct{ typ, reason, msg string }

// Reconcile decides the pool's replicas, writes them to its /scale when they change and no
// other writer sets them, and writes the status.
func (r *autoscalerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(autoscalerControllerName)
	wpa := &autoscalingv1alpha1.WarmPoolAutoscaler{}
	if err := r.Client.Get(ctx, req.NamespacedName, wpa); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wpa.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if w := r.written.newer(wpa); w != nil {
		wpa.Status = *w.DeepCopy()
	}
	now := r.Clock.Now()
	old := wpa.DeepCopy()
	st := r.stateOf(req.NamespacedName, wpa)

	var result ctrl.Result
	var errs []error
	var evs []autoscalerEvent
	pool := &extv1beta1.SandboxWarmPool{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: wpa.Namespace, Name: wpa.Spec.PoolRef.Name}, pool)
	switch {
	case apierrors.IsNotFound(err):
		// The pool watch brings the autoscaler back when the pool appears.
		msg := fmt.Sprintf("SandboxWarmPool %s not found", wpa.Spec.PoolRef.Name)
		evs = r.setAbleToScale(wpa, now, metav1.ConditionFalse, autoscalingv1alpha1.ReasonPoolNotFound, msg)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading pool: %w", err)
	default:
		result, evs, err = r.scale(ctx, wpa, pool, st, now)
		errs = append(errs, err)
	}
	wpa.Status.ObservedGeneration = wpa.Generation

	wrote, refresh, err := r.writeStatus(ctx, old, wpa, st, now)
	if err != nil {
		errs = append(errs, fmt.Errorf("patching autoscaler status: %w", err))
	}
	result = requeueWithin(result, refresh)
	if wrote || err == nil {
		for _, ev := range evs {
			r.Recorder.Eventf(wpa, nil, ev.typ, ev.reason, "Scaling", "%s", ev.msg)
		}
	}
	return quiet(result, errors.Join(errs...))
}

// scale decides and, when the decision changes the pool and nothing else writes its
// replicas, writes them; it fills in the status and returns the events to send.
func (r *autoscalerReconciler) scale(ctx context.Context, wpa *autoscalingv1alpha1.WarmPoolAutoscaler, pool *extv1beta1.SandboxWarmPool,
	st *autoscalerState, now time.Time) (ctrl.Result, []autoscalerEvent, error) {
	var result ctrl.Result
	poolKey := client.ObjectKeyFromObject(pool)
	rules := autoscalerRulesOf(&wpa.Spec)
	est := r.Demand.Estimate(poolKey)
	open, schedErrs := policy.OpenSchedules(rules.schedules, now)
	for _, err := range schedErrs {
		ctrl.LoggerFrom(ctx).Info("ignoring a schedule that cannot be read", "error", err.Error())
	}
	current := int32(replicas(pool))
	d := decideReplicas(rules, current, est, open, &st.history, st.lastUp, st.lastDown, now)

	s := &wpa.Status
	s.CurrentReplicas, s.ReadyReplicas, s.DesiredReplicas = current, pool.Status.ReadyReplicas, d.replicas
	s.Demand = demandStatus(est)
	s.ActiveSchedules = open.Names
	r.Metrics.autoscalerObserved(client.ObjectKeyFromObject(wpa), d.replicas, est)
	if est.LongWindowClaims > 0 {
		result = requeueWithin(result, autoscalerDemandRecheck)
	}
	if !d.recheck.IsZero() {
		result = requeueWithin(result, max(d.recheck.Sub(now), time.Millisecond))
	}

	conflict, err := r.conflictingWriter(ctx, wpa, pool, st, rules, now)
	if err != nil {
		return result, nil, err
	}
	if conflict != nil {
		if !conflict.until.IsZero() {
			result = requeueWithin(result, max(conflict.until.Sub(now), time.Millisecond))
		}
		return result, r.setAbleToScale(wpa, now, metav1.ConditionFalse, autoscalingv1alpha1.ReasonConflictingWriter, conflict.message), nil
	}

	var evs []autoscalerEvent
	if d.replicas != current {
		if err := r.patchScale(ctx, pool, d.replicas); err != nil {
			msg := fmt.Sprintf("writing the replicas of SandboxWarmPool %s: %v", pool.Name, err)
			return result, r.setAbleToScale(wpa, now, metav1.ConditionFalse, autoscalingv1alpha1.ReasonFailedScale, msg),
				fmt.Errorf("scaling pool %s: %w", pool.Name, err)
		}
		st.verified, st.verifiedOK = d.replicas, true
		reason, direction := autoscalingv1alpha1.EventScaledUp, "up"
		if d.replicas < current {
			reason, direction = autoscalingv1alpha1.EventScaledDown, "down"
			st.lastDown = now
		} else {
			st.lastUp = now
		}
		msg := describeScale(current, d.replicas, d, est, open)
		s.LastScaleTime, s.LastScaleReason = ptrTime(now), reason+": "+msg
		s.CurrentReplicas = d.replicas
		r.Metrics.autoscalerScaled(direction)
		ctrl.LoggerFrom(ctx).V(1).Info("scaled pool", "pool", pool.Name, "from", current, "to", d.replicas, "why", msg)
		evs = append(evs, autoscalerEvent{corev1.EventTypeNormal, reason, msg})
	}
	evs = append(evs, r.setAbleToScale(wpa, now, metav1.ConditionTrue, autoscalingv1alpha1.ReasonScaleWritable,
		fmt.Sprintf("the autoscaler sets the replicas of SandboxWarmPool %s", pool.Name))...)
	setCondition(&s.Conditions, wpa.Generation, now, autoscalingv1alpha1.ConditionScalingActive, metav1.ConditionTrue, d.reason,
		scalingActiveMessage(d.reason, rules, open))
	setCondition(&s.Conditions, wpa.Generation, now, autoscalingv1alpha1.ConditionReady, metav1.ConditionTrue,
		autoscalingv1alpha1.ReasonScaling, "the pool's replicas follow demand")
	return result, evs, nil
}

// patchScale sets the pool's replicas through its /scale subresource, as any autoscaler
// would: the pool's own spec is not touched, and a pool another controller serves scales
// the same way. A merge patch of spec.replicas, under AutoscalerFieldManager.
func (r *autoscalerReconciler) patchScale(ctx context.Context, pool *extv1beta1.SandboxWarmPool, n int32) error {
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	return r.Client.SubResource("scale").Patch(ctx, pool, patch,
		client.WithSubResourceBody(&autoscalingv1.Scale{}), client.FieldOwner(AutoscalerFieldManager))
}

// setAbleToScale sets AbleToScale (and, when it is False, ScalingActive and Ready with the
// same reason) and returns the events its change calls for: one when a conflict starts, one
// when it ends, one when writing starts failing; none while it stays as it was, however often
// the autoscaler reconciles.
func (r *autoscalerReconciler) setAbleToScale(wpa *autoscalingv1alpha1.WarmPoolAutoscaler, now time.Time, status metav1.ConditionStatus,
	reason, msg string) []autoscalerEvent {
	conds := &wpa.Status.Conditions
	before := meta.FindStatusCondition(*conds, autoscalingv1alpha1.ConditionAbleToScale)
	wasConflict := before != nil && before.Status == metav1.ConditionFalse && before.Reason == autoscalingv1alpha1.ReasonConflictingWriter
	changed := before == nil || before.Status != status || before.Reason != reason
	setCondition(conds, wpa.Generation, now, autoscalingv1alpha1.ConditionAbleToScale, status, reason, msg)
	if status == metav1.ConditionFalse {
		setCondition(conds, wpa.Generation, now, autoscalingv1alpha1.ConditionScalingActive, metav1.ConditionFalse, reason, msg)
		setCondition(conds, wpa.Generation, now, autoscalingv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	}
	switch {
	case !changed:
		return nil
	case status == metav1.ConditionFalse && reason == autoscalingv1alpha1.ReasonConflictingWriter:
		return []autoscalerEvent{{corev1.EventTypeWarning, autoscalingv1alpha1.EventConflictingWriter, msg + "; the autoscaler stops writing them"}}
	case status == metav1.ConditionFalse && reason == autoscalingv1alpha1.ReasonFailedScale:
		return []autoscalerEvent{{corev1.EventTypeWarning, autoscalingv1alpha1.EventFailedScale, msg}}
	case wasConflict:
		return []autoscalerEvent{{corev1.EventTypeNormal, autoscalingv1alpha1.EventConflictResolved, "no other writer sets the pool's replicas; the autoscaler resumes"}}
	}
	return nil
}

// scalingActiveMessage says what holds the recommendation. It names no figure that moves with
// demand, so that the condition changes when the rule that decides changes, not with every
// claim (status.demand has the figures).
func scalingActiveMessage(reason string, rules autoscalerRules, open policy.OpenWindows) string {
	switch reason {
	case autoscalingv1alpha1.ReasonMinReplicas:
		return fmt.Sprintf("held at minReplicas (%d): demand asks for fewer", rules.min)
	case autoscalingv1alpha1.ReasonScheduleMinimum:
		return fmt.Sprintf("held at the minimum of schedule %s (%d): demand asks for fewer", strings.Join(open.Names, ", "), open.Minimum)
	case autoscalingv1alpha1.ReasonMaxReplicas:
		return fmt.Sprintf("held at maxReplicas (%d): demand asks for more", rules.max)
	}
	return fmt.Sprintf("the replicas follow the claims expected during one member start-up, plus %d spare", rules.spare)
}

// demandStatus is the status form of an estimate.
func demandStatus(est demand.Estimate) *autoscalingv1alpha1.DemandEstimate {
	return &autoscalingv1alpha1.DemandEstimate{
		ClaimsPerSecond:             *resource.NewMilliQuantity(int64(est.Rate*1000+0.5), resource.DecimalSI),
		ShortWindowClaims:           int32(min(est.ShortWindowClaims, 1<<31-1)),
		LongWindowClaims:            int32(min(est.LongWindowClaims, 1<<31-1)),
		MemberStartupMilliseconds:   est.Startup.Milliseconds(),
		MemberStartupSamples:        int32(est.StartupSamples),
		ExpectedClaimsDuringStartup: int32(min(est.Expected, 1<<31-1)),
	}
}

// writeStatus writes the status when it changed: at once when the pool's replicas, the last
// scale or a condition changed, and no more than every autoscalerStatusRefresh when only the
// demand estimate, the desired replicas or the ready count did (it returns when to write
// that). The first reconcile of this process
// writes what it found.
func (r *autoscalerReconciler) writeStatus(ctx context.Context, old, wpa *autoscalingv1alpha1.WarmPoolAutoscaler, st *autoscalerState,
	now time.Time) (bool, time.Duration, error) {
	// What moves with every claim or member: written at most every autoscalerStatusRefresh.
	// DesiredReplicas differs from CurrentReplicas only while the autoscaler does not write
	// (paced, or standing down): when it writes, CurrentReplicas changes with it.
	decision := func(s autoscalingv1alpha1.WarmPoolAutoscalerStatus) autoscalingv1alpha1.WarmPoolAutoscalerStatus {
		s.Demand, s.ReadyReplicas, s.DesiredReplicas = nil, 0, 0
		return s
	}
	if !equality.Semantic.DeepEqual(old.Status, wpa.Status) && equality.Semantic.DeepEqual(decision(old.Status), decision(wpa.Status)) &&
		!st.statusWritten.IsZero() {
		if wait := st.statusWritten.Add(autoscalerStatusRefresh).Sub(now); wait > 0 {
			return false, wait, nil
		}
	}
	wrote, err := patchStatus(ctx, r.Client, old, wpa, func(a *autoscalingv1alpha1.WarmPoolAutoscaler) any { return a.Status })
	if err != nil {
		return false, 0, err
	}
	if wrote {
		st.statusWritten = now
		r.written.record(wpa, wpa.Status.DeepCopy())
	}
	return wrote, 0, nil
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
