package soak

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/soak/check"
)

// injector injects the planned faults and the workload's own changes (pool resizes and
// template rollouts), which share the templates' rollout counters.
type injector struct {
	e    *env
	c    client.Client
	o    Options
	logf func(string, ...any)

	mu       sync.Mutex
	rollouts map[string]int // namespace → the template's rollout number
	changes  []string       // workload changes made, for the report
}

// leaderWait bounds the wait for a leader before a fault that needs one: after a kill the
// next replica takes the Lease over within its duration.
const leaderWait = 45 * time.Second

func (in *injector) waitForLeader(ctx context.Context) (*replica, error) {
	deadline := time.Now().Add(leaderWait)
	for {
		if r := in.e.leader(ctx); r != nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no replica led within %s", leaderWait)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitForTakeOver waits, while frozen is stopped, until another replica leads: a follower
// takes the Lease over only after it has seen no renewal for the Lease's duration, counted
// from when it last looked (every retry period, with jitter), so a fixed freeze a little past
// the Lease may end before anyone took over.
func (in *injector) waitForTakeOver(ctx context.Context, frozen *replica) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(3 * leaseDuration)
	for {
		if r := in.e.leader(ctx); r != nil && r != frozen {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("no other replica took the Lease over within %s of freezing replica %s", 3*leaseDuration, frozen.name)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return time.Since(start), err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// inject carries out p and returns the fault as it happened.
func (in *injector) inject(ctx context.Context, p plannedFault) (check.Fault, error) {
	f := check.Fault{Kind: p.kind, Start: time.Now()}
	ns := namespaceName(int(p.pick % uint64(in.o.Namespaces)))
	var err error
	switch p.kind {
	case FaultLeaderKill:
		var r *replica
		if r, err = in.waitForLeader(ctx); err == nil {
			f.Start = time.Now()
			if err = r.signal(syscall.SIGKILL); err == nil {
				// Cleared when a replica leads again: the other one once the Lease expired,
				// or the killed one, restarted, if it wins the Lease first.
				var lead *replica
				lead, err = in.waitForLeader(ctx)
				if err == nil {
					f.End = time.Now()
					f.Detail = fmt.Sprintf("SIGKILL to the leader, replica %s; replica %s led %s later", r.name, lead.name, f.End.Sub(f.Start).Round(100*time.Millisecond))
				}
			}
		}
	case FaultLeaderFreeze:
		var r *replica
		if r, err = in.waitForLeader(ctx); err == nil {
			f.Start = time.Now()
			if err = r.signal(syscall.SIGSTOP); err == nil {
				var took time.Duration
				took, err = in.waitForTakeOver(ctx, r)
				err = errors.Join(err, sleep(ctx, p.hold), r.signal(syscall.SIGCONT))
				f.Detail = fmt.Sprintf("SIGSTOP to the leader, replica %s; another replica led %s later; SIGCONT %s after that",
					r.name, took.Round(100*time.Millisecond), p.hold.Round(100*time.Millisecond))
			}
		}
	case FaultAPIServerRestart:
		how, restart := "SIGTERM", in.e.cluster.RestartAPIServer
		if p.pick%2 == 1 {
			how, restart = "SIGKILL", in.e.cluster.KillAPIServer
		}
		var stopped, ready time.Time
		if stopped, ready, err = restart(ctx); err == nil {
			f.Detail = fmt.Sprintf("kube-apiserver stopped with %s (down after %s), ready %s later", how,
				stopped.Sub(f.Start).Round(time.Millisecond), ready.Sub(stopped).Round(time.Millisecond))
			f.End = ready
		}
	case FaultWebhookDown:
		in.e.lb.SetUnreachable(true)
		err = sleep(ctx, p.hold)
		in.e.lb.SetUnreachable(false)
		f.Detail = fmt.Sprintf("webhook load balancer dropping every connection for %s", p.hold.Round(100*time.Millisecond))
	case FaultCertRotation:
		var took time.Duration
		if took, err = in.rotateCertificate(ctx); err == nil {
			f.Detail = fmt.Sprintf("serving certificate renewed under the same CA, served by every replica after %s", took.Round(time.Millisecond))
		}
	case FaultSlowAPI:
		delay := 100*time.Millisecond + time.Duration(p.pick%400)*time.Millisecond
		in.e.apiProxy.SetDelay(delay)
		err = sleep(ctx, p.hold)
		in.e.apiProxy.SetDelay(0)
		f.Detail = fmt.Sprintf("%s added to the replicas' API requests for %s", delay, p.hold.Round(100*time.Millisecond))
	case FaultPoolRecreate:
		f.Detail, err = in.recreatePool(ctx, ns)
	case FaultTemplateChange:
		var n int
		if n, err = in.rollout(ctx, ns); err == nil {
			f.Detail = fmt.Sprintf("template %s/%s changed (rollout %d) under pending claims", ns, templateName, n)
		}
	case FaultRolloutRestart:
		var n int
		if n, err = in.rollout(ctx, ns); err == nil {
			var r *replica
			if r, err = in.waitForLeader(ctx); err == nil {
				err = r.signal(syscall.SIGTERM)
				f.Detail = fmt.Sprintf("template %s/%s changed (rollout %d, %s pool) and the leader, replica %s, restarted (SIGTERM)", ns, templateName, n, strategyOf(int(p.pick%uint64(in.o.Namespaces))), r.name)
			}
		}
	case FaultPodLoss:
		f.Detail, err = in.losePod(ctx, ns, p.pick%2 == 1)
	default:
		err = fmt.Errorf("unknown fault %q", p.kind)
	}
	if f.End.IsZero() {
		f.End = time.Now()
	}
	if err != nil {
		return f, fmt.Errorf("%s: %w", p.kind, err)
	}
	return f, nil
}

// rotateCertificate renews the webhook certificate and waits until a new connection through
// the load balancer, to each replica, is served the new one.
func (in *injector) rotateCertificate(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := in.e.renewCertificate(); err != nil {
		return 0, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(in.e.ca.PEM()) {
		return 0, errors.New("the soak's CA certificate is not PEM")
	}
	addr := in.e.lb.Addr()
	deadline := start.Add(30 * time.Second)
	for {
		fresh := 0
		// Round robin: as many new connections as replicas, twice, all served the new one.
		for i := 0; i < 2*len(in.e.replicas); i++ {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				continue
			}
			state := conn.(*tls.Conn).ConnectionState()
			if len(state.PeerCertificates) > 0 && state.PeerCertificates[0].SerialNumber.Cmp(in.e.serial) == 0 {
				fresh++
			}
			_ = conn.Close()
		}
		if fresh == 2*len(in.e.replicas) {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the renewed certificate was not served within 30s (%d of %d connections)", fresh, 2*len(in.e.replicas))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// rollout changes namespace ns's template (its rollout environment variable) and returns the
// rollout's number.
func (in *injector) rollout(ctx context.Context, ns string) (int, error) {
	in.mu.Lock()
	if in.rollouts == nil {
		in.rollouts = map[string]int{}
	}
	in.rollouts[ns]++
	n := in.rollouts[ns]
	in.mu.Unlock()
	err := retry(ctx, time.Minute, func() error {
		var tmpl extv1beta1.SandboxTemplate
		if err := in.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: templateName}, &tmpl); err != nil {
			return err
		}
		base := tmpl.DeepCopy()
		tmpl.Spec.PodTemplate.Spec = podSpec(n)
		return in.c.Patch(ctx, &tmpl, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	return n, err
}

// recreatePool deletes namespace ns's pool, waits until it is gone, and creates it again.
func (in *injector) recreatePool(ctx context.Context, ns string) (string, error) {
	var pool extv1beta1.SandboxWarmPool
	key := client.ObjectKey{Namespace: ns, Name: poolName}
	if err := retry(ctx, time.Minute, func() error { return in.c.Get(ctx, key, &pool) }); err != nil {
		return "", err
	}
	replicas := ptr.Deref(pool.Spec.Replicas, 1)
	strategy := pool.Spec.UpdateStrategy.Type
	if err := retry(ctx, time.Minute, func() error { return client.IgnoreNotFound(in.c.Delete(ctx, &pool)) }); err != nil {
		return "", err
	}
	start := time.Now()
	for {
		err := in.c.Get(ctx, key, &extv1beta1.SandboxWarmPool{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > time.Minute {
			return "", fmt.Errorf("pool %s/%s not gone a minute after its deletion", ns, poolName)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
	gone := time.Since(start)
	if err := retry(ctx, time.Minute, func() error { return in.c.Create(ctx, newPool(ns, replicas, strategy)) }); err != nil {
		return "", err
	}
	return fmt.Sprintf("pool %s/%s (%d replicas, %s) deleted, gone after %s, created again", ns, poolName, replicas, strategy, gone.Round(time.Millisecond)), nil
}

// losePod deletes (or evicts) the pod of a Ready Sandbox bound to a claim in ns.
func (in *injector) losePod(ctx context.Context, ns string, evict bool) (string, error) {
	var sandboxes agentsv1beta1.SandboxList
	if err := retry(ctx, time.Minute, func() error {
		return in.c.List(ctx, &sandboxes, client.InNamespace(ns), client.HasLabels{agentsv1beta1.LabelClaimUID})
	}); err != nil {
		return "", err
	}
	for i := range sandboxes.Items {
		sb := &sandboxes.Items[i]
		if sb.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sb.Name}}
		if name := sb.Annotations[agentsv1beta1.AnnotationPodName]; name != "" {
			pod.Name = name
		}
		var err error
		how := "deleted"
		if evict {
			how = "evicted"
			err = in.c.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}})
		} else {
			err = in.c.Delete(ctx, pod)
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("pod %s/%s of the bound Sandbox %s %s", ns, pod.Name, sb.Name, how), nil
	}
	return "", errors.New("no Ready bound Sandbox in " + ns)
}

// churn resizes pools and rolls templates out every 40–60 s until end, as a platform team
// does while claims come: the workload's changes, not faults.
func (in *injector) churn(ctx context.Context, end time.Time, seed uint64) {
	rng := newRand(seed)
	for i := 0; ; i++ {
		wait := 40*time.Second + time.Duration(rng.Int64N(int64(20*time.Second)))
		if time.Now().Add(wait).After(end) || sleep(ctx, wait) != nil {
			return
		}
		ns := namespaceName(rng.IntN(in.o.Namespaces))
		if i%2 == 0 {
			replicas := max(1, int32(float64(in.o.PoolSize)*(0.7+0.6*rng.Float64())))
			err := retry(ctx, time.Minute, func() error {
				var pool extv1beta1.SandboxWarmPool
				if err := in.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, &pool); err != nil {
					return err
				}
				base := pool.DeepCopy()
				pool.Spec.Replicas = ptr.To(replicas)
				return in.c.Patch(ctx, &pool, client.MergeFrom(base))
			})
			in.record(fmt.Sprintf("pool %s/%s resized to %d", ns, poolName, replicas), err)
			continue
		}
		n, err := in.rollout(ctx, ns)
		in.record(fmt.Sprintf("template %s/%s rolled out (rollout %d)", ns, templateName, n), err)
	}
}

func (in *injector) record(change string, err error) {
	if err != nil {
		change += fmt.Sprintf(" failed: %v", err)
	}
	in.logf("workload: %s", change)
	in.mu.Lock()
	in.changes = append(in.changes, time.Now().Format("15:04:05")+" "+change)
	in.mu.Unlock()
}
