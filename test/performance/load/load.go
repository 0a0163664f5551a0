// Package load runs one load test against a cluster with the operator running: it creates a
// SandboxTemplate and a SandboxWarmPool, waits for the pool to be full and Ready, fires bursts
// of SandboxClaims at a given rate, watches them to Ready=True and measures what the claims
// cost: latency in the client's and the server's view, warm hits, API requests (from the API
// server's own metrics), reconciles and the operator's CPU and memory. Config.Floor measures
// the API server's floor instead: the same claims with the operator stopped and the load
// generator making each claim's writes itself (floor.go); with a pool of zero replicas the
// claims are served cold, and the floor makes the cold path's writes (cold.go).
// Config.LightFloor binds them to minimal Sandboxes without pods instead (light.go).
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/proc"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// Names of the objects a run creates in its namespace.
const (
	templateName = "bench-template"
	poolName     = "bench-pool"
)

// emptyPoolWait bounds the wait for an operator to show it has seen a pool of zero replicas:
// an operator that writes no observedGeneration is not waited for longer.
const emptyPoolWait = 5 * time.Second

// Config is one run.
type Config struct {
	Namespace    string
	PodSpec      corev1.PodSpec
	WarmPoolSize int32
	// Autoscaler, when set, puts a WarmPoolAutoscaler on the pool once it is created; the pool
	// starts at WarmPoolSize (its minimum, as a rule) and the autoscaler sizes it from there.
	Autoscaler  *AutoscalerSpec
	BurstSize   int
	TotalBursts int
	QPS         float64
	// PoolCreateWait bounds the wait for the pool to be full and Ready before the run.
	PoolCreateWait time.Duration
	// Timeout bounds the wait for each burst's claims to be Ready.
	Timeout time.Duration
	// BurstPause is how long the run waits after a burst's claims are all Ready before it
	// sends the next burst (the public rapid-burst recipe pauses 20 s); 0 sends it at once.
	BurstPause time.Duration
	// RefillWait bounds the wait, after the last burst, for the pool to be full again; the
	// requests of the refill are counted.
	RefillWait time.Duration
	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// APIServerProfile, when set, receives a CPU profile of kube-apiserver taken over the
	// first ProfileSeconds of the run (its /debug/pprof/profile).
	APIServerProfile string
	ProfileSeconds   int
	// WebhookServerProfile, when set, receives a CPU profile of the process answering the
	// webhooks over the same seconds (Probes.ProfileWebhookServer).
	WebhookServerProfile string
	// Floor runs the API server's floor instead of measuring the operator: once the pool is
	// full, Probes.DetachOperator stops the operator and removes its admission webhooks (or
	// has them answered at once), and the load generator makes each claim's writes itself
	// (see floor.go). Nothing refills the pool. With WarmPoolSize 0 it is the cold floor
	// (cold.go): the load generator makes each claim's Sandbox and pod as sandgate would.
	Floor bool
	// LightFloor is the floor on minimal members (light.go): the pool is created with zero
	// replicas, the operator detached at once, and the load generator makes WarmPoolSize
	// minimal Ready Sandboxes without pods before the claims. It implies Floor.
	LightFloor bool
	// FloorRoute makes the floor's warm claims also make sandgate's route write (floor.go):
	// after the bind, one merge patch of the member's pod that makes it look bound, before
	// the claim's status says Ready (Ready means routable). With the admission webhooks kept
	// and answered at once, it is the contract floor: the writes and round trips sandgate's
	// API asks of every warm claim, made by a client that decides nothing. It needs Floor and
	// members with pods (not LightFloor, not a cold pool).
	FloorRoute bool
}

