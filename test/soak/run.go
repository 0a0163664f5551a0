package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/soak/check"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// Result is what a soak did and what the checker found.
type Result struct {
	Options Options
	// Report is the checker's.
	Report check.Report
	// Faults are the faults injected; Planned how many the schedule held, Skipped those that
	// did not fit before the load's end, FaultErrors those that failed to inject.
	Faults      []check.Fault
	Planned     int
	Skipped     int
	FaultErrors []string
	// Changes are the workload's pool resizes and template rollouts.
	Changes []string
	// Restarts counts each replica's restarts (kills, exits after a lost Lease, SIGTERMs);
	// FencedWrites the writes each replica's lease fence refused, from its log.
	Restarts     map[string]int
	FencedWrites map[string]int
	// Swept counts the claims the load deleted after it stopped because it did not know it
	// had created them (a create given up unanswered whose claim appeared later).
	Swept int
	// Settled says whether the system settled within SettleTimeout, and how long it took.
	Settled    bool
	SettleTook time.Duration
	// NotServed counts the claims the load generator created that did not become Ready
	// within ReadyTimeout (it deleted them then).
	NotServed int
	// AuditEvents is the number of audit events read; AuditLog its path (kept with KeepLogs).
	AuditEvents int
	AuditLog    string
	// Took is the whole run.
	Took time.Duration
}

// OK reports whether the soak proved every invariant and injected every planned fault.
func (r *Result) OK() bool {
	return r.Report.OK() && r.Settled && r.NotServed == 0 && r.Skipped == 0 && len(r.FaultErrors) == 0
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// Run runs a soak as o says and checks it. It returns an error when the soak could not run;
// a run that found violations returns them in the Result, not as an error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	begin := time.Now()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			_, _ = fmt.Fprintf(o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	e, err := startEnv(ctx, o, logf)
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.stop() }()
	c, err := load.NewClient(e.cluster.Config, o.Rate)
	if err != nil {
		return nil, err
	}
	if err := createWorkload(ctx, c, o, logf); err != nil {
		return nil, err
	}
	watch, err := load.StartClaimWatch(ctx, c, "")
	if err != nil {
		return nil, err
	}
	defer watch.Stop()
	bindings, err := watchBindings(ctx, c)
	if err != nil {
		return nil, err
	}

	res := &Result{Options: o, Restarts: map[string]int{}, FencedWrites: map[string]int{}, AuditLog: e.cluster.AuditLogPath()}
	gen := &loadGen{o: o, c: c, watch: watch, logf: logf}
	in := &injector{e: e, c: c, o: o, logf: logf}
	start := time.Now()
	end := start.Add(o.Duration)
	logf("load: %.0f claims/s for %s over %d namespaces (seed %d)", o.Rate, o.Duration, o.Namespaces, o.Seed)

	var wg sync.WaitGroup
	var faultMu sync.Mutex
	current := "none"
	progressCtx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-progressCtx.Done():
				return
			case <-t.C:
				faultMu.Lock()
				f := current
				faultMu.Unlock()
				logf("%s: %s; fault: %s", time.Since(start).Round(time.Second), gen.progress(), f)
			}
		}
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		in.churn(ctx, end, uint64(o.Seed)+1)
	}()
	go func() {
		defer wg.Done()
		plan := o.schedule()
		res.Planned = len(plan)
		if sleep(ctx, 10*time.Second) != nil { // the load runs alone first
			return
		}
		for i, p := range plan {
			// Leave the load's last 15 s without a new fault, so every fault's recovery is seen.
			if time.Now().Add(p.pause + p.hold + 15*time.Second).After(end) {
				res.Skipped = len(plan) - i
				logf("faults: %d of %d not injected: the load ends before they fit (lengthen --duration)", res.Skipped, len(plan))
				return
			}
			if sleep(ctx, p.pause) != nil {
				return
			}
			faultMu.Lock()
			current = p.kind
			faultMu.Unlock()
			logf("fault %d/%d: %s", i+1, len(plan), p.kind)
			f, err := in.inject(ctx, p)
			faultMu.Lock()
			current = "none"
			faultMu.Unlock()
			if err != nil {
				res.FaultErrors = append(res.FaultErrors, err.Error())
				logf("fault %s failed: %v", p.kind, err)
				continue
			}
			res.Faults = append(res.Faults, f)
			logf("fault %s cleared after %s: %s", p.kind, f.End.Sub(f.Start).Round(time.Millisecond), f.Detail)
		}
	}()
	gen.run(ctx, end)
	loadStopped := time.Now()
	wg.Wait()
	stopProgress()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	logf("load stopped after %s: %s", loadStopped.Sub(start).Round(time.Second), gen.progress())
	if res.Swept, err = gen.sweep(ctx); err != nil {
		logf("sweeping the claims the load did not know it created: %v", err)
	} else if res.Swept > 0 {
		logf("deleted %d claims the load did not know it created (creates given up unanswered whose claims appeared later)", res.Swept)
	}

	settleStart := time.Now()
	res.Settled = settle(ctx, c, o, logf)
	res.SettleTook = time.Since(settleStart)
	final, err := listState(ctx, c)
	if err != nil {
		return nil, err
	}
	for _, r := range e.replicas {
		r.mu.Lock()
		res.Restarts[r.name] = r.restarts
		r.mu.Unlock()
		res.FencedWrites[r.name] = countFenced(r.logPath)
	}
	res.Changes = in.changes
	res.NotServed = int(gen.notServed.Load())
	// The audit log is written before each request is answered: everything is in it.
	audit, err := readAudit(e.cluster.AuditLogPath())
	if err != nil {
		return nil, err
	}
	res.AuditEvents = len(audit)
	res.Report = check.Check(check.Input{
		Audit:          audit,
		Claims:         gen.snapshot(),
		Faults:         res.Faults,
		Final:          final,
		OperatorUser:   webhooks.DefaultOperatorUser,
		LeaseNamespace: leaseNamespace,
		LeaseName:      operator.LeaderElectionID,
		// Admission's ledger writes come from every replica, by design.
		AdmissionUserAgent: operator.LedgerUserAgent,
		LoadStopped:        loadStopped,
	})
	// What the watch saw and the audit log may not hold (a write whose event was lost).
	watched := bindings.stop()
	res.Report.Violations = append(res.Report.Violations, watched...)
	for _, v := range watched {
		if res.Report.ByInvariant == nil {
			res.Report.ByInvariant = map[string]int{}
		}
		res.Report.ByInvariant[v.Invariant]++
	}
	res.Took = time.Since(begin)
	return res, nil
}

