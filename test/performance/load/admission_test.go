package load

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sandgate-dev/sandgate/test/env/proc"
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

func TestWebhookServer(t *testing.T) {
	before := parse(t, `# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="0.001"} 2
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="0.01"} 2
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="+Inf"} 2
controller_runtime_webhook_latency_seconds_sum{webhook="/stamp"} 0.001
controller_runtime_webhook_latency_seconds_count{webhook="/stamp"} 2
`)
	after := parse(t, `# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="0.001"} 12
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="0.01"} 12
controller_runtime_webhook_latency_seconds_bucket{webhook="/stamp",le="+Inf"} 12
controller_runtime_webhook_latency_seconds_sum{webhook="/stamp"} 0.006
controller_runtime_webhook_latency_seconds_count{webhook="/stamp"} 12
controller_runtime_webhook_latency_seconds_bucket{webhook="/idle",le="0.001"} 0
controller_runtime_webhook_latency_seconds_bucket{webhook="/idle",le="+Inf"} 0
controller_runtime_webhook_latency_seconds_sum{webhook="/idle"} 0
controller_runtime_webhook_latency_seconds_count{webhook="/idle"} 0
`)
	usage := func(cpu float64) *proc.Usage { return &proc.Usage{CPUSeconds: cpu} }
	// 10 calls in the run, all within 1 ms; a path without calls is left out.
	paths := []report.WebhookPath{{Path: "/stamp", Calls: 10, MeanMs: 0.5, P50Ms: 0.5, P99Ms: 0.99}}
	cases := map[string]struct {
		floor         bool
		before, after snapshot
		want          *report.WebhookServer
	}{
		"sandgate's run reads the operator": {
			before: snapshot{operator: before, usage: usage(1)}, after: snapshot{operator: after, usage: usage(3.5)},
			want: &report.WebhookServer{Process: "operator", CPUSeconds: 2.5, Paths: paths},
		},
		"a floor with the stand-in in a process of its own": {
			floor:  true,
			before: snapshot{standIn: before, standInUsage: usage(0.5)}, after: snapshot{standIn: after, standInUsage: usage(0.75)},
			want: &report.WebhookServer{Process: "stand-in process", CPUSeconds: 0.25, Paths: paths},
		},
		"a floor with the stand-in in the load generator": {
			floor:  true,
			before: snapshot{standIn: before}, after: snapshot{standIn: after},
			want: &report.WebhookServer{Process: "load generator", CPUSeconds: -1, Paths: paths},
		},
		"a floor without a stand-in scraped": {floor: true, before: snapshot{operator: before}, after: snapshot{operator: after}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := webhookServer(tc.floor, tc.before, tc.after)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("webhookServer mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
