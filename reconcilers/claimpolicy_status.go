package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	"github.com/sandgate-dev/sandgate/internal/fairshare"
)

// syncStatus writes what the policy's status says: the usage of each limit (the claims that
// exist and the reservations its ledgers hold), the metering, the conditions. A status whose
// only change is counts is written at most once per policyStatusInterval; claim-seconds, which
// change with time alone, every meteringInterval. It returns how soon to look again.
func (r *claimPolicyReconciler) syncStatus(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy, claims []extv1beta1.SandboxClaim,
	ledgers []tenancyv1alpha1.ClaimLedger, now time.Time) (time.Duration, error) {
	nn := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	old := p.DeepCopy()
	pending := r.meter.pending(nn)
	st := r.usage(p, claims, ledgers)
	r.meterStatus(old, &st, pending)
	r.conditions(ctx, p, &st, ledgers, now)

	r.mu.Lock()
	lastWrite := r.statusWritten[nn]
	r.mu.Unlock()
	metered := old.Status.MeteredAt != nil && now.Sub(old.Status.MeteredAt.Time) < meteringInterval
	if sameButMetering(old.Status, st) && metered {
		return meteringInterval - now.Sub(old.Status.MeteredAt.Time), nil
	}
	if since := now.Sub(lastWrite); since < policyStatusInterval && conditionsSame(old.Status.Conditions, st.Conditions) && metered {
		return policyStatusInterval - since, nil
	}
	seconds, remainders := r.claimSeconds(nn, old, &st, now)
	p.Status = st
	// The whole status, not the difference patchStatus sends: its zeros are values a reader
	// sees (kubectl's Claims column shows 0, not nothing), and a difference leaves them out of
	// a status that never held them.
	wrote := !equality.Semantic.DeepEqual(old.Status, p.Status)
	if wrote {
		data, err := json.Marshal(map[string]any{"status": p.Status})
		if err != nil {
			return 0, fmt.Errorf("encoding ClaimPolicy status: %w", err)
		}
		if err := r.Client.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, data)); err != nil {
			return 0, fmt.Errorf("patching ClaimPolicy status: %w", err)
		}
	}
	if wrote {
		r.meter.written(nn, pending)
		r.mu.Lock()
		r.statusWritten[nn] = now
		for k, v := range remainders {
			r.remainders[k] = v
		}
		r.mu.Unlock()
		for tenant, s := range seconds {
			r.FairShareMetrics.ClaimSeconds(p.Namespace, p.Name, tenant, s)
		}
	}
	return meteringInterval, nil
}

// tally is the usage of one set of claims as it is being counted.
type tally struct {
	usage tenancyv1alpha1.Usage
	pools map[string]*tenancyv1alpha1.PoolUsage
}

func (t *tally) add(pool string, named map[string]bool, reserved, warm bool) {
	t.usage.Claims++
	if reserved {
		t.usage.Reserved++
	}
	if !named[pool] {
		return
	}
	pu := t.pools[pool]
	if pu == nil {
		pu = &tenancyv1alpha1.PoolUsage{PoolName: pool}
		t.pools[pool] = pu
	}
	pu.Claims++
	if warm {
		pu.WarmHeld++
	}
}

func (t *tally) done(named []string) tenancyv1alpha1.Usage {
	u := t.usage
	u.Pools = nil
	for _, pool := range named {
		if pu := t.pools[pool]; pu != nil {
			u.Pools = append(u.Pools, *pu)
		} else {
			u.Pools = append(u.Pools, tenancyv1alpha1.PoolUsage{PoolName: pool})
		}
	}
	return u
}

