package reconcilers

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Write results, the values of the result label of sandgate_api_writes_total.
const (
	ResultSuccess       = "success"
	ResultConflict      = "conflict"
	ResultNotFound      = "not_found"
	ResultAlreadyExists = "already_exists"
	ResultInvalid       = "invalid"
	ResultForbidden     = "forbidden"
	ResultError         = "error"
)

// Metrics are the counters that make the write and wake-up discipline visible. One Metrics
// serves every controller of a manager; NewMetrics registers it.
type Metrics struct {
	reconciles        *prometheus.CounterVec
	reconcilesToReady prometheus.Histogram
	wakeups           *prometheus.CounterVec
	writes            *prometheus.CounterVec
	createsInFlight   *prometheus.CounterVec
	staleViews        *prometheus.CounterVec

	// Claims (see sandboxclaim_metrics.go).
	claimStartup           *prometheus.HistogramVec
	claimControllerStartup *prometheus.HistogramVec
	warmHits               prometheus.Counter
	coldStarts             prometheus.Counter
	bindsLost              *prometheus.CounterVec
	claimPhases            *prometheus.HistogramVec
	claimBookkeeping       prometheus.Counter

	// The public controller's other series (publicmetrics.go).
	public publicMetrics
	// The warm pool autoscaler's (warmpoolautoscaler_metrics.go).
	autoscaler autoscalerMetrics

	mu sync.Mutex
	// sinceNotReady counts the reconciles of each Sandbox since it was created or last left
	// Ready; observed into reconcilesToReady when the Sandbox becomes Ready.
	sinceNotReady map[types.NamespacedName]reconcileCount
}

// NewMetrics creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry in the manager; a fresh registry in tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_reconciles_total",
			Help: "Reconciles run, by controller.",
		}, []string{"controller"}),
		reconcilesToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sandgate_sandbox_reconciles_to_ready",
			Help:    "Reconciles of one Sandbox from its creation (or from leaving Ready) until it is Ready.",
			Buckets: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20},
		}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_sandbox_pod_events_total",
			Help: "Pod events seen by the Sandbox controller, by what they did: immediate, delayed (coalesced) or ignored wake-up.",
		}, []string{"decision"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_api_writes_total",
			Help: "API writes of the operator's controllers by verb, resource and result (conflict is HTTP 409).",
		}, []string{"verb", "resource", "result"}),
		createsInFlight: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_sandbox_child_creates_in_flight_total",
			Help: "Creates of a Sandbox's child not sent again, by kind: this process created it and the cache did not show it yet (each would have been answered 409 AlreadyExists).",
		}, []string{"kind"}),
		staleViews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_pod_metadata_stale_views_total",
			Help: "Pod metadata writes not sent, by controller: its cache showed an older Sandbox than the one the pod's metadata was last written from.",
		}, []string{"controller"}),
		sinceNotReady: map[types.NamespacedName]reconcileCount{},
	}
	m.initClaimMetrics()
	m.public = newPublicMetrics()
	m.autoscaler = newAutoscalerMetrics()
	for _, c := range append(append([]prometheus.Collector{
		m.reconciles, m.reconcilesToReady, m.wakeups, m.writes, m.createsInFlight, m.staleViews,
		m.claimStartup, m.claimControllerStartup, m.warmHits, m.coldStarts, m.bindsLost, m.claimPhases, m.claimBookkeeping,
	}, m.public.collectors()...), m.autoscaler.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Reconciles is the number of reconciles the named controller ran.
func (m *Metrics) Reconciles(controller string) float64 {
	return testutil.ToFloat64(m.reconciles.WithLabelValues(controller))
}

// Writes is the number of writes with the given verb ("create", "patch", "delete", "update",
// ...) and resource ("pods", "sandboxes/status", ...); "" matches any.
func (m *Metrics) Writes(verb, resource string) float64 {
	return m.sumWrites(func(v, r, _ string) bool {
		return (verb == "" || v == verb) && (resource == "" || r == resource)
	})
}

// Conflicts is the number of writes answered with 409 Conflict.
func (m *Metrics) Conflicts() float64 {
	return m.sumWrites(func(_, _, result string) bool { return result == ResultConflict })
}

// WritesByKey lists the non-zero write counters as "verb resource result" → count.
func (m *Metrics) WritesByKey() map[string]float64 {
	out := map[string]float64{}
	m.sumWrites(func(v, r, result string) bool {
		out[v+" "+r+" "+result] = 0
		return true
	})
	for k := range out {
		f := strings.SplitN(k, " ", 3)
		out[k] = testutil.ToFloat64(m.writes.WithLabelValues(f[0], f[1], f[2]))
	}
	return out
}

func (m *Metrics) sumWrites(match func(verb, resource, result string) bool) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { m.writes.Collect(ch); close(ch) }()
	var sum float64
	for metric := range ch {
		pb := &dto.Metric{}
		if err := metric.Write(pb); err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if match(labels["verb"], labels["resource"], labels["result"]) {
			sum += pb.GetCounter().GetValue()
		}
	}
	return sum
}

