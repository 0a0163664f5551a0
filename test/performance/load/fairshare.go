package load

// One arm of the fair-share scenario (issue 36): two tenants on one pool. Tenant A creates
// claims at a steady rate, each held a while once Ready and then deleted; tenant B creates
// bursts of claims, several times the pool, each admitted claim held a while once Ready. Each
// tenant is an identity of its own (an impersonated user, bound to a role that creates
// claims), so that a ClaimPolicy can tell them apart; with Policy set, one reserves A a warm
// share of the pool and limits B's claims.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// The tenants' identities and the policy of the fair-share scenario.
const (
	TenantAUser      = "bench-tenant-a"
	TenantBUser      = "bench-tenant-b"
	fairSharePolicy  = "bench-fair-share"
	fairShareRole    = "bench-tenant"
	fairShareTenantA = "a"
	fairShareTenantB = "b"
)

// FairShareConfig is one arm of the fair-share scenario.
type FairShareConfig struct {
	Namespace string
	PodSpec   corev1.PodSpec
	PoolSize  int32
	// Duration is how long A creates claims, at ARate a second, each held AHold once Ready.
	Duration time.Duration
	ARate    float64
	AHold    time.Duration
	// B creates BBursts bursts of BBurst claims (none in the alone arm), each at BRate a
	// second, spread evenly over the middle of Duration; an admitted claim is held BHold once
	// Ready.
	BBursts, BBurst int
	BRate           float64
	BHold           time.Duration
	// Policy, when set, is the ClaimPolicy of the namespace. The arm then also measures where
	// the time of B's refusals goes (fairshare_cost.go): the operator's and the API server's
	// metrics over the load, and a control create by B beside every ControlEvery-th of B's
	// creates (0: none).
	Policy       *FairSharePolicy
	ControlEvery int
	// BForbidden leaves B without a role in the namespace: the API server refuses each of its
	// creates at authorization (403), before any admission.
	BForbidden bool
	// Floor runs the arm on the contract floor (fairshare_floor.go): the operator fills the
	// pool and is detached (Probes.DetachOperator), and the load generator serves the claims;
	// with Policy, it admits B's claims as the policy would and sends the others as dry runs.
	// PoolSize must then hold a member for every claim served (FloorPoolSize).
	Floor bool
	// PoolCreateWait bounds the wait for the pool to be full; Timeout how long a claim may
	// take to be Ready.
	PoolCreateWait, Timeout time.Duration
	Progress                io.Writer
	// APIServerProfile and WebhookServerProfile, when set, receive CPU profiles of
	// kube-apiserver and of the process answering the webhooks over the first ProfileSeconds
	// of the load (Config's fields of the same names).
	APIServerProfile, WebhookServerProfile string
	ProfileSeconds                         int
}

// FairSharePolicy is the arm's ClaimPolicy: A's guaranteed warm members of the pool, and the
// most claims B may have at once.
type FairSharePolicy struct {
	// BMaxClaims 0 is no limit on B's claims.
	AGuaranteed, BMaxClaims int32
	// BWarmMax, when set, is B's warm share of the pool at most: B's claims beyond it are
	// served cold.
	BWarmMax *int32
	// BRatePerMinute, when positive, is B's admission rate, in a bucket of BRateBurst (0: the
	// policy's default, a second's worth).
	BRatePerMinute, BRateBurst int32
}

// bMaxClaims is B's limit on claims; none unless BMaxClaims is positive.
func (p FairSharePolicy) bMaxClaims() *int32 {
	if p.BMaxClaims <= 0 {
		return nil
	}
	return ptr.To(p.BMaxClaims)
}

// bAdmissionRate is B's admission rate; none unless BRatePerMinute is positive.
func (p FairSharePolicy) bAdmissionRate() *tenancyv1alpha1.AdmissionRate {
	if p.BRatePerMinute <= 0 {
		return nil
	}
	r := &tenancyv1alpha1.AdmissionRate{ClaimsPerMinute: p.BRatePerMinute}
	if p.BRateBurst > 0 {
		r.Burst = ptr.To(p.BRateBurst)
	}
	return r
}

