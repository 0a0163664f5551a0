package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/soak/check"
)

// Names of what each soak namespace holds.
const (
	templateName = "agent"
	poolName     = "warm"
	policyName   = "quotas"
	// rolloutEnv is the template's environment variable a rollout changes.
	rolloutEnv = "SOAK_ROLLOUT"
)

// namespaceName is the i-th soak namespace.
func namespaceName(i int) string { return fmt.Sprintf("soak-%d", i) }

// strategyOf is the update strategy of namespace i's pool: both strategies run side by side.
func strategyOf(i int) extv1beta1.UpdateStrategyType {
	if i%2 == 0 {
		return extv1beta1.RecreateUpdateStrategy
	}
	return extv1beta1.OnReplenishUpdateStrategy
}

// createWorkload creates every namespace's template and pool and waits until the pools are
// ready.
func createWorkload(ctx context.Context, c client.Client, o Options, logf func(string, ...any)) error {
	for i := 0; i < o.Namespaces; i++ {
		ns := namespaceName(i)
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&extv1beta1.SandboxTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: templateName, Namespace: ns},
				Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
					PodTemplate: agentsv1beta1.PodTemplate{Spec: podSpec(0)},
				}},
			},
			newPool(ns, o.PoolSize, strategyOf(i)),
			newClaimPolicy(ns),
		}
		for _, obj := range objs {
			if err := retry(ctx, time.Minute, func() error { return c.Create(ctx, obj) }); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
	start := time.Now()
	for {
		ready := 0
		for i := 0; i < o.Namespaces; i++ {
			var pool extv1beta1.SandboxWarmPool
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespaceName(i), Name: poolName}, &pool); err == nil && pool.Status.ReadyReplicas >= o.PoolSize {
				ready++
			}
		}
		if ready == o.Namespaces {
			logf("%d namespaces with a template and a pool of %d ready after %s", o.Namespaces, o.PoolSize, time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Since(start) > 3*time.Minute {
			return fmt.Errorf("pools not ready after 3m (%d of %d)", ready, o.Namespaces)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// newClaimPolicy is the namespace's ClaimPolicy: limits on the namespace, its pool and the
// load's tenant, and a warm share, all far above what the load reaches, so that every claim
// is reserved at admission and counted by the leader through the faults without one being
// refused. The checker proves its usage is the truth once settled (check.InvariantPolicyUsage).
func newClaimPolicy(ns string) *tenancyv1alpha1.ClaimPolicy {
	high := ptr.To(int32(10000))
	return &tenancyv1alpha1.ClaimPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: ns},
		Spec: tenancyv1alpha1.ClaimPolicySpec{
			MaxClaims: high,
			PerPool:   []tenancyv1alpha1.PoolLimit{{PoolName: poolName, MaxClaims: 10000}},
			Tenants: []tenancyv1alpha1.Tenant{{
				// The load generator acts as the cluster's admin.
				Name: "load", Subjects: []tenancyv1alpha1.Subject{{Kind: tenancyv1alpha1.SubjectGroup, Name: "system:masters"}},
				MaxClaims: high, WarmShares: []tenancyv1alpha1.WarmShare{{PoolName: poolName, Guaranteed: 2}},
			}},
		},
	}
}

func newPool(ns string, replicas int32, strategy extv1beta1.UpdateStrategyType) *extv1beta1.SandboxWarmPool {
	return &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: ns},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:           ptr.To(replicas),
			SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: templateName},
			UpdateStrategy:     extv1beta1.UpdateStrategy{Type: strategy},
		},
	}
}

// podSpec is the template's pod spec at rollout n.
func podSpec(n int) corev1.PodSpec {
	spec := load.DefaultPodSpec()
	spec.Containers[0].Env = []corev1.EnvVar{{Name: rolloutEnv, Value: fmt.Sprint(n)}}
	return spec
}

// retry calls f until it succeeds, fails for good (a 4xx other than 429) or limit passes.
func retry(ctx context.Context, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// transient reports whether err may pass on its own: no answer, a 5xx (a webhook not
// answering), 429, a timeout or a conflict.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code >= 500 || code == 429 || code == 409 || code == 0
}

// loadGen creates claims at a steady rate, each deleted after a random lifetime, and records
// what it saw of each.
type loadGen struct {
	o     Options
	c     client.Client
	watch *load.ClaimWatcher
	logf  func(string, ...any)

	mu      sync.Mutex
	records []*check.ClaimRecord
	wg      sync.WaitGroup

	created, ready, deleted, refused, failed, notServed atomic.Int64
	// unknownCreates counts creates that got no answer but had created the claim.
	unknownCreates atomic.Int64
}

// snapshot copies the records.
func (g *loadGen) snapshot() []check.ClaimRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]check.ClaimRecord, len(g.records))
	for i, r := range g.records {
		out[i] = *r
	}
	return out
}

