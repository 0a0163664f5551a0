package fairshare

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a claim was served cold, the values of the cold-start metric's reason label.
const (
	ColdPoolEmpty       = "pool_empty"
	ColdBeyondWarmShare = "beyond_warm_share"
	ColdClaimSpec       = "claim_spec"
)

// Writers and results of the ledger write metric.
const (
	WriterAdmission = "admission"
	WriterLeader    = "leader"
	ResultSuccess   = "success"
	ResultConflict  = "conflict"
	ResultError     = "error"
	ResultAdmitted  = "admitted"
	ResultRefused   = "refused"
)

// Metrics are the metering of ClaimPolicies: per namespace, policy and tenant, where the
// tenant is one a policy names or "unnamed" (MetricTenant), so that the series are bounded by
// what the platform writes, never by the identities that create claims. Every method is safe
// on a nil *Metrics (metering off).
type Metrics struct {
	refusals     *prometheus.CounterVec
	warmHits     *prometheus.CounterVec
	coldStarts   *prometheus.CounterVec
	claimSeconds *prometheus.CounterVec
	ledgerWrites *prometheus.CounterVec
	reserve      *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"namespace", "policy", "tenant"}
	m := &Metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_claimpolicy_refusals_total",
			Help: "Claims admission refused for a ClaimPolicy's limit, by namespace, policy, tenant and limit (maxClaims, perPool, admissionRate, tenants.maxClaims, tenants.perPool, tenants.admissionRate).",
		}, append(labels, "limit")),
		warmHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_claimpolicy_warm_hits_total",
			Help: "Claims of a namespace with a ClaimPolicy served with a warm member, by namespace, policy and tenant.",
		}, labels),
		coldStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_claimpolicy_cold_starts_total",
			Help: "Claims of a namespace with a ClaimPolicy served with a Sandbox of their own, by namespace, policy, tenant and reason (pool_empty, beyond_warm_share, claim_spec: env or volumeClaimTemplates).",
		}, append(labels, "reason")),
		claimSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_claimpolicy_claim_seconds_total",
			Help: "Time claims existed, summed over claims, by namespace, policy and tenant (counted by the leader).",
		}, labels),
		ledgerWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandgate_claimpolicy_ledger_writes_total",
			Help: "Writes of ClaimLedgers by writer (admission, leader) and result (success, conflict, error).",
		}, []string{"writer", "result"}),
		reserve: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandgate_claimpolicy_admission_seconds",
			Help:    "Time admission spent on a new claim's ClaimPolicies (its reservations), by result (admitted, refused, error).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.refusals, m.warmHits, m.coldStarts, m.claimSeconds, m.ledgerWrites, m.reserve} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Refused counts a claim refused for limit of policy.
func (m *Metrics) Refused(ns, policy, tenant, limit string) {
	if m != nil {
		m.refusals.WithLabelValues(ns, policy, MetricTenant(tenant), limit).Inc()
	}
}

// WarmHit counts a claim served warm.
func (m *Metrics) WarmHit(ns, policy, tenant string) {
	if m != nil {
		m.warmHits.WithLabelValues(ns, policy, MetricTenant(tenant)).Inc()
	}
}

// ColdStart counts a claim served cold, and why.
func (m *Metrics) ColdStart(ns, policy, tenant, reason string) {
	if m != nil {
		m.coldStarts.WithLabelValues(ns, policy, MetricTenant(tenant), reason).Inc()
	}
}

// ClaimSeconds adds claim-seconds.
func (m *Metrics) ClaimSeconds(ns, policy, tenant string, seconds float64) {
	if m != nil && seconds > 0 {
		m.claimSeconds.WithLabelValues(ns, policy, MetricTenant(tenant)).Add(seconds)
	}
}

// LedgerWrite counts a write of a ledger.
func (m *Metrics) LedgerWrite(writer, result string) {
	if m != nil {
		m.ledgerWrites.WithLabelValues(writer, result).Inc()
	}
}

// Admission observes the time a new claim spent on its policies.
func (m *Metrics) Admission(result string, d time.Duration) {
	if m != nil {
		m.reserve.WithLabelValues(result).Observe(d.Seconds())
	}
}

// Forget drops the series of a policy that was deleted, so that a namespace's churn of
// policies does not grow the series for ever.
func (m *Metrics) Forget(ns, policy string) {
	if m == nil {
		return
	}
	match := prometheus.Labels{"namespace": ns, "policy": policy}
	for _, v := range []*prometheus.CounterVec{m.refusals, m.warmHits, m.coldStarts, m.claimSeconds} {
		v.DeletePartialMatch(match)
	}
}
