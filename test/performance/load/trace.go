package load

// One arm of the trace scenario: a demand trace (test/performance/trace) replayed against a
// pool run by one policy. The claims are made, watched, held and deleted as a sustained run's
// are (sustained.go), at the trace's times rather than a steady rate; the pool is sampled every
// second (spec.replicas, unbound members, ready ones) for its cost; and the policy runs beside:
// nothing for a static pool, the emulated HPA recipe writing the pool's /scale subresource
// (trace.HPA), or a WarmPoolAutoscaler object the operator serves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/trace"
)

// The WarmPoolAutoscaler kind, written as unstructured: the bench compiles without its Go
// types, and an operator that does not serve it fails the arm with a plain message.
const (
	autoscalerAPIVersion = "autoscaling.sandgate.dev/v1alpha1"
	autoscalerKind       = "WarmPoolAutoscaler"
	autoscalerName       = "bench-autoscaler"
)

// AutoscalerSpec is the WarmPoolAutoscaler of the autoscaler arm.
type AutoscalerSpec struct {
	MinReplicas, MaxReplicas, TargetSpare int32
	// ScaleDownWindow is its behavior.scaleDown.stabilizationWindowSeconds; 0 keeps the
	// default (300 s).
	ScaleDownWindow time.Duration
	// ScaleDownMaxStep and ScaleDownPeriod are its behavior.scaleDown.maxStep ("25%", "10")
	// and periodSeconds; empty and 0 keep the defaults (25% every 30 s).
	ScaleDownMaxStep string
	ScaleDownPeriod  time.Duration
}

// scaleDown is the spec.behavior.scaleDown of s, nil when every field keeps its default.
func (s AutoscalerSpec) scaleDown() map[string]any {
	rules := map[string]any{}
	if s.ScaleDownWindow > 0 {
		rules["stabilizationWindowSeconds"] = int64(s.ScaleDownWindow / time.Second)
	}
	if s.ScaleDownMaxStep != "" {
		// "10" is a number of members, as the schema's int-or-string has it; "25%" a string.
		if v := intstr.Parse(s.ScaleDownMaxStep); v.Type == intstr.Int {
			rules["maxStep"] = int64(v.IntVal)
		} else {
			rules["maxStep"] = v.StrVal
		}
	}
	if s.ScaleDownPeriod > 0 {
		rules["periodSeconds"] = int64(s.ScaleDownPeriod / time.Second)
	}
	if len(rules) == 0 {
		return nil
	}
	return rules
}

// TraceConfig is one arm of the trace scenario.
type TraceConfig struct {
	Namespace string
	PodSpec   corev1.PodSpec
	Trace     *trace.Trace
	// Policy is report.PolicyStatic, PolicyHPA or PolicyAutoscaler.
	Policy string
	// Replicas is the pool's replicas when the trace starts; a static pool keeps them.
	Replicas   int32
	HPA        trace.HPAConfig
	Autoscaler AutoscalerSpec
	// PoolCreateWait bounds the wait for the pool to be full before the trace; Timeout how long
	// the claims still pending when the trace ends may take to be Ready.
	PoolCreateWait, Timeout time.Duration
	Progress                io.Writer
}

