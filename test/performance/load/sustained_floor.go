package load

// The floor of a sustained run (see sustained.go): the load generator binds the operator's
// members and refills the pool itself, one replacement per member taken, each a copy of one of
// the operator's members (Sandbox, pod, Ready status): the writes a pool's steady state needs
// and no more, with objects of the same shape and size as the operator's.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// detach stops the operator for the floor and hands the pool's ready members to the refill
// pool; the first of them is the model of every replacement.
func (s *sustained) detach(ctx context.Context) error {
	r := s.r
	if r.probes.DetachOperator == nil {
		return errors.New("a floor run needs a way to stop the operator and remove its webhooks (Probes.DetachOperator)")
	}
	if err := r.probes.DetachOperator(ctx); err != nil {
		return fmt.Errorf("detaching the operator for the floor: %w", err)
	}
	members, err := r.floorMembers(ctx)
	if err != nil {
		return err
	}
	if len(members.members) == 0 {
		return errors.New("the floor needs ready pool members, the pool has none")
	}
	model := members.members[0]
	var pod corev1.Pod
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: model.Namespace, Name: memberPodName(model)}, &pod); err != nil {
		return fmt.Errorf("reading the pod of pool member %s: %w", model.Name, err)
	}
	s.floor.pods = members.pods // listed with the members for the route write; nil without
	s.floor.start(ctx, model, &pod, members.members)
	r.progressf("floor: operator stopped, %d ready members to bind; the load generator refills the pool", len(members.members))
	return nil
}

// memberPodName is the pod of a Sandbox: its pod-name annotation, else its name.
func memberPodName(sb *agentsv1beta1.Sandbox) string {
	if name := sb.Annotations[agentsv1beta1.AnnotationPodName]; name != "" {
		return name
	}
	return sb.Name
}

// floorClaim makes a floor claim's three writes on a ready member, waiting for a
// replacement when the pool has none (the claim is then not warm), and asks for the
// member's replacement.
func (s *sustained) floorClaim(ctx context.Context, c *sustainedClaim) {
	r := s.r
	claim := r.create(ctx, &c.sent)
	if c.createErr != nil {
		return
	}
	t := &floorTimes{}
	for {
		member, waited, err := s.floor.take(ctx, s.cfg.Timeout)
		if err != nil {
			c.floorErr = err
			return
		}
		c.waited = c.waited || waited
		bound, err := r.bindFloor(ctx, claim, member, t)
		if err != nil {
			c.floorBindErrs = append(c.floorBindErrs, err)
			continue
		}
		if s.cfg.FloorRoute {
			pod, ok := s.floor.pod(member)
			if !ok {
				c.floorErr = fmt.Errorf("no pod of member %s known for the route write", member.Name)
				return
			}
			if err := r.routeFloor(ctx, claim, bound, pod, t); err != nil {
				c.floorErr = err
				return
			}
		}
		if err := r.reportFloorReady(ctx, claim, bound, &t.statusStart, &t.statusEnd); err != nil {
			c.floorErr = err
			return
		}
		c.floor = t
		return
	}
}

// refillPool is the floor's pool: the ready members claims take, and the load generator's
// refill, which makes one replacement per member taken.
type refillPool struct {
	s       *sustained
	ready   chan *agentsv1beta1.Sandbox
	want    chan struct{}
	cancel  context.CancelFunc
	workers sync.WaitGroup
	next    atomic.Int64

	model    *agentsv1beta1.Sandbox
	modelPod *corev1.Pod

	// podsMu guards the replacements waiting for their pod's Ready, and pods.
	podsMu  sync.Mutex
	waiting map[string]chan *corev1.Pod
	// pods are the members' pods by Sandbox name, for the contract floor's route write
	// (SustainedConfig.FloorRoute): the first members' as listed, each replacement's as
	// created. nil without the route write.
	pods     map[string]*corev1.Pod
	refilled atomic.Int64

	errMu sync.Mutex
	errs  []error
}

// refillWorkers bounds the replacements made at once. A replacement waits for its pod for
// most of its time, so the bound is wide: the API server, not the load generator, must be what
// limits the floor's refill (16 refilled about 9 members a second on a loaded machine).
const refillWorkers = 64

func newRefillPool(s *sustained) *refillPool {
	size := int(s.cfg.PoolSize)
	return &refillPool{
		s:       s,
		ready:   make(chan *agentsv1beta1.Sandbox, 2*size+1),
		want:    make(chan struct{}, 2*size+int(s.cfg.Rate*s.cfg.Duration.Seconds())+1),
		waiting: map[string]chan *corev1.Pod{},
	}
}

// start hands out members and starts the refill workers, copying model and its pod.
func (p *refillPool) start(ctx context.Context, model *agentsv1beta1.Sandbox, pod *corev1.Pod, members []*agentsv1beta1.Sandbox) {
	p.model, p.modelPod = model, pod
	for _, m := range members {
		p.ready <- m
	}
	ctx, p.cancel = context.WithCancel(ctx)
	workers := refillWorkers
	if p.s.cfg.RefillWorkers > 0 {
		workers = p.s.cfg.RefillWorkers
	}
	for range workers {
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.want:
				}
				if err := p.replace(ctx); err != nil && ctx.Err() == nil {
					p.errMu.Lock()
					if len(p.errs) < 5 {
						p.errs = append(p.errs, err)
					}
					p.errMu.Unlock()
					p.want <- struct{}{} // try again
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
}

func (p *refillPool) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.workers.Wait()
}

func (p *refillPool) errors() []error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return append([]error(nil), p.errs...)
}

// pod is member's pod, for the route write; a member is routed once, so it is forgotten.
func (p *refillPool) pod(member *agentsv1beta1.Sandbox) (*corev1.Pod, bool) {
	p.podsMu.Lock()
	defer p.podsMu.Unlock()
	pod, ok := p.pods[member.Name]
	delete(p.pods, member.Name)
	return pod, ok
}

