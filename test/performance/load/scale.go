package load

// The scale run: many pools full at once, and what the operator costs holding them. It creates
// Namespaces × PoolsPerNamespace templates and pools of Replicas each, waits until every pool
// is full and Ready, and then measures, in this order: (a) the operator idle — its CPU over a
// window with no traffic, its resident memory and Go heap, against the same read before
// anything existed; (b) serial claims into one pool, as the serial scenario makes them; (c) an
// operator restart — SIGTERM, the same command started again, and a claim created at once
// (retried while admission is refused) watched to Ready; (d) the floor of the same serial
// claims on the same cluster, the operator detached, into another namespace's pool of the same
// size. The floor comes last: it stops the operator for good.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// ScaleConfig is one scale run.
type ScaleConfig struct {
	// NamespacePrefix names the namespaces <prefix>-00, <prefix>-01, ...
	NamespacePrefix   string
	Namespaces        int
	PoolsPerNamespace int
	Replicas          int32
	PodSpec           corev1.PodSpec
	// SerialClaims are made one at a time into the first pool of the first namespace;
	// FloorClaims the same way into the first pool of the second namespace, the operator
	// detached. 0 FloorClaims skips the floor.
	SerialClaims int
	FloorClaims  int
	// Restarts is how many times the operator is restarted (at least once), each time timed
	// to the first claim made right after it; the result is the median restart.
	Restarts int
	// FillTimeout bounds the wait for every pool to be full and Ready.
	FillTimeout time.Duration
	// Settle is the pause between the last pool full and the idle window, for the writes
	// that trail a fill; IdleWindow the window itself.
	Settle     time.Duration
	IdleWindow time.Duration
	// Timeout bounds each serial claim's wait for Ready, and the restart's first claim.
	Timeout time.Duration
	// Progress receives progress lines; nil for none.
	Progress io.Writer
}

// Sandboxes is how many pool members the run asks for.
func (c ScaleConfig) Sandboxes() int {
	return c.Namespaces * c.PoolsPerNamespace * int(c.Replicas)
}

// validate reports a configuration the run cannot measure.
func (c ScaleConfig) validate() error {
	var errs []error
	if c.Namespaces < 1 || c.PoolsPerNamespace < 1 || c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("scale run of %d namespaces × %d pools × %d replicas: each must be at least 1",
			c.Namespaces, c.PoolsPerNamespace, c.Replicas))
	}
	// The claims must find warm members whatever the refill does: a cold start would measure
	// something else.
	if need := max(c.SerialClaims+1, c.FloorClaims); int(c.Replicas) < need {
		errs = append(errs, fmt.Errorf("pools of %d replicas are too small for %d serial claims, a restart claim and %d floor claims",
			c.Replicas, c.SerialClaims, c.FloorClaims))
	}
	// The floor's claims go into the second namespace: the names fire gives its claims would
	// collide with the serial claims' in the first.
	if c.FloorClaims > 0 && c.Namespaces < 2 {
		errs = append(errs, errors.New("the floor of a scale run needs a second namespace"))
	}
	if c.SerialClaims < 1 {
		errs = append(errs, errors.New("a scale run needs at least one serial claim"))
	}
	return errors.Join(errs...)
}

// OperatorRestart is an operator restarted by ScaleProbes.RestartOperator.
type OperatorRestart struct {
	// StartedAt is when the new process started; Stopped how long the old one took to exit.
	StartedAt time.Time
	Stopped   time.Duration
	// WaitReady waits until the new process serves (its /readyz) and returns when it first
	// did.
	WaitReady func(context.Context) (time.Time, error)
}

// ScaleProbes are the probes of a scale run: Probes' operator probes must follow the operator
// across its restart.
type ScaleProbes struct {
	Probes
	// RestartOperator stops the operator with SIGTERM and starts the same command again,
	// returning as soon as the new process has started.
	RestartOperator func(context.Context) (OperatorRestart, error)
}