// usage counts the claims that exist and the reservations of the ledgers whose claims were not
// seen, for the namespace, each tenant and the unnamed creators; refusals are the ledgers'.
func (r *claimPolicyReconciler) usage(p *tenancyv1alpha1.ClaimPolicy, claims []extv1beta1.SandboxClaim, ledgers []tenancyv1alpha1.ClaimLedger) tenancyv1alpha1.ClaimPolicyStatus {
	named := fairshare.NamedPools(p)
	isNamed := map[string]bool{}
	for _, pool := range named {
		isNamed[pool] = true
	}
	ns := &tally{pools: map[string]*tenancyv1alpha1.PoolUsage{}}
	tenants := map[string]*tally{"": {pools: map[string]*tenancyv1alpha1.PoolUsage{}}}
	for _, t := range p.Spec.Tenants {
		tenants[t.Name] = &tally{pools: map[string]*tenancyv1alpha1.PoolUsage{}}
	}
	exist := map[string]bool{}
	for i := range claims {
		c := &claims[i]
		exist[c.Annotations[tenancyv1alpha1.AnnotationReservation]] = true
		warm := r.shares.isWarmBound(c.UID)
		ns.add(c.Spec.WarmPoolRef.Name, isNamed, false, warm)
		tenants[fairshare.TenantOf(p, fairshare.IdentityOf(c))].add(c.Spec.WarmPoolRef.Name, isNamed, false, warm)
	}
	refusals := map[string]int64{}
	for _, l := range ledgers {
		for _, res := range l.Status.Reservations {
			if exist[res.ID] || r.seen.has(res.ID) {
				continue // counted as its claim (a ledger drops spent reservations in batches)
			}
			ns.add(res.Pool, isNamed, true, false)
			if t := tenants[res.Tenant]; t != nil {
				t.add(res.Pool, isNamed, true, false)
			}
		}
		for _, x := range l.Status.Refusals {
			refusals[x.Tenant] += x.Count
		}
	}
	st := tenancyv1alpha1.ClaimPolicyStatus{ObservedGeneration: p.Generation, Usage: ns.done(named)}
	for _, t := range p.Spec.Tenants {
		ts := tenancyv1alpha1.TenantStatus{Name: t.Name, Usage: tenants[t.Name].done(named)}
		ts.Refusals = refusals[t.Name]
		st.Tenants = append(st.Tenants, ts)
	}
	st.Unnamed = &tenancyv1alpha1.TenantStatus{Name: tenancyv1alpha1.UnnamedTenant, Usage: tenants[""].done(named)}
	st.Unnamed.Refusals = refusals[""]
	return st
}

// meterStatus carries the old status's warm hits and cold starts over, plus those counted
// since, and its claim-seconds and their time (claimSeconds brings them up to date).
func (r *claimPolicyReconciler) meterStatus(old *tenancyv1alpha1.ClaimPolicy, st *tenancyv1alpha1.ClaimPolicyStatus, pending map[string]meterCount) {
	st.MeteredAt = old.Status.MeteredAt
	for _, ts := range tenantStatuses(st) {
		name := statusTenant(ts.Name)
		if prev := findTenantStatus(&old.Status, ts.Name); prev != nil {
			ts.WarmHits, ts.ColdStarts, ts.ClaimSeconds = prev.WarmHits, prev.ColdStarts, prev.ClaimSeconds
		}
		ts.WarmHits += pending[name].warmHits
		ts.ColdStarts += pending[name].coldStarts
	}
}

// claimSeconds adds to each tenant's claim-seconds the time since the old status was metered
// times the claims that existed then (the old status's counts: counts change only at the
// events that write the status, so the sum is exact to the time an event takes to arrive),
// keeping the fractions for the next write. It returns the seconds added, by metric tenant,
// and the new fractions.
func (r *claimPolicyReconciler) claimSeconds(nn types.NamespacedName, old *tenancyv1alpha1.ClaimPolicy, st *tenancyv1alpha1.ClaimPolicyStatus, now time.Time) (map[string]float64, map[meterKey]float64) {
	at := metav1.NewTime(now)
	elapsed := 0.0
	if old.Status.MeteredAt != nil {
		elapsed = now.Sub(old.Status.MeteredAt.Time).Seconds()
	}
	st.MeteredAt = &at
	added := map[string]float64{}
	remainders := map[meterKey]float64{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ts := range tenantStatuses(st) {
		prev := findTenantStatus(&old.Status, ts.Name)
		if prev == nil || elapsed <= 0 {
			continue
		}
		k := meterKey{nn, statusTenant(ts.Name)}
		s := float64(prev.Claims-prev.Reserved)*elapsed + r.remainders[k]
		whole := math.Floor(s)
		ts.ClaimSeconds += int64(whole)
		remainders[k] = s - whole
		added[statusTenant(ts.Name)] = float64(prev.Claims-prev.Reserved) * elapsed
	}
	return added, remainders
}

// conditions sets Counted, WithinLimits and PoolsFound.
func (r *claimPolicyReconciler) conditions(ctx context.Context, p *tenancyv1alpha1.ClaimPolicy, st *tenancyv1alpha1.ClaimPolicyStatus, ledgers []tenancyv1alpha1.ClaimLedger, now time.Time) {
	st.Conditions = append([]metav1.Condition(nil), p.Status.Conditions...)
	set := func(typ string, ok bool, reasonOK, reasonNot, msg string) {
		status, reason := metav1.ConditionTrue, reasonOK
		if !ok {
			status, reason = metav1.ConditionFalse, reasonNot
		}
		setCondition(&st.Conditions, p.Generation, now, typ, status, reason, msg)
	}
	wanted := fairshare.Ledgers(p)
	counted := len(ledgers) == len(wanted)
	var names []string
	for _, l := range ledgers {
		counted = counted && l.Status.CountedAt != nil && l.Status.CountedGeneration == p.Generation
		names = append(names, l.Name)
	}
	msg := fmt.Sprintf("admission reserves claims in ClaimLedgers %s", strings.Join(names, ", "))
	if len(wanted) == 0 {
		msg = "no limit of the policy is checked at admission (it has warm shares only)"
	}
	set(tenancyv1alpha1.ConditionCounted, counted, tenancyv1alpha1.ReasonCounted, tenancyv1alpha1.ReasonCounting, msg)

	above := limitsAbove(p, st)
	set(tenancyv1alpha1.ConditionWithinLimits, len(above) == 0, tenancyv1alpha1.ReasonUsageBelowLimit, tenancyv1alpha1.ReasonUsageAboveLimit,
		orNone(strings.Join(above, "; "), "every usage is within its limit",
			"new claims are refused until usage is below the limit; the claims above it were admitted before it was lowered and are not ended"))

	var missing []string
	for _, pool := range fairshare.NamedPools(p) {
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: pool}, &extv1beta1.SandboxWarmPool{}); err != nil {
			missing = append(missing, pool)
		}
	}
	set(tenancyv1alpha1.ConditionPoolsFound, len(missing) == 0, tenancyv1alpha1.ReasonPoolsFound, tenancyv1alpha1.ReasonPoolNotFound,
		orNone(strings.Join(missing, ", "), "every pool the policy names exists", "SandboxWarmPools named by the policy that the namespace does not have"))
}