// take returns a ready member and asks for its replacement; waited is true when there was
// none ready and the claim waited for one.
func (p *refillPool) take(ctx context.Context, limit time.Duration) (*agentsv1beta1.Sandbox, bool, error) {
	var m *agentsv1beta1.Sandbox
	waited := false
	select {
	case m = <-p.ready:
	default:
		waited = true
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case m = <-p.ready:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		case <-timer.C:
			return nil, true, fmt.Errorf("no ready pool member within %s", limit)
		}
	}
	p.want <- struct{}{}
	return m, waited, nil
}

// replace makes one replacement member: the Sandbox, its pod, the pod's Ready awaited, the
// Sandbox's status; then hands it out.
func (p *refillPool) replace(ctx context.Context) error {
	c := p.s.r.c
	name := fmt.Sprintf("%s-z%s", poolName, strconv.FormatInt(p.next.Add(1), 36))
	sb := copySandbox(p.model, name)
	if err := c.Create(ctx, sb); err != nil {
		return fmt.Errorf("refill: creating Sandbox %s: %w", name, err)
	}
	readyCh := make(chan *corev1.Pod, 1)
	p.podsMu.Lock()
	p.waiting[name] = readyCh
	p.podsMu.Unlock()
	defer func() {
		p.podsMu.Lock()
		delete(p.waiting, name)
		p.podsMu.Unlock()
	}()
	pod := copyPod(p.modelPod, p.model, sb)
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("refill: creating pod %s: %w", name, err)
	}
	var ready *corev1.Pod
	select {
	case ready = <-readyCh:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return fmt.Errorf("refill: pod %s not Ready within a minute", name)
	}
	status := copyStatus(p.model, sb, ready)
	patch, err := mergePatch(map[string]any{"status": status})
	if err == nil {
		err = c.Status().Patch(ctx, sb, patch)
	}
	if err != nil {
		return fmt.Errorf("refill: patching the status of Sandbox %s: %w", name, err)
	}
	sb.Status = status
	if p.s.cfg.FloorRoute {
		p.podsMu.Lock()
		p.pods[name] = ready
		p.podsMu.Unlock()
	}
	p.refilled.Add(1)
	p.ready <- sb
	return nil
}

// podSeen is the pod informer's handler: a replacement's pod that shows Ready is handed to
// the replacement waiting for it.
func (p *refillPool) podSeen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !memberPodReady(pod) {
		return
	}
	p.podsMu.Lock()
	ch := p.waiting[pod.Name]
	delete(p.waiting, pod.Name)
	p.podsMu.Unlock()
	if ch != nil {
		ch <- pod
	}
}

func memberPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// renamer rewrites a member's identity in strings (label values, the status selector) to a
// replacement's: its name, its name's hash and its UID.
func renamer(from, to *agentsv1beta1.Sandbox) *strings.Replacer {
	pairs := []string{from.Name, to.Name, agentsv1beta1.NameHash(from.Name), agentsv1beta1.NameHash(to.Name)}
	if from.UID != "" && to.UID != "" {
		pairs = append(pairs, string(from.UID), string(to.UID))
	}
	return strings.NewReplacer(pairs...)
}

func renamed(m map[string]string, r *strings.Replacer) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = r.Replace(v)
	}
	return out
}

// copySandbox is model as the operator created it, under a new name: its metadata but for
// what the API server sets and the pod-name annotation, its spec, no status.
func copySandbox(model *agentsv1beta1.Sandbox, name string) *agentsv1beta1.Sandbox {
	r := renamer(model, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name}})
	sb := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
		Name:            name,
		Namespace:       model.Namespace,
		Labels:          renamed(model.Labels, r),
		Annotations:     renamed(model.Annotations, r),
		OwnerReferences: append([]metav1.OwnerReference(nil), model.OwnerReferences...),
	}, Spec: *model.Spec.DeepCopy()}
	delete(sb.Annotations, agentsv1beta1.AnnotationPodName)
	return sb
}

// copyPod is the model member's pod for the replacement sb: its metadata renamed, owned by sb
// instead, its spec without the node (the scheduler places it, as it placed the model).
func copyPod(model *corev1.Pod, modelSB, sb *agentsv1beta1.Sandbox) *corev1.Pod {
	r := renamer(modelSB, sb)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:        sb.Name,
		Namespace:   sb.Namespace,
		Labels:      renamed(model.Labels, r),
		Annotations: renamed(model.Annotations, r),
	}, Spec: *model.Spec.DeepCopy()}
	pod.Spec.NodeName = ""
	for _, ref := range model.OwnerReferences {
		if ref.UID == modelSB.UID {
			ref.Name, ref.UID = sb.Name, sb.UID
		}
		pod.OwnerReferences = append(pod.OwnerReferences, ref)
	}
	return pod
}

// copyStatus is the model's status for the replacement sb running pod: the same conditions
// (observed at sb's generation, now), the pod's IPs and node, the selector renamed.
func copyStatus(model, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) agentsv1beta1.SandboxStatus {
	st := *model.Status.DeepCopy()
	r := renamer(model, sb)
	st.Selector = r.Replace(st.Selector)
	st.ServiceFQDN, st.Service = r.Replace(st.ServiceFQDN), r.Replace(st.Service)
	st.NodeName = pod.Spec.NodeName
	st.PodIPs = nil
	for _, ip := range pod.Status.PodIPs {
		st.PodIPs = append(st.PodIPs, ip.IP)
	}
	now := metav1.Now()
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = now
		st.Conditions[i].ObservedGeneration = sb.Generation
	}
	return st
}