// Validate reports the settings that cannot run.
func (c FairShareConfig) Validate() error {
	var errs []error
	if c.PoolSize < 1 || c.Duration <= 0 || c.ARate <= 0 || c.AHold < 0 || c.BHold < 0 || c.BBursts < 0 || c.BBurst < 0 {
		errs = append(errs, errors.New("a fair-share arm needs a pool, a duration and A's rate; no count or hold negative"))
	}
	if c.BBursts > 0 && (c.BBurst < 1 || c.BRate <= 0) {
		errs = append(errs, errors.New("tenant B's bursts need a size and a rate"))
	}
	if p := c.Policy; p != nil && (p.AGuaranteed < 0 || p.AGuaranteed > c.PoolSize || p.BMaxClaims < 0) {
		errs = append(errs, fmt.Errorf("tenant A's guaranteed warm share (%d) must be within the pool (%d), tenant B's limit not negative", p.AGuaranteed, c.PoolSize))
	}
	if p := c.Policy; p != nil && (p.BRatePerMinute < 0 || p.BRateBurst < 0) {
		errs = append(errs, fmt.Errorf("tenant B's admission rate (%d a minute, burst %d) must not be negative", p.BRatePerMinute, p.BRateBurst))
	}
	if p := c.Policy; p != nil && p.BWarmMax != nil && *p.BWarmMax < 0 {
		errs = append(errs, fmt.Errorf("tenant B's warm share (%d) must not be negative", *p.BWarmMax))
	}
	return errors.Join(errs...)
}

// fairShareRun is an arm's state.
type fairShareRun struct {
	r    *runner
	cfg  FairShareConfig
	w    *ClaimWatcher
	a, b client.Client

	// refusals measures where B's refusals' time goes; nil without a policy or on the floor.
	refusals *refusalProbe
	// gate admits B's claims on the floor with a policy; nil otherwise. refill replaces
	// the members the floor's claims take; nil off the floor.
	gate   *floorGate
	refill *floorRefill

	mu sync.Mutex
	as []report.AClaim
	bs []report.BCreate
}

