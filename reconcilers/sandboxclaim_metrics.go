package reconcilers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// observeStartup records the claim's startup latencies the first time this process writes it
// Ready: from admission (webhook-first-observed-at) and from the controller's first sight,
// and the public controller's latencies from the client and of the Sandbox (publicmetrics.go).
func (r *claimReconciler) observeStartup(ctx context.Context, s *claimStep) {
	if s.mem.readyObserved || !meta.IsStatusConditionTrue(s.claim.Status.Conditions, agentsv1beta1.ConditionReady) {
		return
	}
	s.mem.readyObserved = true
	r.activity.claimReady(client.ObjectKeyFromObject(s.claim))
	now := r.Clock.Now()
	launch := s.mem.launchType
	if launch == "" {
		launch = "unknown" // bound by an earlier run of the operator
	}
	template := s.mem.template
	var fromWebhook *time.Duration
	if at, ok := claimTimestamp(s.claim, agentsv1beta1.AnnotationWebhookFirstObservedAt); ok {
		d := now.Sub(at)
		fromWebhook = &d
	}
	r.Metrics.claimReady(launch, template, fromWebhook, now.Sub(s.mem.firstSeen))
	r.Metrics.claimPhase(PhaseReadyToStatus, now.Sub(s.mem.firstSeen))
	r.observePublicStartup(ctx, s.claim, launch, template, now)
	r.traceReady(ctx, s, launch, now)
}

// Names of the claim startup histograms clients scrape (the contract's).
const (
	MetricClaimStartupLatency           = "agent_sandbox_claim_startup_latency_ms"
	MetricClaimControllerStartupLatency = "agent_sandbox_claim_controller_startup_latency_ms"
)

// claimLatencyBuckets are the contract's buckets, in milliseconds.
var claimLatencyBuckets = []float64{100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000, 10000, 30000, 60000, 120000, 240000}

func (m *Metrics) initClaimMetrics() {
	labels := []string{"launch_type", "sandbox_template"}
	m.claimStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricClaimStartupLatency,
		Help:    "Milliseconds from a claim's admission (webhook-first-observed-at) to its first Ready=True status.",
		Buckets: claimLatencyBuckets,
	}, labels)
	m.claimControllerStartup = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricClaimControllerStartupLatency,
		Help:    "Milliseconds from the claim controller's first sight of a claim to its first Ready=True status.",
		Buckets: claimLatencyBuckets,
	}, labels)
	m.warmHits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sandgate_claim_warm_hits_total",
		Help: "Claims bound to a warm pool member.",
	})
	m.coldStarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sandgate_claim_cold_starts_total",
		Help: "Sandboxes created for claims that no warm member could serve.",
	})
	m.bindsLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandgate_claim_bind_conflicts_total",
		Help: "Bind attempts that lost, by reason: conflict (409, the member changed), denied (403, the binding guard), gone (404).",
	}, []string{"reason"})

	m.claimBookkeeping = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricClaimBookkeepingWrites,
		Help: "Writes to claims off their path: the agents.x-k8s.io/sandbox-name annotation, written after the claim was reported Ready, once claims pause.",
	})

	m.claimPhases = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: MetricClaimPhase,
		Help: "Seconds a claim spends in each phase of its path, as the operator sees it: " +
			"admission_to_reconcile (webhook-first-observed-at to the first reconcile of the claim: informer delivery and queue wait), " +
			"bind (the bind patch), status (the claim status patch), " +
			"ready_to_status (first reconcile to the Ready status patch returned).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms to 16 s
	}, []string{"phase"})
}

// MetricClaimBookkeepingWrites counts the claim writes made after a claim was reported Ready
// (its sandbox-name annotation): part of sandgate_api_writes_total, not of the claim's path.
const MetricClaimBookkeepingWrites = "sandgate_claim_bookkeeping_writes_total"