// Validate reports the settings that cannot run.
func (c TraceConfig) Validate() error {
	var errs []error
	if c.Trace == nil || len(c.Trace.Arrivals) == 0 {
		errs = append(errs, errors.New("a trace arm needs a trace with arrivals"))
	}
	if c.Replicas < 1 {
		errs = append(errs, errors.New("a trace arm's pool starts with at least one member"))
	}
	switch c.Policy {
	case report.PolicyStatic:
	case report.PolicyHPA:
		if err := c.HPA.Validate(); err != nil {
			errs = append(errs, err)
		}
	case report.PolicyAutoscaler:
		if a := c.Autoscaler; a.MaxReplicas < 1 || a.MinReplicas > a.MaxReplicas {
			errs = append(errs, fmt.Errorf("autoscaler bounds: want min (%d) ≤ max (%d), max ≥ 1", a.MinReplicas, a.MaxReplicas))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown policy %q", c.Policy))
	}
	return errors.Join(errs...)
}

// traceArm carries an arm's state besides the sustained run's it borrows.
type traceArm struct {
	*sustained
	tc TraceConfig

	timelineMu sync.Mutex
	timeline   []report.TracePoint
	scalesMu   sync.Mutex
	scales     []report.PoolScale
}

// RunTrace replays cfg's trace against the cluster of restCfg (an admin configuration) and
// returns the arm's figures.
func RunTrace(ctx context.Context, restCfg *rest.Config, cfg TraceConfig, probes Probes) (*report.TraceArm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	peak := cfg.Trace.Shape.PeakRate
	for _, b := range cfg.Trace.Bursts {
		peak = max(peak, float64(b.Claims)/max(cfg.Trace.Shape.BurstSpread.Seconds(), 1))
	}
	c, err := NewClient(restCfg, 3*peak) // creates, deletes, the policy's writes
	if err != nil {
		return nil, err
	}
	tr := cfg.Trace
	r := &runner{cfg: Config{
		Namespace: cfg.Namespace, PodSpec: cfg.PodSpec, WarmPoolSize: cfg.Replicas, QPS: peak,
		Timeout: cfg.Timeout, Progress: cfg.Progress,
	}, probes: probes, c: c, rest: restCfg, start: time.Now()}
	res := &report.Result{StartedAt: r.start, RefillSeconds: -1}
	a := &traceArm{tc: cfg, sustained: &sustained{r: r, launch: map[string]string{}, settled: make(chan struct{}), cfg: SustainedConfig{
		Namespace: cfg.Namespace, PodSpec: cfg.PodSpec, PoolSize: cfg.Replicas,
		Rate: float64(len(tr.Arrivals)) / tr.Shape.Duration.Seconds(), Duration: tr.Shape.Duration,
		LifetimeMin: tr.Shape.LifetimeMin, LifetimeMax: tr.Shape.LifetimeMax, Seed: tr.Shape.Seed,
		PoolCreateWait: cfg.PoolCreateWait, Timeout: cfg.Timeout, Progress: cfg.Progress,
	}}}

	if err := r.createObjects(ctx); err != nil {
		return nil, err
	}
	fillStart := time.Now()
	if err := a.waitForPool(ctx); err != nil {
		return nil, fmt.Errorf("waiting for the warm pool to be full: %w", err)
	}
	res.PoolFillSeconds = time.Since(fillStart).Seconds()
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	if err := a.startCache(cacheCtx, restCfg); err != nil {
		return nil, err
	}
	w, err := StartClaimWatch(ctx, c, cfg.Namespace)
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	webhooks, err := webhookResources(ctx, c)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	res.LoadAverage = loadAverage()
	before := r.measure(ctx, res)
	policyCtx, stopPolicy := context.WithCancel(ctx)
	defer stopPolicy()
	runStart := time.Now()
	policyDone, err := a.startPolicy(policyCtx, runStart)
	if err != nil {
		return nil, err
	}
	samplerDone := a.sampleTimeline(cacheCtx, runStart)
	window := r.startCPUWindow(ctx, w)
	var deletes sync.WaitGroup
	lastCreate := a.replay(ctx, w, runStart, &deletes)
	a.waitForClaims(ctx, w)
	claimsCPU := window.end(ctx)
	close(a.settled)
	res.OtherWork = window.otherWork()
	if last := a.lastReady(w); !last.IsZero() {
		res.RunSeconds = last.Sub(runStart).Seconds()
	}
	a.progressf(w)
	r.progressf("every claim Ready or given up: deleting the claims still alive at once")
	deletes.Wait()
	stopPolicy()
	<-policyDone
	time.Sleep(time.Second) // writes that trail the deletions belong to the run
	notes := a.autoscalerNotes(ctx)
	stopCache()
	<-samplerDone
	after := r.measure(ctx, res)
	a.tally(res, w, runStart, lastCreate)
	res.Sustained = nil // the arm's own figures below replace the steady-rate ones
	r.account(res, before, after, webhooks)
	res.API.ClaimsCPUSeconds = claimsCPU
	return a.figures(res, notes, servedStarting(before.operator, after.operator)), nil
}

// replay creates the trace's claims at their times, each held its lifetime once Ready and
// then deleted (sustained.claim); it returns when the last create started. Demand is the
// trace's: nothing holds an arrival back.
func (a *traceArm) replay(ctx context.Context, w *ClaimWatcher, start time.Time, deletes *sync.WaitGroup) time.Time {
	arrivals := a.tc.Trace.Arrivals
	inFlight := make(chan struct{}, len(arrivals))
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	lastProgress := time.Now()
	var last time.Time
	for i, arr := range arrivals {
		if wait := time.Until(start.Add(arr.At)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return last
			case <-timer.C:
			}
		}
		inFlight <- struct{}{}
		c := &sustainedClaim{sent: sent{name: trace.ClaimName(i)}, lifetime: arr.Lifetime}
		last = time.Now()
		a.begin(ctx, w, c, inFlight, deletes)
		if time.Since(lastProgress) >= 10*time.Second {
			lastProgress = time.Now()
			a.progressf(w)
		}
	}
	return last
}