// RunFairShare runs one arm against the cluster of restCfg (an admin configuration that may
// impersonate, and read the API server's /metrics) and returns its figures; probes'
// OperatorMetrics, when set, scrapes the operator (the policy arm reads its admission time).
func RunFairShare(ctx context.Context, restCfg *rest.Config, cfg FairShareConfig, probes Probes, arm string) (*report.ShareArm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	qps := cfg.ARate + cfg.BRate
	admin, err := NewClient(restCfg, qps)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: Config{Namespace: cfg.Namespace, PodSpec: cfg.PodSpec, WarmPoolSize: cfg.PoolSize, Timeout: cfg.Timeout,
		Progress: cfg.Progress, APIServerProfile: cfg.APIServerProfile, WebhookServerProfile: cfg.WebhookServerProfile,
		ProfileSeconds: cfg.ProfileSeconds}, probes: Probes{OperatorMetrics: probes.OperatorMetrics, DetachOperator: probes.DetachOperator,
		StandInMetrics: probes.StandInMetrics, StandInUsage: probes.StandInUsage, ProfileWebhookServer: probes.ProfileWebhookServer},
		c: admin, rest: restCfg, start: time.Now()}
	if err := r.createObjects(ctx); err != nil {
		return nil, err
	}
	if err := r.waitForPool(ctx, cfg.PoolSize, cfg.PoolCreateWait, "the warm pool to be full"); err != nil {
		return nil, err
	}
	if err := grantTenants(ctx, admin, cfg.Namespace, cfg.BForbidden); err != nil {
		return nil, err
	}
	run := &fairShareRun{r: r, cfg: cfg}
	switch {
	case cfg.Floor:
		r.cfg.Floor, r.cfg.FloorRoute = true, true
		if err := r.detach(ctx); err != nil {
			return nil, err
		}
		if err := run.startFloorRefill(ctx); err != nil {
			return nil, err
		}
		if cfg.Policy != nil {
			run.gate = newFloorGate(cfg.Namespace, *cfg.Policy)
		}
	case cfg.Policy != nil:
		if err := createFairSharePolicy(ctx, r, *cfg.Policy); err != nil {
			return nil, err
		}
	}
	if run.a, err = NewClient(impersonate(restCfg, TenantAUser), cfg.ARate); err != nil {
		return nil, err
	}
	if run.b, err = NewClient(impersonate(restCfg, TenantBUser), cfg.BRate); err != nil {
		return nil, err
	}
	if run.w, err = StartClaimWatch(ctx, admin, cfg.Namespace); err != nil {
		return nil, err
	}
	defer run.w.Stop()
	if cfg.Policy != nil && cfg.BBursts > 0 && !cfg.Floor {
		// The control's client is B's identity with a connection pool and rate limit of its
		// own (NewClient's), so that it never queues behind B's creates in the client.
		control, err := NewClient(impersonate(restCfg, TenantBUser), cfg.BRate)
		if err != nil {
			return nil, err
		}
		if run.refusals, err = startRefusalProbe(ctx, r, control); err != nil {
			return nil, err
		}
	}

	var wg sync.WaitGroup
	// One scrape before the load and one after serve the claims' path and the refusals' cost.
	measured := &report.Result{}
	before := r.measure(ctx, measured)
	start := time.Now()
	loadAvg := loadAverage()
	r.progressf("%s: load average %.1f at the start of the load", arm, loadAvg)
	profiled := r.profileAPIServer(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		run.steadyA(ctx, start, &wg)
	}()
	for i := range cfg.BBursts {
		// Evenly over the middle half of the run.
		at := cfg.Duration/4 + time.Duration(i)*cfg.Duration/2/time.Duration(max(cfg.BBursts, 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.burstB(ctx, start.Add(at), i, &wg)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := <-profiled; err != nil {
		r.progressf("%s: %v", arm, err)
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	fig := report.ShareFigures(arm, run.as, run.bs)
	fig.LoadAverage = loadAvg
	after := r.measure(ctx, measured)
	if run.refill != nil {
		// After the scrape: the replacements still starting are not the arm's load.
		run.finishFloorRefill(time.Minute)
	}
	fig.WarmStarting, fig.ColdStarts, fig.Phases = claimPath(before, after)
	r.progressf("%s: A %d of %d Ready, %.2f%% warm, p50 %.1f ms, p99 %.1f ms; B %d creates, %d refused (p50 %.1f ms, p99 %.1f ms), %d served",
		arm, fig.AReady, fig.ACreated, 100*fig.AWarmShare, fig.ALatency.P50, fig.ALatency.P99, fig.BCreated, fig.BRefused,
		fig.BRefusal.P50, fig.BRefusal.P99, fig.BServed)
	if run.refusals != nil {
		fig.RefusalCost = run.refusals.finish(r, before, after, measured.Errors)
		c := fig.RefusalCost
		r.progressf("%s: refusals' time: sandgate p50 %.1f ms, p99 %.1f ms (%.0f); webhook call p50 %.1f ms, p99 %.1f ms, mean %.1f ms (%.0f); control (403) p50 %.1f ms, p99 %.1f ms (%d, %d not 403)",
			arm, c.Sandgate.P50Ms, c.Sandgate.P99Ms, c.Sandgate.Count, c.Webhook.P50Ms, c.Webhook.P99Ms, c.Webhook.MeanMs, c.Webhook.Count,
			c.Control.P50, c.Control.P99, c.Control.Count, c.ControlOther)
		r.progressf("%s: ClaimLedger writes by writer and result: %v", arm, c.LedgerWrites)
		for _, e := range c.Errors {
			r.progressf("%s: measuring the refusals: %s", arm, e)
		}
	}
	return &fig, nil
}

// claimPath is what the operator's metrics say of an arm's claims between two scrapes: how
// many it served warm from a member still starting, how many cold, and each phase's p50 and
// p99.
func claimPath(before, after snapshot) (starting int, cold float64, phases []report.PhaseQuantiles) {
	if before.operator == nil || after.operator == nil {
		return -1, 0, nil
	}
	d := scrape.Delta(before.operator, after.operator)
	const phase = "sandgate_claim_phase_seconds"
	counts := d.GroupBy(phase+"_count", nil, "phase")
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		p50, p99 := quantilesMs(d.Select(map[string]string{"phase": name}), phase)
		phases = append(phases, report.PhaseQuantiles{Name: name, Count: counts[name], P50Ms: p50, P99Ms: p99})
	}
	return servedStarting(before.operator, after.operator), d.Sum("sandgate_claim_cold_starts_total", nil), phases
}

// impersonate is cfg acting as user, authenticated, in a group of its own.
func impersonate(cfg *rest.Config, user string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated", "bench:" + user}}
	return c
}

// grantTenants lets both tenants (A alone with onlyA) create, read and delete claims in ns,
// and nothing more.
func grantTenants(ctx context.Context, c client.Client, ns string, onlyA bool) error {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: fairShareRole, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{extv1beta1.GroupVersion.Group}, Resources: []string{"sandboxclaims"},
			Verbs: []string{"create", "get", "list", "watch", "delete"}}}}
	if err := c.Create(ctx, role); err != nil {
		return fmt.Errorf("creating role %s: %w", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fairShareRole, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fairShareRole},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: TenantAUser}}}
	if !onlyA {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: TenantBUser})
	}
	if err := c.Create(ctx, binding); err != nil {
		return fmt.Errorf("binding role %s: %w", role.Name, err)
	}
	return nil
}