// run creates claims until the load's end, then waits for every claim's life to end.
func (g *loadGen) run(ctx context.Context, end time.Time) {
	rng := newRand(uint64(g.o.Seed) ^ 0x10ad)
	interval := time.Duration(float64(time.Second) / g.o.Rate)
	next := time.Now()
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		ns := namespaceName(rng.IntN(g.o.Namespaces))
		lifetime := g.o.LifetimeMin + time.Duration(rng.Int64N(int64(g.o.LifetimeMax-g.o.LifetimeMin)+1))
		rec := &check.ClaimRecord{Namespace: ns, Name: fmt.Sprintf("claim-%06d", i)}
		g.mu.Lock()
		g.records = append(g.records, rec)
		g.mu.Unlock()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.live(ctx, rec, lifetime)
		}()
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
	}
	g.wg.Wait()
}

// live is one claim's life: create, wait for Ready, delete after its lifetime.
func (g *loadGen) live(ctx context.Context, rec *check.ClaimRecord, lifetime time.Duration) {
	requested := time.Now()
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        rec.Name,
			Namespace:   rec.Namespace,
			Labels:      map[string]string{agentsv1beta1.LabelCreatedBy: agentsv1beta1.CreatedByGoClient},
			Annotations: map[string]string{agentsv1beta1.AnnotationClientFirstRequestedAt: requested.UTC().Format(time.RFC3339Nano)},
		},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: poolName}},
	}
	createCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := g.c.Create(createCtx, claim)
	cancel()
	code := 0
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	if err != nil && (code == 0 || code == http.StatusGatewayTimeout) {
		// No answer (the API server restarting, a timeout): the claim may exist. A client
		// looks before it creates again; so does the load generator, and lives the claim's
		// life if it does.
		if found := g.lookUp(ctx, claim); found {
			g.unknownCreates.Add(1)
			err = nil
		}
	}
	done := time.Now()
	g.mu.Lock()
	rec.Requested = requested
	if err != nil {
		rec.CreateErr, rec.CreateCode = err.Error(), code
	} else {
		rec.UID, rec.Created = claim.UID, done
	}
	g.mu.Unlock()
	if err != nil {
		if rec.CreateCode >= 400 {
			g.refused.Add(1)
		} else {
			g.failed.Add(1)
		}
		return
	}
	g.created.Add(1)

	deadline := done.Add(g.o.ReadyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if obs, ok := g.watch.Ready(rec.Name); ok {
			g.mu.Lock()
			rec.Ready = obs.ReadyAt
			g.mu.Unlock()
			g.ready.Add(1)
			break
		}
		if time.Now().After(deadline) {
			g.notServed.Add(1)
			g.logf("claim %s/%s not Ready %s after its creation", rec.Namespace, rec.Name, g.o.ReadyTimeout)
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	if d := time.Until(done.Add(lifetime)); d > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
	err = retry(ctx, 2*time.Minute, func() error {
		err := g.c.Delete(ctx, claim)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		g.logf("deleting claim %s/%s: %v", rec.Namespace, rec.Name, err)
		return
	}
	g.mu.Lock()
	rec.DeleteRequested = time.Now()
	g.mu.Unlock()
	g.deleted.Add(1)
}

// lookUp reads claim (by name) until the API server answers, and reports whether it exists;
// claim is filled in when it does.
func (g *loadGen) lookUp(ctx context.Context, claim *extv1beta1.SandboxClaim) bool {
	var found extv1beta1.SandboxClaim
	err := retry(ctx, 2*time.Minute, func() error { return g.c.Get(ctx, client.ObjectKeyFromObject(claim), &found) })
	if err != nil {
		return false
	}
	found.DeepCopyInto(claim)
	return true
}

// sweep deletes, once the load has stopped, the claims it created without knowing: a create
// given up unanswered whose claim appeared only after the load had looked for it. A client
// cleans up what it made; the system's own leaks are the checker's. It returns how many.
func (g *loadGen) sweep(ctx context.Context) (int, error) {
	var claims extv1beta1.SandboxClaimList
	if err := g.c.List(ctx, &claims, client.MatchingLabels{agentsv1beta1.LabelCreatedBy: agentsv1beta1.CreatedByGoClient}); err != nil {
		return 0, err
	}
	n := 0
	for i := range claims.Items {
		c := &claims.Items[i]
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		if err := g.c.Delete(ctx, c); client.IgnoreNotFound(err) != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// progress is a one-line account of the load.
func (g *loadGen) progress() string {
	g.mu.Lock()
	sent := len(g.records)
	g.mu.Unlock()
	return fmt.Sprintf("%d sent, %d created (%d of them unanswered), %d Ready, %d deleted, %d refused, %d failed, %d not served",
		sent, g.created.Load(), g.unknownCreates.Load(), g.ready.Load(), g.deleted.Load(), g.refused.Load(), g.failed.Load(), g.notServed.Load())
}