// sampleTimeline records the pool every second from start: its spec.replicas, unbound members
// and ready ones, from the cache.
func (a *traceArm) sampleTimeline(ctx context.Context, start time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var pool extv1beta1.SandboxWarmPool
			replicas := int32(-1)
			if err := a.cache.Get(ctx, client.ObjectKey{Namespace: a.tc.Namespace, Name: poolName}, &pool); err == nil && pool.Spec.Replicas != nil {
				replicas = *pool.Spec.Replicas
			}
			ready, members := a.poolNow(ctx)
			p := report.TracePoint{AtSeconds: round3(time.Since(start).Seconds()), Replicas: replicas, Members: members, Ready: ready}
			a.timelineMu.Lock()
			if n := len(a.timeline); replicas < 0 && n > 0 {
				p.Replicas = a.timeline[n-1].Replicas // a failed read keeps the last value
			}
			a.timeline = append(a.timeline, p)
			a.timelineMu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// startPolicy starts what scales the pool: nothing (static), the emulated HPA, or a
// WarmPoolAutoscaler. The channel is closed once the policy has stopped with ctx.
func (a *traceArm) startPolicy(ctx context.Context, start time.Time) (<-chan struct{}, error) {
	done := make(chan struct{})
	switch a.tc.Policy {
	case report.PolicyHPA:
		if a.r.probes.OperatorMetrics == nil {
			return nil, errors.New("the hpa arm reads agent_sandbox_claim_creation_total from the operator's metrics: none to scrape")
		}
		go func() {
			defer close(done)
			a.runHPA(ctx, start)
		}()
		a.r.progressf("hpa: an HPA emulated on the claim creation rate, min %d, max %d, target %g claims/s per member, synced every %s, the rate over %s seen %s late",
			a.tc.HPA.MinReplicas, a.tc.HPA.MaxReplicas, a.tc.HPA.Target, a.tc.HPA.Sync, a.tc.HPA.Window, a.tc.HPA.Delay)
	case report.PolicyAutoscaler:
		if err := a.createAutoscaler(ctx); err != nil {
			return nil, err
		}
		go func() {
			defer close(done)
			a.watchReplicas(ctx, start)
		}()
	default:
		close(done)
	}
	return done, nil
}

// runHPA scrapes the operator's claim creation counter every HPA.Scrape and syncs the
// emulated HPA every HPA.Sync, writing the pool's /scale subresource when it scales.
func (a *traceArm) runHPA(ctx context.Context, start time.Time) {
	cfg := a.tc.HPA
	hpa := trace.NewHPA(cfg)
	metric := &trace.RateMetric{Delay: cfg.Delay, Window: cfg.Window}
	scrapeTick, syncTick := time.NewTicker(cfg.Scrape), time.NewTicker(cfg.Sync)
	defer scrapeTick.Stop()
	defer syncTick.Stop()
	match := map[string]string{"namespace": a.tc.Namespace, "warmpool_name": poolName}
	scrapeNow := func() {
		snap, err := a.r.probes.OperatorMetrics(ctx)
		if err != nil {
			a.r.progressf("hpa: scraping the operator: %v", err)
			return
		}
		metric.Observe(time.Now(), snap.Sum(reconcilers.MetricClaimCreationTotal, match))
	}
	scrapeNow()
	pool := &extv1beta1.SandboxWarmPool{}
	pool.Namespace, pool.Name = a.tc.Namespace, poolName
	for {
		select {
		case <-ctx.Done():
			return
		case <-scrapeTick.C:
			scrapeNow()
		case <-syncTick.C:
			scale := &autoscalingv1.Scale{}
			if err := a.r.c.SubResource("scale").Get(ctx, pool, scale); err != nil {
				a.r.progressf("hpa: reading the pool's scale: %v", err)
				continue
			}
			now := time.Now()
			rate, ok := metric.At(now)
			d := hpa.Sync(now, scale.Spec.Replicas, scale.Status.Replicas, rate, ok)
			if d.Desired == d.Current {
				continue
			}
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, d.Desired))
			if err := a.r.c.SubResource("scale").Patch(ctx, pool, patch, client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
				a.r.progressf("hpa: writing the pool's scale: %v", err)
				continue
			}
			a.r.progressf("hpa: %d -> %d members (rate %.2f/s seen, %s)", d.Current, d.Desired, d.Metric, d.Reason)
			a.noteScale(report.PoolScale{AtSeconds: round3(now.Sub(start).Seconds()), From: d.Current, To: d.Desired,
				Metric: round3(d.Metric), Reason: d.Reason})
		}
	}
}

