package scrape

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const apiserverBefore = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="sandboxclaims",subresource="",verb="POST"} 10
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="PATCH"} 4
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="LIST"} 3
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
`

const apiserverAfter = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="sandboxclaims",subresource="",verb="POST"} 40
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="PATCH"} 34
apiserver_request_total{code="409",resource="sandboxes",subresource="",verb="PATCH"} 2
apiserver_request_total{code="200",resource="sandboxes",subresource="",verb="LIST"} 3
apiserver_request_total{code="200",resource="sandboxclaims",subresource="status",verb="PATCH"} 30
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 20
# HELP sandgate_sandbox_reconciles_to_ready Reconciles of one Sandbox until Ready.
# TYPE sandgate_sandbox_reconciles_to_ready histogram
sandgate_sandbox_reconciles_to_ready_bucket{le="1"} 3
sandgate_sandbox_reconciles_to_ready_bucket{le="2"} 5
sandgate_sandbox_reconciles_to_ready_bucket{le="+Inf"} 5
sandgate_sandbox_reconciles_to_ready_sum 7
sandgate_sandbox_reconciles_to_ready_count 5
`

func mustParse(t *testing.T, text string) Snapshot {
	t.Helper()
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestDeltaGroupBy(t *testing.T) {
	delta := Delta(mustParse(t, apiserverBefore), mustParse(t, apiserverAfter))
	cases := []struct {
		name   string
		metric string
		match  map[string]string
		labels []string
		want   map[string]float64
	}{
		{
			name:   "requests by verb, resource and code leave out series that did not move",
			metric: "apiserver_request_total",
			labels: []string{"verb", "resource", "subresource", "code"},
			want: map[string]float64{
				"POST sandboxclaims  201":        30,
				"PATCH sandboxes  200":           30,
				"PATCH sandboxes  409":           2,
				"PATCH sandboxclaims status 200": 30,
			},
		},
		{
			name:   "conflicts only",
			metric: "apiserver_request_total",
			match:  map[string]string{"code": "409"},
			labels: []string{"resource"},
			want:   map[string]float64{"sandboxes": 2},
		},
		{
			name:   "unknown metric gives nothing",
			metric: "nope_total",
			labels: []string{"verb"},
			want:   map[string]float64{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := delta.GroupBy(tc.metric, tc.match, tc.labels...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GroupBy mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeltaSum(t *testing.T) {
	before := mustParse(t, apiserverBefore)
	after := mustParse(t, apiserverAfter)
	delta := Delta(before, after)
	cases := []struct {
		name   string
		snap   Snapshot
		metric string
		match  map[string]string
		want   float64
	}{
		{name: "CPU seconds between scrapes", snap: delta, metric: "process_cpu_seconds_total", want: 7.5},
		{name: "all PATCHes of sandboxes", snap: delta, metric: "apiserver_request_total", match: map[string]string{"verb": "PATCH", "resource": "sandboxes"}, want: 32},
		{name: "histogram count of a new series counts from zero", snap: delta, metric: "sandgate_sandbox_reconciles_to_ready_count", want: 5},
		{name: "histogram sum", snap: delta, metric: "sandgate_sandbox_reconciles_to_ready_sum", want: 7},
		{name: "histogram bucket keeps le", snap: delta, metric: "sandgate_sandbox_reconciles_to_ready_bucket", match: map[string]string{"le": "2"}, want: 5},
		{name: "a counter that went down (restart) counts from zero", snap: Delta(after, before), metric: "process_cpu_seconds_total", want: 12.5},
		{name: "absolute value without delta", snap: after, metric: "apiserver_request_total", match: map[string]string{"verb": "LIST"}, want: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.snap.Sum(tc.metric, tc.match); got != tc.want {
				t.Errorf("Sum(%s, %v) = %v, want %v", tc.metric, tc.match, got, tc.want)
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("this is { not metrics\n")); err == nil {
		t.Errorf("Parse of garbage succeeded, want an error")
	}
}

func TestSorted(t *testing.T) {
	got := Sorted(map[string]float64{"b": 2, "a": 2, "c": 5})
	want := []Count{{Key: "c", Count: 5}, {Key: "a", Count: 2}, {Key: "b", Count: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sorted mismatch (-want +got):\n%s", diff)
	}
}

func TestBucketUpperBound(t *testing.T) {
	before := mustParse(t, `# TYPE lat_ms histogram
lat_ms_bucket{launch_type="warm",le="100"} 10
lat_ms_bucket{launch_type="warm",le="250"} 10
lat_ms_bucket{launch_type="warm",le="+Inf"} 10
lat_ms_sum{launch_type="warm"} 500
lat_ms_count{launch_type="warm"} 10
`)
	after := mustParse(t, `# TYPE lat_ms histogram
lat_ms_bucket{launch_type="warm",le="100"} 60
lat_ms_bucket{launch_type="warm",le="250"} 100
lat_ms_bucket{launch_type="warm",le="+Inf"} 108
lat_ms_sum{launch_type="warm"} 9000
lat_ms_count{launch_type="warm"} 108
lat_ms_bucket{launch_type="cold",le="100"} 0
lat_ms_bucket{launch_type="cold",le="250"} 1
lat_ms_bucket{launch_type="cold",le="+Inf"} 2
lat_ms_sum{launch_type="cold"} 900
lat_ms_count{launch_type="cold"} 2
`)
	delta := Delta(before, after)
	// 100 observations in the run: 50 at most 100 ms, 41 more at most 250 ms, 9 beyond.
	cases := []struct {
		name   string
		q      float64
		want   float64
		wantOK bool
		metric string
		snap   Snapshot
	}{
		{name: "median in the first bucket", q: 0.5, want: 100, wantOK: true},
		{name: "p90 in the second bucket", q: 0.9, want: 250, wantOK: true},
		{name: "p99 beyond the last finite bucket", q: 0.99, want: math.Inf(1), wantOK: true},
		{name: "no observations", q: 0.5, snap: Delta(after, after), wantOK: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := tc.snap
			if snap == nil {
				snap = delta
			}
			got, ok := snap.BucketUpperBound("lat_ms", tc.q)
			if ok != tc.wantOK || (ok && got != tc.want) {
				t.Errorf("BucketUpperBound(%v) = %v, %v; want %v, %v", tc.q, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

const webhookHistogram = `# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp",operation="CREATE",rejected="false",type="admit",le="0.005"} 30
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp",operation="CREATE",rejected="false",type="admit",le="0.025"} 40
apiserver_admission_webhook_admission_duration_seconds_bucket{name="stamp",operation="CREATE",rejected="false",type="admit",le="+Inf"} 40
apiserver_admission_webhook_admission_duration_seconds_sum{name="stamp",operation="CREATE",rejected="false",type="admit"} 0.2
apiserver_admission_webhook_admission_duration_seconds_count{name="stamp",operation="CREATE",rejected="false",type="admit"} 40
apiserver_admission_webhook_admission_duration_seconds_bucket{name="guard",operation="UPDATE",rejected="false",type="validating",le="0.005"} 0
apiserver_admission_webhook_admission_duration_seconds_bucket{name="guard",operation="UPDATE",rejected="false",type="validating",le="0.025"} 2
apiserver_admission_webhook_admission_duration_seconds_bucket{name="guard",operation="UPDATE",rejected="false",type="validating",le="+Inf"} 4
apiserver_admission_webhook_admission_duration_seconds_sum{name="guard",operation="UPDATE",rejected="false",type="validating"} 1
apiserver_admission_webhook_admission_duration_seconds_count{name="guard",operation="UPDATE",rejected="false",type="validating"} 4
`

func TestSelectQuantile(t *testing.T) {
	snap := mustParse(t, webhookHistogram)
	const metric = "apiserver_admission_webhook_admission_duration_seconds"
	cases := map[string]struct {
		match  map[string]string
		q      float64
		want   float64
		wantOK bool
	}{
		// 40 calls: rank 20 of the 30 in [0, 5 ms].
		"median inside the first bucket": {match: map[string]string{"name": "stamp"}, q: 0.5, want: 0.005 * 20 / 30, wantOK: true},
		// rank 36: the 6th of the 10 in (5 ms, 25 ms].
		"p90 inside the second bucket": {match: map[string]string{"name": "stamp"}, q: 0.9, want: 0.005 + 0.020*6/10, wantOK: true},
		// rank 3.96 of 4 lies in +Inf: the largest finite bound.
		"p99 beyond the last finite bucket": {match: map[string]string{"name": "guard"}, q: 0.99, want: 0.025, wantOK: true},
		"both webhooks summed":              {q: 30.0 / 44, want: 0.005, wantOK: true},
		"no such webhook":                   {match: map[string]string{"name": "nope"}, q: 0.5},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := snap.Select(tc.match).Quantile(metric, tc.q)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Quantile(%v) = %v, %v; want %v, %v", tc.q, got, ok, tc.want, tc.wantOK)
			}
		})
	}
	if got := snap.Select(map[string]string{"name": "guard"}).Sum(metric+"_count", nil); got != 4 {
		t.Errorf("Select(guard) count = %v, want 4", got)
	}
}

func TestBuckets(t *testing.T) {
	s := mustParse(t, `# TYPE h histogram
h_bucket{a="x",le="0.1"} 1
h_bucket{a="y",le="0.1"} 2
h_bucket{a="x",le="+Inf"} 3
h_bucket{a="y",le="+Inf"} 4
h_sum{a="x"} 1
h_count{a="x"} 3
`)
	want := []Bucket{{LE: 0.1, Count: 3}, {LE: math.Inf(1), Count: 7}}
	if got := s.Buckets("h"); !cmp.Equal(got, want) {
		t.Errorf("Buckets = %v, want %v", got, want)
	}
	if got := s.Buckets("missing"); got != nil {
		t.Errorf("Buckets of a missing histogram = %v, want nil", got)
	}
}