// scaleNames are the namespace and the names of the template and pool i of a scale run: the
// first pool of each namespace has the names the serial and floor paths (create, floorClaim)
// claim from.
func scaleNames(prefix string, ns, i int) (namespace, template, pool string) {
	namespace = fmt.Sprintf("%s-%02d", prefix, ns)
	if i == 0 {
		return namespace, templateName, poolName
	}
	return namespace, fmt.Sprintf("%s-%d", templateName, i), fmt.Sprintf("%s-%d", poolName, i)
}

// RunScale runs cfg against the cluster of restCfg (an admin configuration). The result holds
// the serial claims as a run's claims (latency, samples, API requests), the floor in Floor
// and the scale figures in Scale.
func RunScale(ctx context.Context, restCfg *rest.Config, cfg ScaleConfig, probes ScaleProbes) (*report.Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := NewClient(restCfg, 100)
	if err != nil {
		return nil, err
	}
	serialNS, _, _ := scaleNames(cfg.NamespacePrefix, 0, 0)
	r := &runner{
		cfg: Config{
			Namespace: serialNS, WarmPoolSize: cfg.Replicas, BurstSize: 1, TotalBursts: cfg.SerialClaims, QPS: 1000,
			Timeout: cfg.Timeout, Progress: cfg.Progress,
		},
		probes: probes.Probes, c: c, rest: restCfg, start: time.Now(),
	}
	res := &report.Result{StartedAt: r.start, RefillSeconds: -1}
	sc := &report.Scale{Sandboxes: cfg.Sandboxes(), Namespaces: cfg.Namespaces, Pools: cfg.Namespaces * cfg.PoolsPerNamespace}
	res.Scale = sc

	baseline := r.operatorMetrics(ctx, res)
	fillStart := time.Now()
	if err := r.createScaleObjects(ctx, cfg); err != nil {
		return nil, err
	}
	if err := r.waitForScalePools(ctx, cfg); err != nil {
		return nil, fmt.Errorf("waiting for %d pools to be full: %w", sc.Pools, err)
	}
	sc.FillSeconds = round2(time.Since(fillStart).Seconds())
	sc.FillRate = round2(float64(sc.Sandboxes) / max(sc.FillSeconds, 0.01))
	res.PoolFillSeconds = sc.FillSeconds

	if err := r.idle(ctx, cfg, res, baseline); err != nil {
		return nil, err
	}
	w, err := StartClaimWatch(ctx, c, serialNS)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	if err := r.serial(ctx, w, res); err != nil {
		return nil, err
	}
	for i := range max(cfg.Restarts, 1) {
		if err := r.waitForPool(ctx, cfg.Replicas, cfg.FillTimeout, "pool refilling before the restart"); err != nil {
			return nil, fmt.Errorf("waiting for the pool to be full again: %w", err)
		}
		rs, err := r.restart(ctx, cfg, w, probes.RestartOperator, fmt.Sprintf("%s-%d", restartClaim, i+1))
		if err != nil {
			return nil, err
		}
		sc.Restarts = append(sc.Restarts, rs)
	}
	sc.SetMedianRestart()
	if cfg.FloorClaims > 0 {
		floorNS, _, _ := scaleNames(cfg.NamespacePrefix, 1, 0)
		floor, err := r.scaleFloor(ctx, cfg, floorNS)
		if err != nil {
			return nil, err
		}
		res.Floor = floor
		sc.FloorSerialP50Ms, sc.FloorSerialP99Ms = floor.Latency.Client.P50, floor.Latency.Client.P99
	}
	sc.SetRatios()
	return res, nil
}