// Probes are where the measurements come from besides the API server.
type Probes struct {
	// OperatorMetrics scrapes the operator; nil when there is none to scrape.
	OperatorMetrics func(context.Context) (scrape.Snapshot, error)
	// OperatorUsage reads the operator's CPU and memory; nil when it is not a child.
	OperatorUsage func() (proc.Usage, error)
	// ComponentUsage reads the control plane's processes; nil for a remote cluster.
	ComponentUsage func() map[string]proc.Usage
	// Healthy reports a process of the environment that died; nil means always healthy.
	Healthy func() error
	// DetachOperator stops the operator and removes its admission webhooks, or has them
	// answered at once without a decision; a floor run calls it once the pool is full.
	DetachOperator func(context.Context) error
	// StandInMetrics scrapes the floor's stand-in webhook server, StandInUsage reads its
	// process (nil when it runs in the load generator's own process, or there is none).
	StandInMetrics func(context.Context) (scrape.Snapshot, error)
	StandInUsage   func() (proc.Usage, error)
	// ProfileWebhookServer writes a CPU profile of seconds of the process answering the
	// webhooks to path; nil when it cannot.
	ProfileWebhookServer func(ctx context.Context, seconds int, path string) error
	// APIServerCPU reads kube-apiserver's CPU seconds so far, cheaply enough to be called at
	// every claim's Ready event; nil reads process_cpu_seconds_total from its /metrics
	// instead, once after the last Ready.
	APIServerCPU func() (float64, error)
}

// DefaultPodSpec is the pod spec used without --template: one container that kwok's nodes
// start like any other.
func DefaultPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}}
}

// ReadPodSpec reads a corev1.PodSpec from a YAML or JSON file, rejecting unknown fields.
func ReadPodSpec(path string) (corev1.PodSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return corev1.PodSpec{}, fmt.Errorf("reading pod spec: %w", err)
	}
	var spec corev1.PodSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return corev1.PodSpec{}, fmt.Errorf("decoding pod spec %s: %w", path, err)
	}
	if len(spec.Containers) == 0 {
		return corev1.PodSpec{}, fmt.Errorf("pod spec %s has no containers", path)
	}
	return spec, nil
}

// runner carries the state of one run.
type runner struct {
	cfg Config
	// bursts measures a run of several bursts burst by burst; nil otherwise (perBurst).
	bursts *burstProbe
	probes Probes
	c      client.WithWatch
	rest   *rest.Config
	start  time.Time
	// floor is the pool members a floor run binds; nil when the operator binds.
	floor *floorPool
	// coldPods is the pod watch of a cold floor run; nil otherwise.
	coldPods *podWatcher
	// template and pool are the objects createObjects made, as the API server returned them.
	template *extv1beta1.SandboxTemplate
	pool     *extv1beta1.SandboxWarmPool
}

func (r *runner) progressf(format string, args ...any) {
	if r.cfg.Progress != nil {
		_, _ = fmt.Fprintf(r.cfg.Progress, "%s "+format+"\n", append([]any{time.Since(r.start).Round(100 * time.Millisecond)}, args...)...)
	}
}

func (r *runner) healthy() error {
	if r.probes.Healthy == nil {
		return nil
	}
	return r.probes.Healthy()
}