// bWarmShares is B's warm share of the pool, at most max; none when max is nil.
func bWarmShares(max *int32) []tenancyv1alpha1.WarmShare {
	if max == nil {
		return nil
	}
	return []tenancyv1alpha1.WarmShare{{PoolName: poolName, Max: ptr.To(*max)}}
}

// object is the arm's ClaimPolicy in ns.
func (p FairSharePolicy) object(ns string) *tenancyv1alpha1.ClaimPolicy {
	return &tenancyv1alpha1.ClaimPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fairSharePolicy, Namespace: ns},
		Spec: tenancyv1alpha1.ClaimPolicySpec{Tenants: []tenancyv1alpha1.Tenant{
			{Name: fairShareTenantA, Subjects: []tenancyv1alpha1.Subject{{Kind: tenancyv1alpha1.SubjectUser, Name: TenantAUser}},
				WarmShares: []tenancyv1alpha1.WarmShare{{PoolName: poolName, Guaranteed: p.AGuaranteed}}},
			{Name: fairShareTenantB, Subjects: []tenancyv1alpha1.Subject{{Kind: tenancyv1alpha1.SubjectUser, Name: TenantBUser}},
				MaxClaims: p.bMaxClaims(), WarmShares: bWarmShares(p.BWarmMax), AdmissionRate: p.bAdmissionRate()},
		}},
	}
}

// createFairSharePolicy creates the arm's ClaimPolicy and, when it limits B's claims, waits
// until the operator counted it (its ledgers exist, counted): before that, admission would
// wait for them.
func createFairSharePolicy(ctx context.Context, r *runner, p FairSharePolicy) error {
	policy := p.object(r.cfg.Namespace)
	if err := r.c.Create(ctx, policy); err != nil {
		return fmt.Errorf("creating ClaimPolicy %s: %w", policy.Name, err)
	}
	rate := ""
	if p.BRatePerMinute > 0 {
		rate = fmt.Sprintf(", admitted at most %d a minute", p.BRatePerMinute)
	}
	limit := "no limit on claims"
	if p.BMaxClaims > 0 {
		limit = fmt.Sprintf("at most %d claims", p.BMaxClaims)
	}
	r.progressf("created ClaimPolicy %s: tenant a guaranteed %d warm members of %s, tenant b %s%s", policy.Name, p.AGuaranteed, poolName, limit, rate)
	if p.BMaxClaims <= 0 {
		return nil // warm shares and rates keep no ledger
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var ledgers tenancyv1alpha1.ClaimLedgerList
		err := r.c.List(ctx, &ledgers, client.InNamespace(r.cfg.Namespace), client.MatchingLabels{tenancyv1alpha1.LabelLedgerPolicy: fairSharePolicy})
		counted := err == nil && len(ledgers.Items) > 0
		for _, l := range ledgers.Items {
			counted = counted && l.Status.CountedAt != nil
		}
		if counted {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ClaimPolicy %s to be counted: %w", policy.Name, ctx.Err())
		case <-tick.C:
		}
	}
}

// aInterval is the time between two of A's creates.
func (c FairShareConfig) aInterval() time.Duration {
	return time.Duration(float64(time.Second) / c.ARate)
}

// AClaims is how many claims A creates.
func (c FairShareConfig) AClaims() int { return int(c.Duration / c.aInterval()) }

// steadyA creates A's claims at ARate for Duration, each in a goroutine of wg's.
func (f *fairShareRun) steadyA(ctx context.Context, start time.Time, wg *sync.WaitGroup) {
	interval := f.cfg.aInterval()
	for i := range f.cfg.AClaims() {
		hold(ctx, time.Until(start.Add(time.Duration(i)*interval)))
		if ctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.claimA(ctx, fmt.Sprintf("a-%05d", i))
			f.mu.Lock()
			f.as = append(f.as, c)
			f.mu.Unlock()
		}()
	}
}