// limitsAbove lists the limits of p whose usage in st is above them.
func limitsAbove(p *tenancyv1alpha1.ClaimPolicy, st *tenancyv1alpha1.ClaimPolicyStatus) []string {
	var out []string
	check := func(path string, used, limit int32) {
		if used > limit {
			out = append(out, fmt.Sprintf("%s: %d claims, limit %d", path, used, limit))
		}
	}
	poolClaims := func(u tenancyv1alpha1.Usage, pool string) int32 {
		for _, pu := range u.Pools {
			if pu.PoolName == pool {
				return pu.Claims
			}
		}
		return 0
	}
	if p.Spec.MaxClaims != nil {
		check("spec.maxClaims", st.Claims, *p.Spec.MaxClaims)
	}
	for i, l := range p.Spec.PerPool {
		check(fmt.Sprintf("spec.perPool[%d] (%s)", i, l.PoolName), poolClaims(st.Usage, l.PoolName), l.MaxClaims)
	}
	for i, t := range p.Spec.Tenants {
		ts := findTenantStatus(st, t.Name)
		if ts == nil {
			continue
		}
		if t.MaxClaims != nil {
			check(fmt.Sprintf("spec.tenants[%d].maxClaims (%s)", i, t.Name), ts.Claims, *t.MaxClaims)
		}
		for j, l := range t.PerPool {
			check(fmt.Sprintf("spec.tenants[%d].perPool[%d] (%s, %s)", i, j, t.Name, l.PoolName), poolClaims(ts.Usage, l.PoolName), l.MaxClaims)
		}
	}
	return out
}

func orNone(list, none, prefix string) string {
	if list == "" {
		return none
	}
	return prefix + ": " + list
}

// tenantStatuses are pointers to every tenant entry of st, the unnamed one included.
func tenantStatuses(st *tenancyv1alpha1.ClaimPolicyStatus) []*tenancyv1alpha1.TenantStatus {
	out := make([]*tenancyv1alpha1.TenantStatus, 0, len(st.Tenants)+1)
	for i := range st.Tenants {
		out = append(out, &st.Tenants[i])
	}
	if st.Unnamed != nil {
		out = append(out, st.Unnamed)
	}
	return out
}

// findTenantStatus finds a tenant's entry by its status name ("unnamed" for the unnamed).
func findTenantStatus(st *tenancyv1alpha1.ClaimPolicyStatus, name string) *tenancyv1alpha1.TenantStatus {
	for _, ts := range tenantStatuses(st) {
		if ts.Name == name {
			return ts
		}
	}
	return nil
}

// statusTenant is the tenant a status entry counts ("" for the unnamed entry).
func statusTenant(name string) string {
	if name == tenancyv1alpha1.UnnamedTenant {
		return ""
	}
	return name
}

// sameButMetering reports whether two statuses differ in claim-seconds and their time only.
func sameButMetering(a, b tenancyv1alpha1.ClaimPolicyStatus) bool {
	strip := func(s tenancyv1alpha1.ClaimPolicyStatus) tenancyv1alpha1.ClaimPolicyStatus {
		s = *s.DeepCopy()
		s.MeteredAt = nil
		for _, ts := range tenantStatuses(&s) {
			ts.ClaimSeconds = 0
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

func conditionsSame(a, b []metav1.Condition) bool {
	for _, c := range b {
		if o := meta.FindStatusCondition(a, c.Type); o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			return false
		}
	}
	return len(a) == len(b)
}