// createAutoscaler creates the arm's WarmPoolAutoscaler on the pool.
func (a *traceArm) createAutoscaler(ctx context.Context) error {
	return createWarmPoolAutoscaler(ctx, a.r, a.tc.Namespace, a.tc.Autoscaler)
}

// createWarmPoolAutoscaler creates a WarmPoolAutoscaler of spec s on the run's pool.
func createWarmPoolAutoscaler(ctx context.Context, r *runner, namespace string, s AutoscalerSpec) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": autoscalerAPIVersion,
		"kind":       autoscalerKind,
		"metadata":   map[string]any{"name": autoscalerName, "namespace": namespace},
		"spec": map[string]any{
			"poolRef":     map[string]any{"name": poolName},
			"minReplicas": int64(s.MinReplicas),
			"maxReplicas": int64(s.MaxReplicas),
			"targetSpare": int64(s.TargetSpare),
		},
	}}
	if down := s.scaleDown(); down != nil {
		u.Object["spec"].(map[string]any)["behavior"] = map[string]any{"scaleDown": down}
	}
	if err := r.c.Create(ctx, u); err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("the cluster does not serve %s %s (an operator without the autoscaler): %w", autoscalerAPIVersion, autoscalerKind, err)
		}
		return fmt.Errorf("creating the WarmPoolAutoscaler: %w", err)
	}
	r.progressf("autoscaler: WarmPoolAutoscaler %s on pool %s, min %d, max %d, targetSpare %d", autoscalerName, poolName, s.MinReplicas, s.MaxReplicas, s.TargetSpare)
	return nil
}