// createScaleObjects creates the namespaces, templates and pools.
func (r *runner) createScaleObjects(ctx context.Context, cfg ScaleConfig) error {
	for n := range cfg.Namespaces {
		nsName, _, _ := scaleNames(cfg.NamespacePrefix, n, 0)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
		if err := r.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", nsName, err)
		}
		for i := range cfg.PoolsPerNamespace {
			_, tmplName, pName := scaleNames(cfg.NamespacePrefix, n, i)
			tmpl := &extv1beta1.SandboxTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: tmplName, Namespace: nsName},
				Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
					PodTemplate: agentsv1beta1.PodTemplate{Spec: cfg.PodSpec},
				}},
			}
			if err := r.c.Create(ctx, tmpl); err != nil {
				return fmt.Errorf("creating template %s/%s: %w", nsName, tmplName, err)
			}
			pool := &extv1beta1.SandboxWarmPool{
				ObjectMeta: metav1.ObjectMeta{Name: pName, Namespace: nsName},
				Spec: extv1beta1.SandboxWarmPoolSpec{
					Replicas:           ptr.To(cfg.Replicas),
					SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: tmplName},
				},
			}
			if err := r.c.Create(ctx, pool); err != nil {
				return fmt.Errorf("creating pool %s/%s: %w", nsName, pName, err)
			}
		}
	}
	r.progressf("created %d templates and pools of %d replicas in %d namespaces %s-*",
		cfg.Namespaces*cfg.PoolsPerNamespace, cfg.Replicas, cfg.Namespaces, cfg.NamespacePrefix)
	return nil
}

// fillCount is what the pools' status shows of a fill.
type fillCount struct {
	ready, members, full, pools int
}

// countFill sums the status of the run's pools among pools.
func countFill(pools []extv1beta1.SandboxWarmPool, want map[string]bool, replicas int32) fillCount {
	var f fillCount
	for i := range pools {
		p := &pools[i]
		if !want[p.Namespace+"/"+p.Name] {
			continue
		}
		f.pools++
		f.ready += int(min(p.Status.ReadyReplicas, replicas))
		f.members += int(p.Status.Replicas)
		if p.Status.ReadyReplicas >= replicas && p.Status.Replicas == replicas {
			f.full++
		}
	}
	return f
}

// waitForScalePools waits until every pool of the run shows all its replicas Ready, printing
// progress every five seconds: Ready members out of the total, and the rate since the last
// line and since the start.
func (r *runner) waitForScalePools(ctx context.Context, cfg ScaleConfig) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.FillTimeout)
	defer cancel()
	want := map[string]bool{}
	for n := range cfg.Namespaces {
		for i := range cfg.PoolsPerNamespace {
			ns, _, pool := scaleNames(cfg.NamespacePrefix, n, i)
			want[ns+"/"+pool] = true
		}
	}
	total := cfg.Sandboxes()
	start := time.Now()
	lastPrint, lastReady := start, 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var f fillCount
	for {
		var list extv1beta1.SandboxWarmPoolList
		err := r.c.List(ctx, &list)
		if err == nil {
			f = countFill(list.Items, want, cfg.Replicas)
			if f.full == len(want) {
				r.progressf("fill: %d/%d Ready in %d pools after %s (%.1f/s)", f.ready, total, f.full,
					time.Since(start).Round(100*time.Millisecond), float64(f.ready)/time.Since(start).Seconds())
				return nil
			}
		}
		if since := time.Since(lastPrint); since >= 5*time.Second {
			r.progressf("fill: %d/%d Ready, %d members, %d/%d pools full (%.1f/s now, %.1f/s overall)",
				f.ready, total, f.members, f.full, len(want),
				float64(f.ready-lastReady)/since.Seconds(), float64(f.ready)/time.Since(start).Seconds())
			lastPrint, lastReady = time.Now(), f.ready
		}
		if err := r.healthy(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %d/%d Ready, %d/%d pools full (last list: %v)", ctx.Err(), f.ready, total, f.full, len(want), err)
		case <-tick.C:
		}
	}
}

// operatorMetrics scrapes the operator; nil (and an error in res) when it cannot.
func (r *runner) operatorMetrics(ctx context.Context, res *report.Result) scrape.Snapshot {
	if r.probes.OperatorMetrics == nil {
		return nil
	}
	snap, err := r.probes.OperatorMetrics(ctx)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Sprintf("scraping the operator: %v", err))
		return nil
	}
	return snap
}

// Metrics of the operator's memory, from client_golang's process and Go collectors.
const (
	metricRSS       = "process_resident_memory_bytes"
	metricHeapInuse = "go_memstats_heap_inuse_bytes"
	metricHeapAlloc = "go_memstats_heap_alloc_bytes"
)