func readAudit(path string) ([]check.AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	events, err := check.ReadAuditLog(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the audit log %s: %w", path, err)
	}
	return events, nil
}

// countFenced counts the lines of a replica's log that report a write its lease fence
// refused.
func countFenced(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "not sent: this replica") {
			n++
		}
	}
	return n
}

// settle waits until every pool has its replicas, all ready, and no Sandbox is left bound
// to a claim (the load deleted every claim it created).
func settle(ctx context.Context, c client.Client, o Options, logf func(string, ...any)) bool {
	start := time.Now()
	deadline := start.Add(o.SettleTimeout)
	lastLog := start
	var why string
	for {
		why = unsettled(ctx, c)
		if why == "" {
			logf("settled after %s", time.Since(start).Round(time.Second))
			return true
		}
		if time.Since(lastLog) >= 15*time.Second {
			logf("settling: %s", why)
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			logf("not settled within %s: %s", o.SettleTimeout, why)
			return false
		}
		if sleep(ctx, time.Second) != nil {
			return false
		}
	}
}

// unsettled says what is not settled yet, "" when everything is.
func unsettled(ctx context.Context, c client.Client) string {
	var pools extv1beta1.SandboxWarmPoolList
	if err := c.List(ctx, &pools); err != nil {
		return err.Error()
	}
	for _, p := range pools.Items {
		want := ptr.Deref(p.Spec.Replicas, 1)
		if p.Status.ReadyReplicas != want || p.Status.Replicas != want {
			return fmt.Sprintf("pool %s/%s has %d members, %d ready, of %d", p.Namespace, p.Name, p.Status.Replicas, p.Status.ReadyReplicas, want)
		}
	}
	var claims extv1beta1.SandboxClaimList
	if err := c.List(ctx, &claims); err != nil {
		return err.Error()
	}
	if n := len(claims.Items); n > 0 {
		return fmt.Sprintf("%d claims left", n)
	}
	var sandboxes agentsv1beta1.SandboxList
	if err := c.List(ctx, &sandboxes); err != nil {
		return err.Error()
	}
	members := 0
	for i := range sandboxes.Items {
		if policy.ControllerOf(&sandboxes.Items[i], policy.PoolKind) != nil {
			members++
		}
	}
	if other := len(sandboxes.Items) - members; other > 0 {
		return fmt.Sprintf("%d Sandboxes not in a pool", other)
	}
	// The garbage collector removes the children of deleted Sandboxes in the background.
	live := map[types.UID]bool{}
	for i := range sandboxes.Items {
		live[sandboxes.Items[i].UID] = true
	}
	var pods corev1.PodList
	var services corev1.ServiceList
	var pvcs corev1.PersistentVolumeClaimList
	for _, l := range []client.ObjectList{&pods, &services, &pvcs} {
		if err := c.List(ctx, l); err != nil {
			return err.Error()
		}
	}
	orphans := 0
	for _, objs := range [][]metav1.Object{metas(pods.Items), metas(services.Items), metas(pvcs.Items)} {
		for _, o := range objs {
			if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "Sandbox" && !live[ref.UID] {
				orphans++
			}
		}
	}
	if orphans > 0 {
		return fmt.Sprintf("%d pods, Services or PVCs of deleted Sandboxes not collected yet", orphans)
	}
	// No claim is left: the leader counts that into each ClaimPolicy's status, and drops a
	// reservation whose create failed in a fault at its TTL (--claim-reservation-ttl). Whether
	// what it shows is exact is the checker's (check.InvariantPolicyUsage).
	var policies tenancyv1alpha1.ClaimPolicyList
	if err := c.List(ctx, &policies); err != nil {
		return err.Error()
	}
	for _, p := range policies.Items {
		if p.Status.Claims != 0 || p.Status.Reserved != 0 {
			return fmt.Sprintf("ClaimPolicy %s/%s shows %d claims, %d reserved, of none", p.Namespace, p.Name, p.Status.Claims, p.Status.Reserved)
		}
	}
	return ""
}

