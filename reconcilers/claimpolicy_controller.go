package reconcilers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

// claimPolicyControllerName names the ClaimPolicy controller in logs and metrics.
const claimPolicyControllerName = "claimpolicy"

// DefaultClaimReservationTTL is how long a reservation whose claim never appears is counted:
// longer than a create can take after its admission (the API server answers a request within
// its one-minute timeout), so that no claim on its way loses its count. A create refused after
// admission (a later webhook, a ResourceQuota, the schema) holds its slot that long.
const DefaultClaimReservationTTL = 2 * time.Minute

// Timings of the ledgers' upkeep (fairshare.NeedsWrite, RecountLedger).
const (
	// reservationSettle is how long a reservation of a claim name that a claim created before
	// it holds is kept (a create refused as AlreadyExists).
	reservationSettle = 5 * time.Second
	// confirmBatch and confirmDelay: confirmed reservations are dropped from a ledger once
	// there are that many, or the oldest is that old.
	confirmBatch = 32
	confirmDelay = time.Second
	// policyStatusInterval is the least time between two status writes of a policy that
	// change only counts; meteringInterval how often claim-seconds are brought up to date
	// when nothing else changes.
	policyStatusInterval = time.Second
	meteringInterval     = 30 * time.Second
)

// claimPolicyReconciler keeps each ClaimPolicy's ledgers and status (docs/fair-share.md): it
// counts the claims of the namespace against the policy, drops the reservations admission made
// whose claims it now counts or that never became claims, creates the ledgers the policy needs
// (moving the reservations of those it no longer needs, which it retires first, so that no
// admission writes one after the move), and writes the usage and metering into the status.
// It runs on the leader only; admission (every replica) only adds reservations.
type claimPolicyReconciler struct {
	Client           client.Client
	Metrics          *Metrics
	FairShareMetrics *fairshare.Metrics
	Clock            clock.PassiveClock
	// ReservationTTL: see DefaultClaimReservationTTL; 0 means the default.
	ReservationTTL time.Duration

	meter  *policyMeter
	shares *warmShares
	seen   *seenReservations

	mu sync.Mutex
	// statusWritten is when each policy's status was last written; remainders are the
	// fractions of claim-seconds not written yet, by policy and tenant.
	statusWritten map[types.NamespacedName]time.Time
	remainders    map[meterKey]float64
}

// +kubebuilder:rbac:groups=policy.sandgate.dev,resources=claimpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.sandgate.dev,resources=claimpolicies/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=policy.sandgate.dev,resources=claimledgers,verbs=get;list;watch;create;patch;delete

// SetupWithManager registers the controller and its watches.
func (r *claimPolicyReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ReservationTTL == 0 {
		r.ReservationTTL = DefaultClaimReservationTTL
	}
	r.seen = newSeenReservations(r.ReservationTTL + reservationSettle)
	r.statusWritten = map[types.NamespacedName]time.Time{}
	r.remainders = map[meterKey]float64{}
	return ctrl.NewControllerManagedBy(mgr).
		Named(claimPolicyControllerName).
		WithOptions(opts).
		For(&tenancyv1alpha1.ClaimPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A ledger changed: a reservation admission made (whose create may fail after it, and
		// must then end at its TTL), or a ledger created or deleted by someone.
		Watches(&tenancyv1alpha1.ClaimLedger{}, handler.EnqueueRequestsFromMapFunc(policyOfLedger)).
		// Claims count from their creation to their deletion; the creation also spends the
		// reservation the claim carries (seen, even should the claim be gone at the recount).
		Watches(&extv1beta1.SandboxClaim{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfClaim),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// A binding (or the end of one) changes the warm members a tenant holds.
		Watches(&agentsv1beta1.Sandbox{}, handler.EnqueueRequestsFromMapFunc(r.policiesOfNamespace),
			builder.WithPredicates(boundSandboxChanged())).
		Complete(r)
}

// policyOfLedger wakes a ledger's policy.
func policyOfLedger(_ context.Context, obj client.Object) []reconcile.Request {
	l, ok := obj.(*tenancyv1alpha1.ClaimLedger)
	if !ok || l.Spec.PolicyName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: l.Spec.PolicyName}}}
}