// claimA creates one of A's claims, waits for it to be Ready, reads whether it was served
// warm, holds it AHold and deletes it.
func (f *fairShareRun) claimA(ctx context.Context, name string) report.AClaim {
	claim := f.newClaim(name)
	sent := time.Now()
	if err := f.a.Create(ctx, claim); err != nil {
		f.r.progressf("tenant A's claim %s: %v", name, err)
		return report.AClaim{}
	}
	called := time.Since(sent)
	defer f.release(claim, f.a)
	if f.cfg.Floor {
		if err := f.serveFloorClaim(ctx, claim); err != nil {
			f.r.progressf("tenant A's claim %s: %v", name, err)
			return report.AClaim{}
		}
	}
	obs, ok := f.waitReady(ctx, name)
	if !ok {
		return report.AClaim{}
	}
	out := report.AClaim{Ready: true, Latency: obs.ReadyAt.Sub(sent), Name: name, Sent: sent, Call: called}
	sb := &agentsv1beta1.Sandbox{}
	if err := f.r.c.Get(ctx, client.ObjectKey{Namespace: f.cfg.Namespace, Name: obs.Sandbox}, sb); err == nil {
		out.Warm = sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm
	}
	hold(ctx, f.cfg.AHold)
	return out
}

// burstB creates one burst of B's claims from at, at BRate, each in a goroutine of wg's.
func (f *fairShareRun) burstB(ctx context.Context, at time.Time, burst int, wg *sync.WaitGroup) {
	hold(ctx, time.Until(at))
	f.r.progressf("tenant B's burst %d: %d claims at %g/s", burst+1, f.cfg.BBurst, f.cfg.BRate)
	interval := time.Duration(float64(time.Second) / f.cfg.BRate)
	for i := range f.cfg.BBurst {
		hold(ctx, time.Until(at.Add(time.Duration(i)*interval)))
		if ctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.claimB(ctx, fmt.Sprintf("b-%d-%04d", burst, i))
			f.mu.Lock()
			f.bs = append(f.bs, c)
			f.mu.Unlock()
		}()
		if f.refusals != nil && f.cfg.ControlEvery > 0 && i%f.cfg.ControlEvery == 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.refusals.controlCreate(ctx, fmt.Sprintf("control-%d-%04d", burst, i))
			}()
		}
	}
}

// claimB creates one of B's claims and times the call; an admitted claim is waited on, held
// BHold once Ready and deleted.
func (f *fairShareRun) claimB(ctx context.Context, name string) report.BCreate {
	claim := f.newClaim(name)
	if f.gate != nil {
		if !f.gate.admit() {
			sent := time.Now()
			err := f.refuseFloorClaim(ctx, claim)
			return report.BCreate{Call: time.Since(sent), Refused: err == nil, Err: err != nil}
		}
		// The slot is B's until the claim is deleted (deferred below, so run before this), or
		// its create failed.
		defer f.gate.release()
	}
	sent := time.Now()
	err := f.b.Create(ctx, claim)
	out := report.BCreate{Call: time.Since(sent)}
	switch {
	case apierrors.IsTooManyRequests(err):
		out.Refused = true
		return out
	case err != nil:
		out.Err = true
		return out
	}
	defer f.release(claim, f.b)
	if f.cfg.Floor {
		if err := f.serveFloorClaim(ctx, claim); err != nil {
			f.r.progressf("tenant B's claim %s: %v", name, err)
			return out
		}
	}
	if _, ok := f.waitReady(ctx, name); ok {
		out.Served = true
		hold(ctx, f.cfg.BHold)
	}
	return out
}

func (f *fairShareRun) newClaim(name string) *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.cfg.Namespace},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: poolName}}}
}

// waitReady waits up to Timeout for the watch to show the claim Ready.
func (f *fairShareRun) waitReady(ctx context.Context, name string) (ReadyClaim, bool) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if obs, ok := f.w.Ready(name); ok {
			return obs, true
		}
		select {
		case <-ctx.Done():
			f.r.progressf("claim %s not Ready within %s", name, f.cfg.Timeout)
			return ReadyClaim{}, false
		case <-tick.C:
		}
	}
}

// release deletes a claim as its tenant, whatever became of the run's context.
func (f *fairShareRun) release(claim *extv1beta1.SandboxClaim, c client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
		f.r.progressf("deleting claim %s: %v", claim.Name, err)
	}
}

// hold waits d, or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