// NewClient returns a client whose rate limit does not get in the way of qps creates a
// second, plus the watch and polls.
func NewClient(cfg *rest.Config, qps float64) (client.WithWatch, error) {
	c := rest.CopyConfig(cfg)
	c.QPS = float32(max(2*qps, 1000))
	c.Burst = int(max(4*qps, 2000))
	cl, err := client.NewWithWatch(c, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// Run runs cfg against the cluster of restCfg (an admin configuration: it reads the API
// server's /metrics).
func Run(ctx context.Context, restCfg *rest.Config, cfg Config, probes Probes) (*report.Result, error) {
	if cfg.LightFloor {
		cfg.Floor = true
	}
	if cfg.FloorRoute && (!cfg.Floor || cfg.LightFloor || cfg.WarmPoolSize == 0) {
		return nil, errors.New("FloorRoute routes the pods of the operator's warm members: it needs Floor, a pool with members and not LightFloor")
	}
	c, err := NewClient(restCfg, cfg.QPS)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, probes: probes, c: c, rest: restCfg, start: time.Now()}
	res := &report.Result{StartedAt: r.start, RefillSeconds: -1}

	if err := r.createObjects(ctx); err != nil {
		return nil, err
	}
	fillStart := time.Now()
	if err := r.waitForPool(ctx, r.poolReplicas(), cfg.PoolCreateWait, "pool filling"); err != nil {
		return nil, fmt.Errorf("waiting for the warm pool to be full: %w", err)
	}
	res.PoolFillSeconds = time.Since(fillStart).Seconds()
	if cfg.Floor {
		if err := r.detach(ctx); err != nil {
			return nil, err
		}
		if r.coldPods != nil {
			defer r.coldPods.stop()
		}
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
	profileDone := r.profileAPIServer(ctx)
	window := r.startCPUWindow(ctx, w)
	if perBurst(cfg) {
		r.bursts = newBurstProbe(r)
		go r.bursts.sample(ctx, w)
	}
	runStart := time.Now()
	claims, lastReady := r.fire(ctx, w, res)
	claimsCPU := window.end(ctx)
	if r.bursts != nil {
		r.bursts.stopTimeline()
	}
	res.OtherWork = window.otherWork()
	res.LoadGeneratorCPUSeconds = window.selfCPU()
	anyReady := !lastReady.IsZero()
	if !anyReady {
		lastReady = time.Now()
	}
	res.RunSeconds = lastReady.Sub(runStart).Seconds()

	if anyReady && !cfg.Floor {
		refillStart := time.Now()
		want := r.poolReplicas()
		if cfg.Autoscaler != nil {
			want = -1 // the size the autoscaler left it at
		}
		if err := r.waitForPool(ctx, want, cfg.RefillWait, "pool refilling"); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("pool not full again within %s: %v", cfg.RefillWait, err))
		} else {
			res.RefillSeconds = time.Since(refillStart).Seconds()
		}
	}
	// Writes that trail the last Ready (events, the last status patches) belong to the run.
	time.Sleep(time.Second)
	after := r.measure(ctx, res)
	r.account(res, before, after, webhooks)
	res.API.ClaimsCPUSeconds = claimsCPU
	switch {
	case r.coldPods != nil:
		res.ColdPath = coldPath(claims, w)
		r.progressf("%s", res.ColdPath)
	case cfg.Floor:
		res.ClientPath = clientPath(claims, w)
	}
	if err := <-profileDone; err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	if err := r.launchTypes(ctx, res, claims, w); err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	if r.bursts != nil {
		res.Bursts = r.bursts.result(res.Samples)
	}
	return res, nil
}

// poolReplicas is the pool's spec.replicas: none for the light floor, whose members the load
// generator makes.
func (r *runner) poolReplicas() int32 {
	if r.cfg.LightFloor {
		return 0
	}
	return r.cfg.WarmPoolSize
}

// detach stops the operator and removes admission for a floor run, and takes the pool's
// ready members for the load generator to bind: the operator's, or minimal ones it makes for
// the light floor. A cold floor (no members) opens its pod watch instead.
func (r *runner) detach(ctx context.Context) error {
	if r.probes.DetachOperator == nil {
		return errors.New("a floor run needs a way to stop the operator and remove its webhooks (Probes.DetachOperator)")
	}
	if err := r.probes.DetachOperator(ctx); err != nil {
		return fmt.Errorf("detaching the operator for the floor: %w", err)
	}
	if !r.cfg.LightFloor && r.cfg.WarmPoolSize == 0 {
		pods, err := startPodWatch(ctx, r.c, r.cfg.Namespace)
		if err != nil {
			return fmt.Errorf("starting the cold floor's pod watch: %w", err)
		}
		r.coldPods = pods
		r.progressf("cold floor: operator stopped; the load generator creates each claim's Sandbox and pod")
		return nil
	}
	var pool *floorPool
	var err error
	if r.cfg.LightFloor {
		start := time.Now()
		pool, err = r.makeLightMembers(ctx, int(r.cfg.WarmPoolSize))
		if err == nil {
			r.progressf("light floor: made %d minimal Ready members without pods in %s", len(pool.members), time.Since(start).Round(100*time.Millisecond))
		}
	} else {
		pool, err = r.floorMembers(ctx)
	}
	if err != nil {
		return err
	}
	if want := r.cfg.BurstSize * r.cfg.TotalBursts; len(pool.members) < want {
		return fmt.Errorf("the floor needs %d ready pool members, the pool has %d", want, len(pool.members))
	}
	r.floor = pool
	r.progressf("floor: operator stopped, %d ready members to bind", len(pool.members))
	return nil
}