// policiesOfClaim records the reservation a claim carries as seen and wakes its namespace's
// policies.
func (r *claimPolicyReconciler) policiesOfClaim(ctx context.Context, obj client.Object) []reconcile.Request {
	r.seen.seeClaim(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		obj.GetAnnotations()[tenancyv1alpha1.AnnotationReservation], r.Clock.Now())
	return r.policiesOfNamespace(ctx, obj)
}

// policiesOfNamespace wakes every policy of obj's namespace.
func (r *claimPolicyReconciler) policiesOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var list tenancyv1alpha1.ClaimPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing ClaimPolicies", "namespace", obj.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

// boundSandboxChanged passes the Sandbox events that change which claims hold a warm member:
// a binding's labels set or removed, a bound Sandbox created or deleted.
func boundSandboxChanged() predicate.Funcs {
	bound := func(obj client.Object) string {
		l := obj.GetLabels()
		return l[agentsv1beta1.LabelClaimUID] + "/" + l[agentsv1beta1.LabelLaunchType]
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return e.Object.GetLabels()[agentsv1beta1.LabelClaimUID] != "" },
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetLabels()[agentsv1beta1.LabelClaimUID] != "" },
		UpdateFunc:  func(e event.UpdateEvent) bool { return bound(e.ObjectOld) != bound(e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// Reconcile counts one policy's claims into its ledgers and status.
func (r *claimPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.Metrics.reconciled(claimPolicyControllerName)
	p := &tenancyv1alpha1.ClaimPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var claims extv1beta1.SandboxClaimList
	if err := r.Client.List(ctx, &claims, client.InNamespace(p.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing claims: %w", err)
	}
	var ledgers tenancyv1alpha1.ClaimLedgerList
	if err := r.Client.List(ctx, &ledgers, client.InNamespace(p.Namespace), client.MatchingLabels{tenancyv1alpha1.LabelLedgerPolicy: p.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing ledgers: %w", err)
	}
	now := r.Clock.Now()
	views := r.claimViews(p, claims.Items, now)
	wanted, wait, err := r.syncLedgers(ctx, p, views, ledgers.Items, now)
	if err != nil {
		return quiet(ctrl.Result{}, err)
	}
	statusWait, err := r.syncStatus(ctx, p, claims.Items, wanted, now)
	if err != nil {
		return quiet(ctrl.Result{}, err)
	}
	return requeueWithin(requeueWithin(ctrl.Result{}, wait), statusWait), nil
}

func (r *claimPolicyReconciler) forget(nn types.NamespacedName) {
	r.FairShareMetrics.Forget(nn.Namespace, nn.Name)
	r.meter.forget(nn)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.statusWritten, nn)
	for k := range r.remainders {
		if k.policy == nn {
			delete(r.remainders, k)
		}
	}
}

// claimViews are the claims as policy p counts them. Every claim the cache shows is seen.
func (r *claimPolicyReconciler) claimViews(p *tenancyv1alpha1.ClaimPolicy, claims []extv1beta1.SandboxClaim, now time.Time) []fairshare.ClaimView {
	out := make([]fairshare.ClaimView, 0, len(claims))
	for i := range claims {
		c := &claims[i]
		id := c.Annotations[tenancyv1alpha1.AnnotationReservation]
		r.seen.seeClaim(types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, id, now)
		out = append(out, fairshare.ClaimView{Name: c.Name, Reservation: id, Created: c.CreationTimestamp.Time,
			Tenant: fairshare.TenantOf(p, fairshare.IdentityOf(c)), Pool: fairshare.PoolKey(p, c.Spec.WarmPoolRef.Name)})
	}
	return out
}

// syncLedgers brings p's ledgers up to date and returns the ones it wants (as written), and
// how soon it should look again (confirmations it left for a batch).
//
// A change of the policy that moves its counting (namespace-wide limits added or removed, a
// tenant's limits added or removed) goes in three steps, each a conditional write: the ledgers
// no longer wanted are retired (admission adds nothing to a retired ledger: a write racing the
// retirement conflicts, reads it retired and is answered "retry"); the wanted ones are created
// or recounted with the retired ones' reservations moved in; the retired ones are deleted.
func (r *claimPolicyReconciler) syncLedgers(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy, views []fairshare.ClaimView,
	existing []tenancyv1alpha1.ClaimLedger, now time.Time) ([]tenancyv1alpha1.ClaimLedger, time.Duration, error) {
	want := map[string]tenancyv1alpha1.ClaimLedgerSpec{}
	for _, spec := range fairshare.Ledgers(p) {
		want[fairshare.LedgerName(p.Name, spec.Tenant)] = spec
	}
	have := map[string]*tenancyv1alpha1.ClaimLedger{}
	var retired []*tenancyv1alpha1.ClaimLedger
	for i := range existing {
		l := &existing[i]
		if _, ok := want[l.Name]; ok && !l.Status.Retired && l.Spec == want[l.Name] {
			have[l.Name] = l
			continue
		}
		if !l.Status.Retired {
			if err := r.writeLedger(ctx, l, map[string]any{"retired": true}); err != nil {
				return nil, 0, fmt.Errorf("retiring ClaimLedger %s: %w", l.Name, err)
			}
		}
		retired = append(retired, l)
	}
	// What the retired ledgers still hold: reservations whose claims were not counted yet.
	var moved []tenancyv1alpha1.Reservation
	movedRefusals := map[string]int64{}
	for _, l := range retired {
		rc := r.recount(p, l, views, now)
		moved = append(moved, rc.Status.Reservations...)
		for _, x := range l.Status.Refusals {
			movedRefusals[x.Tenant] += x.Count
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	var wanted []tenancyv1alpha1.ClaimLedger
	var wait time.Duration
	for _, name := range names {
		spec := want[name]
		l := have[name]
		if l == nil {
			// A retired ledger of the same name (a tenant removed and added back) goes first.
			for _, old := range retired {
				if old.Name == name {
					rv := old.ResourceVersion
					if err := r.Client.Delete(ctx, old, client.Preconditions{ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
						return nil, 0, fmt.Errorf("deleting retired ClaimLedger %s: %w", old.Name, err)
					}
				}
			}
			created, err := r.createLedger(ctx, p, spec, views, moved, movedRefusals, now)
			if err != nil {
				return nil, 0, err
			}
			wanted = append(wanted, *created)
			continue
		}
		rc := r.recount(p, l, views, now)
		kept := len(rc.Status.Reservations)
		rc.Status.Reservations = appendMissing(rc.Status.Reservations, inScope(moved, spec.Tenant))
		write, after := fairshare.NeedsWrite(p, l, rc, now, confirmBatch, confirmDelay)
		if write || len(rc.Status.Reservations) > kept { // or reservations moved in from retired ledgers
			if err := r.writeLedger(ctx, l, map[string]any{"countedAt": rc.Status.CountedAt, "countedGeneration": rc.Status.CountedGeneration,
				"counted": rc.Status.Counted, "reservations": rc.Status.Reservations}); err != nil {
				return nil, 0, fmt.Errorf("recounting ClaimLedger %s: %w", l.Name, err)
			}
		}
		wait = minPositive(minPositive(wait, after), r.nextExpiry(rc.Status.Reservations, now))
		wanted = append(wanted, *l)
	}
	for _, l := range retired {
		rv := l.ResourceVersion
		if err := r.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
			// A reservation landed after the retirement's read: move it next time.
			return nil, 0, fmt.Errorf("deleting retired ClaimLedger %s: %w", l.Name, err)
		}
	}
	return wanted, wait, nil
}

// nextExpiry is how soon the first of rs may be dropped for its claim never coming: after its
// TTL, or after settling when it names a claim (the name may be taken).
func (r *claimPolicyReconciler) nextExpiry(rs []tenancyv1alpha1.Reservation, now time.Time) time.Duration {
	var next time.Duration
	for _, x := range rs {
		d := x.At.Add(r.ReservationTTL).Sub(now)
		if settle := x.At.Add(reservationSettle).Sub(now); x.Claim != "" && settle > 0 {
			d = settle
		}
		next = minPositive(next, max(d, time.Millisecond))
	}
	return next
}

func (r *claimPolicyReconciler) recount(p *tenancyv1alpha1.ClaimPolicy, l *tenancyv1alpha1.ClaimLedger, views []fairshare.ClaimView, now time.Time) fairshare.Recount {
	return fairshare.RecountLedger(p, fairshare.RecountInput{Ledger: l, Claims: views, Seen: r.seen.has,
		SeenName: func(name string) bool {
			return r.seen.seenName(types.NamespacedName{Namespace: p.Namespace, Name: name})
		},
		Now: now, TTL: r.ReservationTTL, Settle: reservationSettle})
}

// createLedger creates a wanted ledger, counted, with the moved reservations and refusals of
// its scope.
func (r *claimPolicyReconciler) createLedger(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy, spec tenancyv1alpha1.ClaimLedgerSpec,
	views []fairshare.ClaimView, moved []tenancyv1alpha1.Reservation, movedRefusals map[string]int64, now time.Time) (*tenancyv1alpha1.ClaimLedger, error) {
	l := &tenancyv1alpha1.ClaimLedger{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: fairshare.LedgerName(p.Name, spec.Tenant),
			Labels: map[string]string{tenancyv1alpha1.LabelLedgerPolicy: p.Name},
			// Deleted with its policy. No blockOwnerDeletion: nothing need wait for a ledger.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "ClaimPolicy",
				Name: p.Name, UID: p.UID, Controller: ptr.To(true)}},
		},
		Spec: spec,
	}
	rc := r.recount(p, l, views, now)
	l.Status = rc.Status
	l.Status.Reservations = inScope(moved, spec.Tenant)
	for tenant, n := range movedRefusals {
		if spec.Tenant == "" || tenant == spec.Tenant {
			l.Status.Refusals = append(l.Status.Refusals, tenancyv1alpha1.LedgerRefusals{Tenant: tenant, Count: n})
		}
	}
	sort.Slice(l.Status.Refusals, func(i, j int) bool { return l.Status.Refusals[i].Tenant < l.Status.Refusals[j].Tenant })
	if err := r.Client.Create(ctx, l); err != nil {
		r.FairShareMetrics.LedgerWrite(fairshare.WriterLeader, ledgerResult(err))
		return nil, fmt.Errorf("creating ClaimLedger %s: %w", l.Name, err)
	}
	r.FairShareMetrics.LedgerWrite(fairshare.WriterLeader, fairshare.ResultSuccess)
	ctrl.LoggerFrom(ctx).Info("created claim ledger", "ledger", l.Name, "tenant", spec.Tenant, "moved", len(l.Status.Reservations))
	return l, nil
}

// writeLedger patches status fields of l on condition that l is what the cache showed, and
// updates l with the answer.
func (r *claimPolicyReconciler) writeLedger(ctx context.Context, l *tenancyv1alpha1.ClaimLedger, status map[string]any) error {
	err := mergePatch(ctx, r.Client, l, map[string]any{"metadata": map[string]any{"resourceVersion": l.ResourceVersion}, "status": status})
	r.FairShareMetrics.LedgerWrite(fairshare.WriterLeader, ledgerResult(err))
	return err
}

func ledgerResult(err error) string {
	switch {
	case err == nil:
		return fairshare.ResultSuccess
	case apierrors.IsConflict(err):
		return fairshare.ResultConflict
	}
	return fairshare.ResultError
}

// inScope are the reservations of tenant ("" for every tenant).
func inScope(rs []tenancyv1alpha1.Reservation, tenant string) []tenancyv1alpha1.Reservation {
	if tenant == "" {
		return slices.Clone(rs)
	}
	var out []tenancyv1alpha1.Reservation
	for _, x := range rs {
		if x.Tenant == tenant {
			out = append(out, x)
		}
	}
	return out
}

// appendMissing appends the reservations of add whose IDs rs does not hold.
func appendMissing(rs, add []tenancyv1alpha1.Reservation) []tenancyv1alpha1.Reservation {
	for _, x := range add {
		if !slices.ContainsFunc(rs, func(y tenancyv1alpha1.Reservation) bool { return y.ID == x.ID }) {
			rs = append(rs, x)
		}
	}
	return rs
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