// watchReplicas notes each change of the pool's spec.replicas the autoscaler makes, from the
// cache, every 200 ms.
func (a *traceArm) watchReplicas(ctx context.Context, start time.Time) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := a.tc.Replicas
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var pool extv1beta1.SandboxWarmPool
		if err := a.cache.Get(ctx, client.ObjectKey{Namespace: a.tc.Namespace, Name: poolName}, &pool); err != nil || pool.Spec.Replicas == nil {
			continue
		}
		if now := *pool.Spec.Replicas; now != last {
			a.noteScale(report.PoolScale{AtSeconds: round3(time.Since(start).Seconds()), From: last, To: now})
			last = now
		}
	}
}

// autoscalerNotes reads the WarmPoolAutoscaler's status at the end of the arm: its last scale
// and its demand estimate.
func (a *traceArm) autoscalerNotes(ctx context.Context) []string {
	if a.tc.Policy != report.PolicyAutoscaler {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(autoscalerAPIVersion)
	u.SetKind(autoscalerKind)
	if err := a.r.c.Get(ctx, client.ObjectKey{Namespace: a.tc.Namespace, Name: autoscalerName}, u); err != nil {
		return []string{fmt.Sprintf("reading the WarmPoolAutoscaler at the end: %v", err)}
	}
	str := func(path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"status"}, path...)...)
		return fmt.Sprint(v)
	}
	return []string{fmt.Sprintf("WarmPoolAutoscaler status at the end: desired %s, last scale %q; demand %s claims/s (%s claims in the short window, %s in the long one), %s claims expected during a member start-up of %s ms (p90 of %s members)",
		str("desiredReplicas"), str("lastScaleReason"), str("demand", "claimsPerSecond"), str("demand", "shortWindowClaims"), str("demand", "longWindowClaims"),
		str("demand", "expectedClaimsDuringStartup"), str("demand", "memberStartupMilliseconds"), str("demand", "memberStartupSamples"))}
}

func (a *traceArm) noteScale(s report.PoolScale) {
	a.scalesMu.Lock()
	a.scales = append(a.scales, s)
	a.scalesMu.Unlock()
}

// figures returns the arm's figures from its result, timeline and scales, the cost taken over
// the trace's duration: what every policy is compared on. starting is how many claims the
// operator served from a member still starting (-1: unknown); they are not warm to the
// claim, which waited for the member's start-up.
func (a *traceArm) figures(res *report.Result, notes []string, starting int) *report.TraceArm {
	a.timelineMu.Lock()
	timeline := slices.Clone(a.timeline)
	a.timelineMu.Unlock()
	a.scalesMu.Lock()
	scales := slices.Clone(a.scales)
	a.scalesMu.Unlock()
	end := a.tc.Trace.Shape.Duration.Seconds()
	arm := &report.TraceArm{
		Policy: a.tc.Policy, Result: res, Timeline: timeline, Scales: scales, Notes: notes,
		WarmShare:         report.ReadyWarmShare(res.Samples, starting),
		WarmStarting:      starting,
		IdleMemberSeconds: round3(report.IdleMemberSeconds(timeline, 0, end)),
		ReplicaSeconds:    round3(report.ReplicaSeconds(timeline, 0, end)),
	}
	arm.MinReady, arm.DrySeconds = report.DryOf(timeline, 0, end)
	return arm
}

// progressf prints the arm so far: claims, warm share and the pool's last sample.
func (a *traceArm) progressf(w *ClaimWatcher) {
	created, ready, share := a.counts(w)
	a.timelineMu.Lock()
	var p report.TracePoint
	if n := len(a.timeline); n > 0 {
		p = a.timeline[n-1]
	}
	a.timelineMu.Unlock()
	a.r.progressf("%s: %.0f of %.0f s, %d of %d claims created, %d Ready, %.1f%% warm; pool %d replicas, %d ready of %d unbound members",
		a.tc.Policy, p.AtSeconds, a.tc.Trace.Shape.Duration.Seconds(), created, len(a.tc.Trace.Arrivals), ready, share, p.Replicas, p.Ready, p.Members)
}
