package load

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

func TestWebhookCosts(t *testing.T) {
	before := parse(t, `# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="0.005"} 5
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="0.025"} 5
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="+Inf"} 5
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit"} 0.01
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit"} 5
`)
	after := parse(t, `# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="0.005"} 13
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="0.025"} 15
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit",le="+Inf"} 15
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit"} 0.05
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp.sandboxclaims",operation="CREATE",rejected="false",type="admit"} 15
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="false",type="validating",le="0.005"} 9
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="false",type="validating",le="0.025"} 9
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="false",type="validating",le="+Inf"} 9
apiserver_admission_webhook_admission_duration_seconds_sum{name="binding-guard.sandboxes",operation="UPDATE",rejected="false",type="validating"} 0.018
apiserver_admission_webhook_admission_duration_seconds_count{name="binding-guard.sandboxes",operation="UPDATE",rejected="false",type="validating"} 9
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="true",type="validating",le="0.005"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="true",type="validating",le="0.025"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="binding-guard.sandboxes",operation="UPDATE",rejected="true",type="validating",le="+Inf"} 1
apiserver_admission_webhook_admission_duration_seconds_sum{name="binding-guard.sandboxes",operation="UPDATE",rejected="true",type="validating"} 0.002
apiserver_admission_webhook_admission_duration_seconds_count{name="binding-guard.sandboxes",operation="UPDATE",rejected="true",type="validating"} 1
# TYPE apiserver_admission_match_condition_exclusions_total counter
apiserver_admission_match_condition_exclusions_total{kind="webhook",name="binding-guard.sandboxes",operation="UPDATE",type="validate"} 30
apiserver_admission_match_condition_exclusions_total{kind="webhook",name="default.sandboxes",operation="CREATE",type="admit"} 10
apiserver_admission_match_condition_exclusions_total{kind="policy",name="some-policy",operation="CREATE",type="validate"} 4
`)
	resources := map[string][]string{"stamp.sandboxclaims": {"sandboxclaims"}, "binding-guard.sandboxes": {"sandboxes"}}
	want := []report.Webhook{
		// 10 calls, one rejected, all within 5 ms: the median interpolates to the middle.
		{Name: "binding-guard.sandboxes", Type: "validating", Operation: "UPDATE", Calls: 10, Rejected: 1, SumSeconds: 0.02,
			MeanMs: 2, P50Ms: 2.5, P99Ms: 4.95, Excluded: 30, Resources: []string{"sandboxes"}},
		// Excluded by its matchConditions every time: no call, no latency.
		{Name: "default.sandboxes", Type: "mutating", Operation: "CREATE", Excluded: 10},
		// 10 calls in the run: 8 within 5 ms, 2 within 25 ms.
		{Name: "stamp.sandboxclaims", Type: "mutating", Operation: "CREATE", Calls: 10, SumSeconds: 0.04,
			MeanMs: 4, P50Ms: 3.13, P99Ms: 24, Resources: []string{"sandboxclaims"}},
	}
	got := webhookCosts(scrape.Delta(before, after), resources)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhookCosts mismatch (-want +got):\n%s", diff)
	}
}

func TestWebhookType(t *testing.T) {
	for label, want := range map[string]string{"admit": "mutating", "validating": "validating", "validate": "validating", "other": "other"} {
		if got := webhookType(label); got != want {
			t.Errorf("webhookType(%q) = %q, want %q", label, got, want)
		}
	}
}
