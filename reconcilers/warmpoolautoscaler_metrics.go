package reconcilers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sandgate-dev/sandgate/internal/demand"
)

// The warm pool autoscaler's series (docs/observability.md). Per-autoscaler gauges are
// labelled namespace and name (one series per WarmPoolAutoscaler, dropped when it goes); the
// scale counter only by direction.
type autoscalerMetrics struct {
	desired, claimRate, expected, startup *prometheus.GaugeVec
	recentClaims                          *prometheus.GaugeVec
	scales                                *prometheus.CounterVec
}

func newAutoscalerMetrics() autoscalerMetrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"namespace", "name"}, labels...))
	}
	return autoscalerMetrics{
		desired: gauge("sandgate_warmpoolautoscaler_desired_replicas",
			"Replicas the WarmPoolAutoscaler wants its pool to have now, after its bounds and behavior."),
		claimRate: gauge("sandgate_warmpoolautoscaler_claims_per_second",
			"Claim arrival rate the WarmPoolAutoscaler plans with: the higher of the 10 s and 120 s windows' rates."),
		expected: gauge("sandgate_warmpoolautoscaler_expected_claims",
			"Claims the WarmPoolAutoscaler expects during one member start-up time."),
		startup: gauge("sandgate_warmpoolautoscaler_member_startup_seconds",
			"Member start-up time the WarmPoolAutoscaler plans with: p90 of the pool's recent members, creation to Ready."),
		recentClaims: gauge("sandgate_warmpoolautoscaler_recent_claims",
			"Claims of the WarmPoolAutoscaler's pool that arrived in the window (short: 10 s, long: 120 s).", "window"),
		scales: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_warmpoolautoscaler_scales_total",
			Help: "Writes of a pool's replicas by WarmPoolAutoscalers, by direction (up, down).",
		}, []string{"direction"}),
	}
}

func (a autoscalerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{a.desired, a.claimRate, a.expected, a.startup, a.recentClaims, a.scales}
}

// autoscalerObserved sets the gauges of one autoscaler.
func (m *Metrics) autoscalerObserved(key types.NamespacedName, desired int32, est demand.Estimate) {
	a := m.autoscaler
	a.desired.WithLabelValues(key.Namespace, key.Name).Set(float64(desired))
	a.claimRate.WithLabelValues(key.Namespace, key.Name).Set(est.Rate)
	a.expected.WithLabelValues(key.Namespace, key.Name).Set(float64(est.Expected))
	a.startup.WithLabelValues(key.Namespace, key.Name).Set(est.Startup.Seconds())
	a.recentClaims.WithLabelValues(key.Namespace, key.Name, "short").Set(float64(est.ShortWindowClaims))
	a.recentClaims.WithLabelValues(key.Namespace, key.Name, "long").Set(float64(est.LongWindowClaims))
}

// autoscalerGone drops the series of an autoscaler that is gone.
func (m *Metrics) autoscalerGone(key types.NamespacedName) {
	labels := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	a := m.autoscaler
	for _, g := range []*prometheus.GaugeVec{a.desired, a.claimRate, a.expected, a.startup, a.recentClaims} {
		g.DeletePartialMatch(labels)
	}
}

func (m *Metrics) autoscalerScaled(direction string) {
	m.autoscaler.scales.WithLabelValues(direction).Inc()
}

// AutoscalerScales is the number of scale writes in direction ("up", "down").
func (m *Metrics) AutoscalerScales(direction string) float64 {
	return testutil.ToFloat64(m.autoscaler.scales.WithLabelValues(direction))
}

// AutoscalerRecentClaims is the number of claims the autoscaler key counted in window
// ("short", "long") at its last reconcile in this process; false when it has not reconciled.
func (m *Metrics) AutoscalerRecentClaims(key types.NamespacedName, window string) (float64, bool) {
	ch := make(chan prometheus.Metric, 64)
	go func() { m.autoscaler.recentClaims.Collect(ch); close(ch) }()
	value, found := 0.0, false
	for metric := range ch {
		pb := &dto.Metric{}
		if err := metric.Write(pb); err != nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] == key.Namespace && labels["name"] == key.Name && labels["window"] == window {
			value, found = pb.GetGauge().GetValue(), true
		}
	}
	return value, found
}