// createObjects creates the namespace, the template and the pool.
func (r *runner) createObjects(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Namespace}}
	if err := r.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", r.cfg.Namespace, err)
	}
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: r.cfg.Namespace},
		Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: r.cfg.PodSpec},
		}},
	}
	if err := r.c.Create(ctx, tmpl); err != nil {
		return fmt.Errorf("creating template %s/%s: %w", r.cfg.Namespace, templateName, err)
	}
	r.template = tmpl
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: r.cfg.Namespace},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:           ptr.To(r.poolReplicas()),
			SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: templateName},
		},
	}
	if err := r.c.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating pool %s/%s: %w", r.cfg.Namespace, poolName, err)
	}
	r.pool = pool
	r.progressf("created template %s and pool %s (%d replicas) in namespace %s", templateName, poolName, r.poolReplicas(), r.cfg.Namespace)
	if r.cfg.Autoscaler != nil {
		return createWarmPoolAutoscaler(ctx, r, r.cfg.Namespace, *r.cfg.Autoscaler)
	}
	return nil
}

// DeleteNamespace deletes a run's namespace and with it everything the run created.
func DeleteNamespace(ctx context.Context, cfg *rest.Config, ns string) error {
	c, err := NewClient(cfg, 1)
	if err != nil {
		return err
	}
	err = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	return nil
}