// setMemory fills in the memory figures from the operator's metrics before the run
// (baseline) and idle at full size (idle); either may be nil.
func setMemory(sc *report.Scale, baseline, idle scrape.Snapshot) {
	mib := func(s scrape.Snapshot, name string) float64 { return round2(s.Sum(name, nil) / (1 << 20)) }
	if baseline != nil {
		sc.BaselineRSSMiB, sc.BaselineHeapInuseMiB = mib(baseline, metricRSS), mib(baseline, metricHeapInuse)
	}
	if idle == nil {
		return
	}
	sc.OperatorRSSMiB, sc.HeapInuseMiB, sc.HeapAllocMiB = mib(idle, metricRSS), mib(idle, metricHeapInuse), mib(idle, metricHeapAlloc)
	sc.MiBPer1000Sandboxes = report.PerThousand(sc.OperatorRSSMiB, sc.BaselineRSSMiB, sc.Sandboxes)
	sc.HeapInuseMiBPer1000Sandboxes = report.PerThousand(sc.HeapInuseMiB, sc.BaselineHeapInuseMiB, sc.Sandboxes)
}

// corePercent is CPU seconds spent over a window in percent of one core; -1 when unknown.
func corePercent(before, after float64, ok bool, window time.Duration) float64 {
	if !ok || window <= 0 {
		return -1
	}
	return round2((after - before) / window.Seconds() * 100)
}

// idle measures the operator with every pool full and no traffic: its CPU (and the API
// server's) over cfg.IdleWindow after cfg.Settle, then its memory.
func (r *runner) idle(ctx context.Context, cfg ScaleConfig, res *report.Result, baseline scrape.Snapshot) error {
	sc := res.Scale
	r.progressf("idle: settling %s, then measuring %s with no traffic", cfg.Settle, cfg.IdleWindow)
	if err := sleep(ctx, cfg.Settle); err != nil {
		return err
	}
	opBefore, opOK := r.operatorCPU()
	apiBefore, apiOK := r.apiServerCPU()
	start := time.Now()
	if err := sleep(ctx, cfg.IdleWindow); err != nil {
		return err
	}
	window := time.Since(start)
	opAfter, opOK2 := r.operatorCPU()
	apiAfter, apiOK2 := r.apiServerCPU()
	sc.IdleSeconds = round2(window.Seconds())
	sc.IdleCPUCoresPercent = corePercent(opBefore, opAfter, opOK && opOK2, window)
	sc.IdleAPIServerCPUCoresPercent = corePercent(apiBefore, apiAfter, apiOK && apiOK2, window)
	setMemory(sc, baseline, r.operatorMetrics(ctx, res))
	if r.probes.OperatorUsage != nil {
		if u, err := r.probes.OperatorUsage(); err == nil {
			sc.PeakRSSMiB = round2(float64(u.PeakRSSBytes) / (1 << 20))
		}
	}
	r.progressf("idle: operator %.2f %% of a core, RSS %.1f MiB, heap in use %.1f MiB (%.2f MiB RSS per 1,000 Sandboxes)",
		sc.IdleCPUCoresPercent, sc.OperatorRSSMiB, sc.HeapInuseMiB, sc.MiBPer1000Sandboxes)
	return r.healthy()
}

func (r *runner) operatorCPU() (float64, bool) {
	if r.probes.OperatorUsage == nil {
		return 0, false
	}
	u, err := r.probes.OperatorUsage()
	return u.CPUSeconds, err == nil
}

