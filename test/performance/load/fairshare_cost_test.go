package load

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// A refusal's cost counts only the refusals: the operator's refused admissions (not the
// admitted ones) and the stamping webhook's rejected creates (not its admitted ones, nor
// another webhook's), over the load (the delta), beside the control creates that got 403.
func TestRefusalCost(t *testing.T) {
	before := parse(t, `# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="0.005"} 2
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="0.025"} 2
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="+Inf"} 2
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit"} 0.004
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit"} 2
`)
	after := parse(t, `# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="0.005"} 92
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="0.025"} 102
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit",le="+Inf"} 102
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit"} 0.304
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="admit"} 102
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="false",type="admit",le="0.005"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="false",type="admit",le="0.025"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="false",type="admit",le="+Inf"} 50
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="false",type="admit"} 25
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="false",type="admit"} 50
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validate.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="validating",le="0.005"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validate.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="validating",le="0.025"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="validate.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="validating",le="+Inf"} 7
apiserver_admission_webhook_admission_duration_seconds_sum{name="validate.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="validating"} 70
apiserver_admission_webhook_admission_duration_seconds_count{name="validate.sandboxclaims.extensions.agents.x-k8s.io",operation="CREATE",rejected="true",type="validating"} 7
`)
	operator := parse(t, `# TYPE sandgate_claimpolicy_admission_seconds histogram
sandgate_claimpolicy_admission_seconds_bucket{result="refused",le="0.001"} 50
sandgate_claimpolicy_admission_seconds_bucket{result="refused",le="0.0025"} 99
sandgate_claimpolicy_admission_seconds_bucket{result="refused",le="+Inf"} 100
sandgate_claimpolicy_admission_seconds_sum{result="refused"} 0.1
sandgate_claimpolicy_admission_seconds_count{result="refused"} 100
sandgate_claimpolicy_admission_seconds_bucket{result="admitted",le="0.001"} 0
sandgate_claimpolicy_admission_seconds_bucket{result="admitted",le="0.0025"} 0
sandgate_claimpolicy_admission_seconds_bucket{result="admitted",le="+Inf"} 40
sandgate_claimpolicy_admission_seconds_sum{result="admitted"} 40
sandgate_claimpolicy_admission_seconds_count{result="admitted"} 40
# TYPE sandgate_claimpolicy_ledger_writes_total counter
sandgate_claimpolicy_ledger_writes_total{writer="admission",result="success"} 12
sandgate_claimpolicy_ledger_writes_total{writer="admission",result="conflict"} 3
sandgate_claimpolicy_ledger_writes_total{writer="leader",result="error"} 0
`)
	control := []time.Duration{2 * time.Millisecond, 4 * time.Millisecond}
	got := refusalCost(scrape.Delta(before, after), scrape.Delta(nil, operator), control, 1)
	want := &report.RefusalCost{
		// 100 refusals in the arm: half within 1 ms, all but one within 2.5 ms.
		Sandgate: report.Histogram{Count: 100, MeanMs: 1, P50Ms: 1, P99Ms: 2.5,
			Buckets: []report.Bucket{{LeMs: 1, Count: 50}, {LeMs: 2.5, Count: 99}}},
		// 100 rejected calls in the arm (2 before it): 90 within 5 ms, 10 within 25 ms.
		Webhook: report.Histogram{Count: 100, MeanMs: 3, P50Ms: 2.78, P99Ms: 23,
			Buckets: []report.Bucket{{LeMs: 5, Count: 90}, {LeMs: 25, Count: 100}}},
		Control:      stats.Summarize(control),
		ControlOther: 1,
		LedgerWrites: map[string]float64{"admission success": 12, "admission conflict": 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusalCost mismatch (-want +got):\n%s", diff)
	}
}
