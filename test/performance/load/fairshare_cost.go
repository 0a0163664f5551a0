package load

// Where the time of tenant B's refusals goes, in the fair-share scenario's policy arm: the
// operator's own time on a refused claim (its admission histogram), the API server's call of
// the stamping webhook that refused it (the API server's webhook histogram), and a control
// create by B beside each of B's creates that the API server refuses before any admission.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

const (
	// claimStampWebhook is sandgate's mutating webhook of claim creates, the one that
	// refuses a claim beyond a ClaimPolicy's limit (config/webhook/manifests.yaml).
	claimStampWebhook = "stamp.sandboxclaims.extensions.agents.x-k8s.io"
	// policyAdmission is the operator's histogram of its time on a new claim's policies
	// (internal/fairshare/metrics.go), by result.
	policyAdmission = "sandgate_claimpolicy_admission_seconds"
	// controlSuffix names the namespace of the control creates: the arm's, with this suffix.
	controlSuffix = "-control"
	// ledgerWrites counts the operator's ClaimLedger writes by writer and result.
	ledgerWrites = "sandgate_claimpolicy_ledger_writes_total"
)

// refusalProbe measures an arm's refusals: the control creates made during the load, read
// beside the arm's metrics before and after it.
type refusalProbe struct {
	c  client.Client
	ns string

	mu      sync.Mutex
	control []time.Duration
	other   int
}

// startRefusalProbe creates the control namespace (where B holds no role). c acts as tenant B.
func startRefusalProbe(ctx context.Context, r *runner, b client.Client) (*refusalProbe, error) {
	p := &refusalProbe{c: b, ns: r.cfg.Namespace + controlSuffix}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}
	if err := r.c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the control namespace %s: %w", p.ns, err)
	}
	return p, nil
}

// controlCreate is B's create of a claim in the control namespace, timed as claimB times B's
// creates: authorization refuses it (403) before decoding or admission, so that it costs the
// API server its request filters only, at the moment of one of B's creates.
func (p *refusalProbe) controlCreate(ctx context.Context, name string) {
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: poolName}}}
	sent := time.Now()
	err := p.c.Create(ctx, claim)
	took := time.Since(sent)
	p.mu.Lock()
	defer p.mu.Unlock()
	if apierrors.IsForbidden(err) {
		p.control = append(p.control, took)
	} else {
		p.other++
	}
}

// finish says where the refusals' time went, from the arm's scrapes before and after the load
// and the measurement errors of both.
func (p *refusalProbe) finish(r *runner, before, after snapshot, errs []string) *report.RefusalCost {
	p.mu.Lock()
	defer p.mu.Unlock()
	cost := refusalCost(scrape.Delta(before.api, after.api), scrape.Delta(before.operator, after.operator), p.control, p.other)
	cost.Errors = append(cost.Errors, errs...)
	if r.probes.OperatorMetrics == nil {
		cost.Errors = append(cost.Errors, "no operator metrics to scrape: sandgate's own time is unknown")
	}
	return cost
}

// refusalCost is the cost of the refusals from the metrics' deltas over the load and the
// control creates.
func refusalCost(api, operator scrape.Snapshot, control []time.Duration, other int) *report.RefusalCost {
	return &report.RefusalCost{
		Sandgate:     histogram(operator.Select(map[string]string{"result": "refused"}), policyAdmission),
		Webhook:      histogram(api.Select(map[string]string{"name": claimStampWebhook, "operation": "CREATE", "rejected": "true"}), webhookDuration),
		Control:      stats.Summarize(control),
		ControlOther: other,
		LedgerWrites: operator.GroupBy(ledgerWrites, nil, "writer", "result"),
	}
}

// histogram summarises histogram name of s (one label set, selected): count, mean, p50, p99.
func histogram(s scrape.Snapshot, name string) report.Histogram {
	var h report.Histogram
	h.Count = s.Sum(name+"_count", nil)
	if h.Count == 0 {
		return h
	}
	h.MeanMs = round2(s.Sum(name+"_sum", nil) / h.Count * 1000)
	h.P50Ms, h.P99Ms = quantilesMs(s, name)
	for _, b := range s.Buckets(name) {
		if !math.IsInf(b.LE, 1) {
			h.Buckets = append(h.Buckets, report.Bucket{LeMs: round6(b.LE * 1000), Count: b.Count})
		}
	}
	return h
}