// MetricClaimPhase is the histogram of the phases of a claim's path.
const MetricClaimPhase = "sandgate_claim_phase_seconds"

// Phases of MetricClaimPhase.
const (
	PhaseAdmissionToReconcile = "admission_to_reconcile"
	PhaseBind                 = "bind"
	PhaseRoute                = "route"
	PhaseStatus               = "status"
	PhaseReadyToStatus        = "ready_to_status"
)

func (m *Metrics) claimPhase(phase string, d time.Duration) {
	m.claimPhases.WithLabelValues(phase).Observe(d.Seconds())
}

// ClaimPhase returns the observations of one phase and their sum.
func (m *Metrics) ClaimPhase(phase string) (count uint64, sum time.Duration) {
	pb := &dto.Metric{}
	h, err := m.claimPhases.GetMetricWithLabelValues(phase)
	if err != nil || h.(prometheus.Histogram).Write(pb) != nil {
		return 0, 0
	}
	return pb.GetHistogram().GetSampleCount(), time.Duration(pb.GetHistogram().GetSampleSum() * float64(time.Second))
}

func (m *Metrics) warmHit()               { m.warmHits.Inc() }
func (m *Metrics) claimBookkeepingWrite() { m.claimBookkeeping.Inc() }
func (m *Metrics) coldStart()             { m.coldStarts.Inc() }
func (m *Metrics) bindLost(reason string) { m.bindsLost.WithLabelValues(reason).Inc() }

// claimReady observes a claim's startup latencies; fromWebhook is nil when the claim was
// not admitted through the stamping webhook.
func (m *Metrics) claimReady(launchType, template string, fromWebhook *time.Duration, fromController time.Duration) {
	if fromWebhook != nil {
		m.claimStartup.WithLabelValues(launchType, template).Observe(ms(*fromWebhook))
	}
	m.claimControllerStartup.WithLabelValues(launchType, template).Observe(ms(fromController))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WarmHits is the number of claims bound to a warm member.
func (m *Metrics) WarmHits() float64 { return testutil.ToFloat64(m.warmHits) }

// ColdStarts is the number of Sandboxes cold-started for claims.
func (m *Metrics) ColdStarts() float64 { return testutil.ToFloat64(m.coldStarts) }

// ClaimBookkeepingWrites returns the count of writes to claims after they were reported Ready.
func (m *Metrics) ClaimBookkeepingWrites() float64 { return testutil.ToFloat64(m.claimBookkeeping) }

// BindConflicts is the number of bind attempts that lost (409, 403 or 404 on the bind
// patch); each made the claim try the next member.
func (m *Metrics) BindConflicts() float64 {
	var sum float64
	for _, reason := range []string{bindLostConflict, bindLostDenied, bindLostGone} {
		sum += testutil.ToFloat64(m.bindsLost.WithLabelValues(reason))
	}
	return sum
}

// LatencySummary is a startup latency histogram summed over its labels.
type LatencySummary struct {
	Count uint64
	SumMs float64
	// Buckets maps each upper bound (ms) to the cumulative count of observations at or below.
	Buckets map[float64]uint64
}

// ClaimStartupLatency summarizes agent_sandbox_claim_startup_latency_ms (from admission) or,
// with fromController, agent_sandbox_claim_controller_startup_latency_ms.
func (m *Metrics) ClaimStartupLatency(fromController bool) LatencySummary {
	h := m.claimStartup
	if fromController {
		h = m.claimControllerStartup
	}
	out := LatencySummary{Buckets: map[float64]uint64{}}
	ch := make(chan prometheus.Metric, 16)
	go func() { h.Collect(ch); close(ch) }()
	for metric := range ch {
		pb := &dto.Metric{}
		if err := metric.Write(pb); err != nil {
			continue
		}
		hist := pb.GetHistogram()
		out.Count += hist.GetSampleCount()
		out.SumMs += hist.GetSampleSum()
		for _, b := range hist.GetBucket() {
			out.Buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	return out
}