func (r *runner) apiServerCPU() (float64, bool) {
	if r.probes.APIServerCPU == nil {
		return 0, false
	}
	v, err := r.probes.APIServerCPU()
	return v, err == nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// serial makes the serial claims into the run's pool, one after the other, and accounts for
// them as Run does its claims.
func (r *runner) serial(ctx context.Context, w *ClaimWatcher, res *report.Result) error {
	webhooks, err := webhookResources(ctx, r.c)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	r.progressf("serial: %d claims one at a time into %s/%s", r.cfg.TotalBursts, r.cfg.Namespace, poolName)
	res.LoadAverage = loadAverage()
	before := r.measure(ctx, res)
	window := r.startCPUWindow(ctx, w)
	runStart := time.Now()
	claims, lastReady := r.fire(ctx, w, res)
	claimsCPU := window.end(ctx)
	res.OtherWork = window.otherWork()
	if !lastReady.IsZero() {
		res.RunSeconds = round2(lastReady.Sub(runStart).Seconds())
	}
	time.Sleep(time.Second) // writes that trail the last Ready belong to the claims
	after := r.measure(ctx, res)
	r.account(res, before, after, webhooks)
	res.API.ClaimsCPUSeconds = claimsCPU
	if err := r.launchTypes(ctx, res, claims, w); err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	sc := res.Scale
	sc.SerialClaims = res.Claims.Ready
	sc.SerialP50Ms, sc.SerialP99Ms = res.Latency.Client.P50, res.Latency.Client.P99
	r.progressf("serial: %d/%d Ready, p50 %.1f ms, p99 %.1f ms", res.Claims.Ready, res.Claims.Created, sc.SerialP50Ms, sc.SerialP99Ms)
	return r.healthy()
}

// restartClaim names the claims created right after the operator's restarts.
const restartClaim = "claim-after-restart"

// restart restarts the operator and times its first claim, named name: created right after
// the new process started, again and again while admission refuses it (no webhook server
// yet), then watched to Ready.
func (r *runner) restart(ctx context.Context, cfg ScaleConfig, w *ClaimWatcher,
	restartOperator func(context.Context) (OperatorRestart, error), name string) (report.Restart, error) {
	var out report.Restart
	if restartOperator == nil {
		return out, errors.New("a scale run needs a way to restart the operator (ScaleProbes.RestartOperator)")
	}
	r.progressf("restart: stopping the operator (SIGTERM) and starting it again")
	apiCPU := r.probes.APIServerCPU
	var apiStart float64
	if apiCPU != nil {
		if v, err := apiCPU(); err == nil {
			apiStart = v
		} else {
			apiCPU = nil
		}
	}
	rs, err := restartOperator(ctx)
	if err != nil {
		return out, fmt.Errorf("restarting the operator: %w", err)
	}
	out.StopSeconds = round2(rs.Stopped.Seconds())
	readyAt := make(chan time.Time, 1)
	readyErr := make(chan error, 1)
	go func() {
		at, err := rs.WaitReady(ctx)
		readyErr <- err
		readyAt <- at
	}()

	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	s := &sent{name: name}
	for {
		out.ClaimAttempts++
		r.create(ctx, s)
		if s.createErr == nil || apierrors.IsAlreadyExists(s.createErr) {
			s.createErr = nil
			break
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return out, fmt.Errorf("creating a claim after the restart (%d attempts, last: %v): %w", out.ClaimAttempts, s.createErr, err)
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if obs, ok := w.Ready(s.name); ok {
			out.ToFirstClaimSeconds = round2(obs.ReadyAt.Sub(rs.StartedAt).Seconds())
			out.OperatorCPUSeconds, out.APIServerCPUSeconds = r.restartCPU(apiCPU, apiStart)
			break
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("the claim created after the restart was not Ready within %s", cfg.Timeout)
		case <-tick.C:
		}
	}
	if err := <-readyErr; err != nil {
		return out, fmt.Errorf("the restarted operator: %w", err)
	}
	out.ToReadySeconds = round2((<-readyAt).Sub(rs.StartedAt).Seconds())
	r.progressf("restart: stopped in %.2f s; /readyz %.2f s and first claim Ready %.2f s after the start (%d create calls); CPU to the first claim: operator %.2f s, kube-apiserver %.2f s",
		out.StopSeconds, out.ToReadySeconds, out.ToFirstClaimSeconds, out.ClaimAttempts, out.OperatorCPUSeconds, out.APIServerCPUSeconds)
	return out, r.healthy()
}

// restartCPU reads, at a restart's first claim, the new operator's CPU since its start and
// kube-apiserver's since apiStart (read by apiCPU before the stop); 0 for either it cannot
// read.
func (r *runner) restartCPU(apiCPU func() (float64, error), apiStart float64) (operator, apiserver float64) {
	if apiCPU != nil {
		if v, err := apiCPU(); err == nil {
			apiserver = round2(v - apiStart)
		}
	}
	if r.probes.OperatorUsage != nil {
		if u, err := r.probes.OperatorUsage(); err == nil {
			operator = round2(u.CPUSeconds)
		}
	}
	return operator, apiserver
}

// scaleFloor detaches the operator and makes the floor's serial claims into the first pool
// of namespace ns, binding that pool's ready members.
func (r *runner) scaleFloor(ctx context.Context, cfg ScaleConfig, ns string) (*report.Result, error) {
	fr := &runner{
		cfg: Config{
			Namespace: ns, WarmPoolSize: cfg.Replicas, BurstSize: 1, TotalBursts: cfg.FloorClaims, QPS: 1000,
			Timeout: cfg.Timeout, Progress: cfg.Progress, Floor: true,
		},
		// The operator is gone: nothing of it to read.
		probes: Probes{ComponentUsage: r.probes.ComponentUsage, Healthy: r.probes.Healthy, APIServerCPU: r.probes.APIServerCPU,
			DetachOperator: r.probes.DetachOperator},
		c: r.c, rest: r.rest, start: r.start,
	}
	if err := fr.waitForPool(ctx, cfg.Replicas, cfg.FillTimeout, "floor pool"); err != nil {
		return nil, fmt.Errorf("waiting for the floor's pool: %w", err)
	}
	if fr.probes.DetachOperator == nil {
		return nil, errors.New("the floor needs a way to stop the operator and remove its webhooks (Probes.DetachOperator)")
	}
	if err := fr.probes.DetachOperator(ctx); err != nil {
		return nil, fmt.Errorf("detaching the operator for the floor: %w", err)
	}
	pool, err := fr.floorMembers(ctx)
	if err != nil {
		return nil, err
	}
	pool.members = poolMembers(pool.members, poolName)
	if len(pool.members) < cfg.FloorClaims {
		return nil, fmt.Errorf("the floor needs %d ready members of %s/%s, it has %d", cfg.FloorClaims, ns, poolName, len(pool.members))
	}
	fr.floor = pool
	fr.progressf("floor: operator stopped, %d claims one at a time binding members of %s/%s", cfg.FloorClaims, ns, poolName)

	w, err := StartClaimWatch(ctx, fr.c, ns)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	res := &report.Result{StartedAt: time.Now(), RefillSeconds: -1, LoadAverage: loadAverage()}
	webhooks, err := webhookResources(ctx, fr.c)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	before := fr.measure(ctx, res)
	window := fr.startCPUWindow(ctx, w)
	runStart := time.Now()
	claims, lastReady := fr.fire(ctx, w, res)
	claimsCPU := window.end(ctx)
	res.OtherWork = window.otherWork()
	if !lastReady.IsZero() {
		res.RunSeconds = round2(lastReady.Sub(runStart).Seconds())
	}
	time.Sleep(time.Second)
	after := fr.measure(ctx, res)
	fr.account(res, before, after, webhooks)
	res.API.ClaimsCPUSeconds = claimsCPU
	res.ClientPath = clientPath(claims, w)
	if err := fr.launchTypes(ctx, res, claims, w); err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	fr.progressf("floor: %d/%d Ready, p50 %.1f ms, p99 %.1f ms", res.Claims.Ready, res.Claims.Created,
		res.Latency.Client.P50, res.Latency.Client.P99)
	return res, nil
}

// poolMembers keeps the members whose controller is the named pool.
func poolMembers(members []*agentsv1beta1.Sandbox, pool string) []*agentsv1beta1.Sandbox {
	var out []*agentsv1beta1.Sandbox
	for _, sb := range members {
		if ref := metav1.GetControllerOf(sb); ref != nil && ref.Kind == kindSandboxWarmPool && ref.Name == pool {
			out = append(out, sb)
		}
	}
	return out
}