func (m *Metrics) reconciled(controller string) { m.reconciles.WithLabelValues(controller).Inc() }

func (m *Metrics) podEvent(decision string) { m.wakeups.WithLabelValues(decision).Inc() }

func (m *Metrics) createInFlight(kind string) { m.createsInFlight.WithLabelValues(kind).Inc() }

func (m *Metrics) podMetadataStaleView(controller string) {
	m.staleViews.WithLabelValues(controller).Inc()
}

// sandboxReconciled counts one reconcile of a Sandbox; when it leaves the Sandbox Ready
// after it was not, the count since it was last not Ready is observed.
func (m *Metrics) sandboxReconciled(sb *agentsv1beta1.Sandbox, wasReady, isReady bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nn := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	c := m.sinceNotReady[nn]
	if c.uid != sb.UID {
		c = reconcileCount{uid: sb.UID} // a new Sandbox of the same name
	}
	c.n++
	if isReady {
		if !wasReady {
			m.reconcilesToReady.Observe(float64(c.n))
		}
		c.n = 0
	}
	m.sinceNotReady[nn] = c
}

// sandboxGone forgets a Sandbox that is deleted or being deleted. The Sandbox controller
// calls it for every reconcile that finds its Sandbox gone, which every deletion causes: the
// map holds only Sandboxes that exist.
func (m *Metrics) sandboxGone(nn types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sinceNotReady, nn)
}

// SandboxesTracked is the number of Sandboxes whose reconciles are being counted.
func (m *Metrics) SandboxesTracked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sinceNotReady)
}

type reconcileCount struct {
	uid types.UID
	n   int
}

// ReconcilesToReady returns how many Sandboxes became Ready and the reconciles that took in
// total.
func (m *Metrics) ReconcilesToReady() (sandboxes uint64, reconciles float64) {
	pb := &dto.Metric{}
	if err := m.reconcilesToReady.Write(pb); err != nil {
		return 0, 0
	}
	return pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
}

// WrapClient returns c with every write counted in m.
func (m *Metrics) WrapClient(c client.Client) client.Client {
	return &countingClient{Client: c, m: m}
}

func (m *Metrics) write(c client.Client, verb string, obj runtime.Object, subresource string, err error) {
	resource := resourceName(c, obj)
	if subresource != "" {
		resource += "/" + subresource
	}
	m.writes.WithLabelValues(verb, resource, resultOf(err)).Inc()
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return ResultSuccess
	case apierrors.IsConflict(err):
		return ResultConflict
	case apierrors.IsNotFound(err):
		return ResultNotFound
	case apierrors.IsAlreadyExists(err):
		return ResultAlreadyExists
	case apierrors.IsInvalid(err):
		return ResultInvalid
	case apierrors.IsForbidden(err):
		return ResultForbidden
	default:
		return ResultError
	}
}

// resourceName is the lower-case plural resource of obj as the REST mapper knows it.
func resourceName(c client.Client, obj runtime.Object) string {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return "unknown"
	}
	if mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return mapping.Resource.Resource
	}
	return strings.ToLower(gvk.Kind)
}

// countingClient counts the writes that pass through it; reads go to the embedded client.
type countingClient struct {
	client.Client
	m *Metrics
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.m.write(c.Client, "create", obj, "", err)
	return err
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.m.write(c.Client, "update", obj, "", err)
	return err
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.m.write(c.Client, "patch", obj, "", err)
	return err
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.m.write(c.Client, "delete", obj, "", err)
	return err
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	err := c.Client.DeleteAllOf(ctx, obj, opts...)
	c.m.write(c.Client, "deletecollection", obj, "", err)
	return err
}

func (c *countingClient) Status() client.SubResourceWriter {
	return c.SubResource("status")
}

func (c *countingClient) SubResource(subResource string) client.SubResourceClient {
	return &countingSubResourceClient{SubResourceClient: c.Client.SubResource(subResource), c: c, name: subResource}
}

type countingSubResourceClient struct {
	client.SubResourceClient
	c    *countingClient
	name string
}

func (s *countingSubResourceClient) Create(ctx context.Context, obj client.Object, sub client.Object, opts ...client.SubResourceCreateOption) error {
	err := s.SubResourceClient.Create(ctx, obj, sub, opts...)
	s.c.m.write(s.c.Client, "create", obj, s.name, err)
	return err
}

func (s *countingSubResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceClient.Update(ctx, obj, opts...)
	s.c.m.write(s.c.Client, "update", obj, s.name, err)
	return err
}

func (s *countingSubResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceClient.Patch(ctx, obj, patch, opts...)
	s.c.m.write(s.c.Client, "patch", obj, s.name, err)
	return err
}