// metas returns pointers to the objects' metadata.
func metas[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// listState lists what the checker reads of the final state.
func listState(ctx context.Context, c client.Client) (check.State, error) {
	var s check.State
	var (
		claims    extv1beta1.SandboxClaimList
		sandboxes agentsv1beta1.SandboxList
		pools     extv1beta1.SandboxWarmPoolList
		templates extv1beta1.SandboxTemplateList
		pods      corev1.PodList
		pvcs      corev1.PersistentVolumeClaimList
		services  corev1.ServiceList
		netpols   networkingv1.NetworkPolicyList
		policies  tenancyv1alpha1.ClaimPolicyList
		ledgers   tenancyv1alpha1.ClaimLedgerList
	)
	for _, l := range []client.ObjectList{&claims, &sandboxes, &pools, &templates, &pods, &pvcs, &services, &netpols, &policies, &ledgers} {
		if err := retry(ctx, time.Minute, func() error { return c.List(ctx, l) }); err != nil {
			return s, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	s.Claims, s.Sandboxes, s.Pools, s.Templates = claims.Items, sandboxes.Items, pools.Items, templates.Items
	s.Pods, s.PVCs, s.Services, s.NetworkPolicies = pods.Items, pvcs.Items, services.Items, netpols.Items
	s.ClaimPolicies, s.ClaimLedgers = policies.Items, ledgers.Items
	return s, nil
}

// WriteText writes the result for a reader: what ran, what was injected, what the checker
// found.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	rep := &r.Report
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "soak %s: %.0f claims/s for %s, seed %d, %d namespaces, run took %s\n",
		verdict, r.Options.Rate, r.Options.Duration, r.Options.Seed, r.Options.Namespaces, r.Took.Round(time.Second))
	cl := rep.Claims
	fmt.Fprintf(&b, "claims: %d requested, %d created, %d served (Ready), %d deleted, %d refused at admission, %d given up unanswered; %d admitted and %d answered 429 (shed or over a ClaimPolicy's limit or rate; retries counted) in the audit log\n",
		cl.Requested, cl.Created, cl.Served, cl.Deleted, cl.Refused, cl.Unanswered, cl.Admitted, cl.Shed)
	fmt.Fprintf(&b, "claims not Ready within %s of their creation: %d; claims the load did not know it created, deleted after it: %d\n", r.Options.ReadyTimeout, r.NotServed, r.Swept)
	fmt.Fprintf(&b, "claim latency (created → Ready): outside faults p50 %s p99 %s (%d claims); during faults p50 %s p99 %s (%d claims)\n",
		ms(rep.LatencyOutsideFaults.P50), ms(rep.LatencyOutsideFaults.P99), rep.LatencyOutsideFaults.Count,
		ms(rep.LatencyInFaults.P50), ms(rep.LatencyInFaults.P99), rep.LatencyInFaults.Count)
	fmt.Fprintf(&b, "faults: %d injected of %d planned (%d skipped, %d failed to inject)\n", len(r.Faults), r.Planned, r.Skipped, len(r.FaultErrors))
	rec := rep.RecoveryPercentiles()
	fmt.Fprintf(&b, "  %-28s %5s %12s %12s\n", "kind", "count", "recovery p50", "recovery p99")
	for _, k := range FaultKinds {
		if rep.FaultsByKind[k] == 0 {
			continue
		}
		p := rec[k]
		fmt.Fprintf(&b, "  %-28s %5d %12s %12s\n", k, rep.FaultsByKind[k], ms(p.P50), ms(p.P99))
	}
	for _, e := range r.FaultErrors {
		fmt.Fprintf(&b, "  failed to inject: %s\n", e)
	}
	fmt.Fprintf(&b, "recovery times (every fault): %s\n", histogram(rep.Recovery))
	fmt.Fprintf(&b, "replicas: restarts %s; writes held back by the lease fence %s\n", counts(r.Restarts), counts(r.FencedWrites))
	fmt.Fprintf(&b, "settled: %v after %s; audit events read: %d\n", r.Settled, r.SettleTook.Round(time.Second), r.AuditEvents)
	inv := func(names ...string) int {
		n := 0
		for _, name := range names {
			n += rep.ByInvariant[name]
		}
		return n
	}
	fmt.Fprintf(&b, "invariant violations: %d (leaks %d, stale-leader writes %d)\n", len(rep.Violations),
		inv(check.InvariantNoLeakedSandbox, check.InvariantNoLeakedChild),
		inv(check.InvariantStaleLeaderWrite, check.InvariantKnownWriter))
	for _, name := range sortedKeys(rep.ByInvariant) {
		fmt.Fprintf(&b, "  %-32s %d\n", name, rep.ByInvariant[name])
	}
	for i, v := range rep.Violations {
		if i == 50 {
			fmt.Fprintf(&b, "  ... %d more\n", len(rep.Violations)-50)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// recoveryBuckets are the upper bounds of the recovery histogram's buckets.
var recoveryBuckets = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}

// histogram counts the recovery times of every fault kind by bucket.
func histogram(byKind map[string][]time.Duration) string {
	counts := make([]int, len(recoveryBuckets)+1)
	for _, ds := range byKind {
		for _, d := range ds {
			i := 0
			for i < len(recoveryBuckets) && d > recoveryBuckets[i] {
				i++
			}
			counts[i]++
		}
	}
	parts := make([]string, 0, len(counts))
	for i, n := range counts {
		label := "> " + recoveryBuckets[len(recoveryBuckets)-1].String()
		if i < len(recoveryBuckets) {
			label = "≤ " + recoveryBuckets[i].String()
		}
		parts = append(parts, fmt.Sprintf("%s: %d", label, n))
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func counts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