// waitForPool waits until the pool's status shows its want replicas Ready, printing progress
// every two seconds; want < 0 waits for the pool's own spec.replicas (an autoscaled pool's
// size is the autoscaler's). An empty pool is full at once, but waits a moment (emptyPoolWait) for
// the operator to show it has seen the pool (status.observedGeneration), so that the first
// claim does not race the operator's start.
func (r *runner) waitForPool(ctx context.Context, want int32, limit time.Duration, what string) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	own := want < 0
	start := time.Now()
	lastPrint := time.Time{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		var pool extv1beta1.SandboxWarmPool
		err := r.c.Get(ctx, client.ObjectKey{Namespace: r.cfg.Namespace, Name: poolName}, &pool)
		if own && err == nil && pool.Spec.Replicas != nil {
			want = *pool.Spec.Replicas
		}
		full := err == nil && pool.Status.ReadyReplicas >= want && pool.Status.Replicas == want
		if full && want == 0 && pool.Status.ObservedGeneration < pool.Generation && time.Since(start) < emptyPoolWait {
			full = false
		}
		if full {
			r.progressf("%s: %d/%d ready after %s", what, pool.Status.ReadyReplicas, want, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(lastPrint) >= 2*time.Second {
			lastPrint = time.Now()
			r.progressf("%s: %d/%d ready, %d members (%s)", what, pool.Status.ReadyReplicas, want, pool.Status.Replicas, time.Since(start).Round(time.Second))
		}
		if err := r.healthy(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w (last read: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("%w: %d/%d ready, %d members", ctx.Err(), pool.Status.ReadyReplicas, want, pool.Status.Replicas)
		case <-tick.C:
		}
	}
}

// sent is a claim the run created.
type sent struct {
	name string
	// burst is the burst the claim was sent in, from 1.
	burst     int
	createdAt time.Time // start of the create call
	callTook  time.Duration
	createErr error
	// floor is the timing of a floor claim's writes; floorErr why it has none, floorBindErrs
	// the bind patches that failed on the way.
	floor         *floorTimes
	floorErr      error
	floorBindErrs []error
	// cold is the timing of a cold floor claim's writes.
	cold *coldTimes
}

// fire sends the bursts and waits for each one's claims; it returns the claims and when the
// last one became Ready.
func (r *runner) fire(ctx context.Context, w *ClaimWatcher, res *report.Result) ([]*sent, time.Time) {
	var all []*sent
	var lastReady time.Time
	limiter := rate.NewLimiter(rate.Limit(r.cfg.QPS), 1)
	for b := range r.cfg.TotalBursts {
		if b > 0 && r.cfg.BurstPause > 0 {
			r.progressf("pausing %s before burst %d/%d", r.cfg.BurstPause, b+1, r.cfg.TotalBursts)
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.BurstPause):
			}
		}
		if r.bursts != nil {
			r.bursts.begin(ctx, b)
		}
		burst := make([]*sent, r.cfg.BurstSize)
		var wg sync.WaitGroup
		for i := range burst {
			if err := limiter.Wait(ctx); err != nil {
				burst = burst[:i]
				break
			}
			s := &sent{name: fmt.Sprintf("claim-%03d-%04d", b, i), burst: b + 1}
			burst[i] = s
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch {
				case r.floor != nil:
					r.floorClaim(ctx, s, r.floor)
					return
				case r.coldPods != nil:
					r.coldFloorClaim(ctx, s, r.coldPods)
					return
				}
				r.create(ctx, s)
			}()
		}
		wg.Wait()
		all = append(all, burst...)
		last := r.waitForClaims(ctx, w, burst, b)
		if last.After(lastReady) {
			lastReady = last
		}
		if r.bursts != nil {
			var first time.Time
			if len(burst) > 0 {
				first = burst[0].createdAt
			}
			r.bursts.end(ctx, b, first, last)
		}
	}
	for _, s := range all {
		res.Claims.Created++
		if s.createErr != nil {
			res.Claims.Created--
			res.Claims.CreateErrors++
			if len(res.Errors) < 10 {
				res.Errors = append(res.Errors, fmt.Sprintf("creating claim %s: %v", s.name, s.createErr))
			}
		}
		for _, err := range append(s.floorBindErrs, s.floorErr) {
			if err != nil && len(res.Errors) < 10 {
				res.Errors = append(res.Errors, fmt.Sprintf("floor claim %s: %v", s.name, err))
			}
		}
	}
	return all, lastReady
}

// create creates one claim, noting when the call started; the client-first-requested-at
// annotation carries that time, as the public clients set it. It returns the claim as created.
func (r *runner) create(ctx context.Context, s *sent) *extv1beta1.SandboxClaim {
	s.createdAt = time.Now()
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.name,
			Namespace:   r.cfg.Namespace,
			Labels:      map[string]string{agentsv1beta1.LabelCreatedBy: agentsv1beta1.CreatedByGoClient},
			Annotations: map[string]string{agentsv1beta1.AnnotationClientFirstRequestedAt: s.createdAt.UTC().Format(time.RFC3339Nano)},
		},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: poolName}},
	}
	s.createErr = r.c.Create(ctx, claim)
	s.callTook = time.Since(s.createdAt)
	return claim
}

// waitForClaims waits until every created claim of the burst is Ready or the timeout passes,
// and returns when the last one became Ready.
func (r *runner) waitForClaims(ctx context.Context, w *ClaimWatcher, burst []*sent, b int) time.Time {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	start := time.Now()
	lastPrint := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ready, pending := 0, 0
		var last time.Time
		for _, s := range burst {
			if s.createErr != nil {
				continue
			}
			if obs, ok := w.Ready(s.name); ok {
				ready++
				if obs.ReadyAt.After(last) {
					last = obs.ReadyAt
				}
			} else {
				pending++
			}
		}
		if pending == 0 {
			if r.cfg.TotalBursts > 1 && r.cfg.BurstSize > 1 {
				r.progressf("burst %d/%d: %d claims Ready", b+1, r.cfg.TotalBursts, ready)
			}
			return last
		}
		if time.Since(lastPrint) >= 2*time.Second {
			lastPrint = time.Now()
			r.progressf("burst %d/%d: %d/%d claims Ready (%s)", b+1, r.cfg.TotalBursts, ready, ready+pending, time.Since(start).Round(time.Second))
		}
		healthErr := r.healthy()
		select {
		case <-ctx.Done():
			r.progressf("burst %d/%d: %d claims not Ready after %s", b+1, r.cfg.TotalBursts, pending, r.cfg.Timeout)
			return last
		case <-tick.C:
			if healthErr != nil {
				r.progressf("giving up on burst %d: %v", b+1, healthErr)
				return last
			}
		}
	}
}

// snapshot is everything measured at one moment.
type snapshot struct {
	api        scrape.Snapshot
	operator   scrape.Snapshot
	usage      *proc.Usage
	components map[string]proc.Usage
	// standIn and standInUsage are the floor's stand-in webhook server's.
	standIn      scrape.Snapshot
	standInUsage *proc.Usage
}

// measure scrapes the API server and the operator and reads the processes' usage; failures
// become errors of the result, not of the run.
func (r *runner) measure(ctx context.Context, res *report.Result) snapshot {
	var s snapshot
	var err error
	if s.api, err = scrape.FromAPIServer(ctx, r.rest); err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	if r.probes.OperatorMetrics != nil {
		if s.operator, err = r.probes.OperatorMetrics(ctx); err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	if r.probes.OperatorUsage != nil {
		if u, err := r.probes.OperatorUsage(); err != nil {
			res.Errors = append(res.Errors, fmt.Sprintf("reading the operator's usage: %v", err))
		} else {
			s.usage = &u
		}
	}
	if r.probes.ComponentUsage != nil {
		s.components = r.probes.ComponentUsage()
	}
	if r.probes.StandInMetrics != nil {
		if s.standIn, err = r.probes.StandInMetrics(ctx); err != nil {
			res.Errors = append(res.Errors, err.Error())
		}
	}
	if r.probes.StandInUsage != nil {
		if u, err := r.probes.StandInUsage(); err == nil {
			s.standInUsage = &u
		}
	}
	return s
}

// profileAPIServer starts a CPU profile of kube-apiserver, written to cfg.APIServerProfile;
// the channel gets its outcome.
func (r *runner) profileAPIServer(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	if r.cfg.APIServerProfile == "" {
		done <- nil
		return done
	}
	go func() {
		webhookDone := make(chan error, 1)
		if r.cfg.WebhookServerProfile != "" && r.probes.ProfileWebhookServer != nil {
			go func() {
				webhookDone <- r.probes.ProfileWebhookServer(ctx, r.cfg.ProfileSeconds, r.cfg.WebhookServerProfile)
			}()
		} else {
			webhookDone <- nil
		}
		err := profile(ctx, r.rest, r.cfg.ProfileSeconds, r.cfg.APIServerProfile)
		done <- errors.Join(err, <-webhookDone)
	}()
	return done
}

func profile(ctx context.Context, cfg *rest.Config, seconds int, path string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(cfg.Host, "/"), seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("profiling kube-apiserver: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or failed already
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profiling kube-apiserver: HTTP %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the kube-apiserver profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy error is the one to report
		return fmt.Errorf("writing the kube-apiserver profile: %w", err)
	}
	return f.Close()
}

// loadAverage is the 1-minute load average from /proc/loadavg; 0 when unreadable.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var one float64
	if _, err := fmt.Sscanf(string(data), "%f", &one); err != nil {
		return 0
	}
	return one
}

// errNoClaims is returned by launchTypes when there is nothing to look up.
var errNoClaims = errors.New("no claim became Ready")
