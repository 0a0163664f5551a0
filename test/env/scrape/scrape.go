// Package scrape reads Prometheus text-format metrics (the operator's /metrics and the API
// server's) into flat snapshots and computes what happened between two of them: a load run
// scrapes before and after, and reports the deltas of counters such as apiserver_request_total
// and controller_runtime_reconcile_total.
package scrape

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// Series is one sample: a metric name, its labels and its value. Histograms and summaries
// become their _count, _sum (and histogram _bucket, with label le) series, as in the text
// format.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// key identifies a series: its name and its labels in sorted order.
func (s Series) key() string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		fmt.Fprintf(&b, "\xff%s=%s", k, s.Labels[k])
	}
	return b.String()
}

// Snapshot is every series of one scrape, keyed by name and labels.
type Snapshot map[string]Series

// Parse reads the Prometheus text exposition format.
func Parse(r io.Reader) (Snapshot, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics text: %w", err)
	}
	snap := Snapshot{}
	add := func(name string, labels map[string]string, v float64) {
		s := Series{Name: name, Labels: labels, Value: v}
		snap[s.key()] = s
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := labelMap(m)
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				add(name, labels, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, labels, m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, labels, m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				add(name+"_count", labels, float64(m.GetSummary().GetSampleCount()))
				add(name+"_sum", labels, m.GetSummary().GetSampleSum())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				add(name+"_count", labels, float64(h.GetSampleCount()))
				add(name+"_sum", labels, h.GetSampleSum())
				for _, b := range h.GetBucket() {
					withLE := maps.Clone(labels)
					withLE["le"] = model.FloatString(b.GetUpperBound()).String()
					add(name+"_bucket", withLE, float64(b.GetCumulativeCount()))
				}
			}
		}
	}
	return snap, nil
}

func labelMap(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// Delta returns after minus before for every series of after: what a counter counted between
// the two scrapes. A series missing from before counts from zero; a series that went down (a
// restarted process) counts from zero too, as Prometheus' increase() does.
func Delta(before, after Snapshot) Snapshot {
	out := make(Snapshot, len(after))
	for k, s := range after {
		d := s
		if prev, ok := before[k]; ok && prev.Value <= s.Value {
			d.Value = s.Value - prev.Value
		}
		out[k] = d
	}
	return out
}

// Sum adds the values of the series called name whose labels include every pair of match.
func (s Snapshot) Sum(name string, match map[string]string) float64 {
	var sum float64
	for _, series := range s {
		if series.Name == name && matches(series.Labels, match) {
			sum += series.Value
		}
	}
	return sum
}

// GroupBy sums the series called name whose labels include match by the values of the
// given labels, joined with a space (a missing label counts as ""); groups that sum to zero
// are left out, so that a delta shows only what happened.
func (s Snapshot) GroupBy(name string, match map[string]string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, series := range s {
		if series.Name != name || !matches(series.Labels, match) || series.Value == 0 {
			continue
		}
		vals := make([]string, len(labels))
		for i, l := range labels {
			vals[i] = series.Labels[l]
		}
		out[strings.Join(vals, " ")] += series.Value
	}
	return out
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Count is one row of a breakdown: a key (label values) and its count.
type Count struct {
	Key   string  `json:"key"`
	Count float64 `json:"count"`
}

// Sorted returns a breakdown as rows, largest count first, then by key.
func Sorted(m map[string]float64) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{Key: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// FromURL scrapes a plain-HTTP metrics endpoint such as the operator's.
func FromURL(ctx context.Context, url string) (Snapshot, error) {
	return get(ctx, http.DefaultClient, url)
}

// FromAPIServer scrapes the API server's own /metrics with the credentials of cfg (an admin
// may read it; other users need the /metrics non-resource URL granted).
func FromAPIServer(ctx context.Context, cfg *rest.Config) (Snapshot, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server: %w", err)
	}
	return get(ctx, hc, strings.TrimSuffix(cfg.Host, "/")+"/metrics")
}

func get(ctx context.Context, hc *http.Client, url string) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or failed already
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: HTTP %s", url, resp.Status)
	}
	snap, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return snap, nil
}

// BucketUpperBound returns the upper bound of the histogram bucket that holds the q-quantile
// (0 < q <= 1) of the observations of histogram name (its _bucket series summed over every
// other label): the quantile is at most that value. It returns +Inf when the quantile lies
// beyond the last finite bucket, and false when the histogram has no observations.
func (s Snapshot) BucketUpperBound(name string, q float64) (float64, bool) {
	cumulative, bounds, ok := s.buckets(name)
	if !ok {
		return 0, false
	}
	rank := q * cumulative[bounds[len(bounds)-1]]
	for _, le := range bounds {
		if cumulative[le] >= rank {
			return le, true
		}
	}
	return math.Inf(1), true
}

// buckets sums the _bucket series of histogram name over every other label: the cumulative
// count at each upper bound, and the bounds in order. ok is false when the histogram has no
// observations.
func (s Snapshot) buckets(name string) (cumulative map[float64]float64, bounds []float64, ok bool) {
	cumulative = map[float64]float64{}
	for _, series := range s {
		if series.Name != name+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(series.Labels["le"], 64)
		if err != nil {
			continue
		}
		cumulative[le] += series.Value
	}
	bounds = slices.Sorted(maps.Keys(cumulative))
	if len(bounds) == 0 || cumulative[bounds[len(bounds)-1]] == 0 {
		return nil, nil, false
	}
	return cumulative, bounds, true
}

// Bucket is one bucket of a histogram: how many observations were at most LE (cumulative).
type Bucket struct {
	LE, Count float64
}

// Buckets returns the cumulative buckets of histogram name (its _bucket series summed over
// every other label) by upper bound, +Inf last; nil when it has no observations.
func (s Snapshot) Buckets(name string) []Bucket {
	cumulative, bounds, ok := s.buckets(name)
	if !ok {
		return nil
	}
	out := make([]Bucket, len(bounds))
	for i, le := range bounds {
		out[i] = Bucket{LE: le, Count: cumulative[le]}
	}
	return out
}

// Select returns the series whose labels include every pair of match: one label set of a
// histogram, say, for BucketUpperBound or Quantile.
func (s Snapshot) Select(match map[string]string) Snapshot {
	out := Snapshot{}
	for k, series := range s {
		if matches(series.Labels, match) {
			out[k] = series
		}
	}
	return out
}

// Quantile estimates the q-quantile (0 < q <= 1) of histogram name (its _bucket series summed
// over every other label) the way Prometheus' histogram_quantile does: linearly within the
// bucket that holds it, the first bucket starting at 0. A quantile in the +Inf bucket is the
// largest finite bound. It returns false when the histogram has no observations. With coarse
// buckets (the API server's webhook histogram starts 5 ms, 25 ms) the estimate says where in
// the bucket the observations would be if they were spread evenly: a hint, not a measurement.
func (s Snapshot) Quantile(name string, q float64) (float64, bool) {
	cumulative, bounds, ok := s.buckets(name)
	if !ok {
		return 0, false
	}
	rank := q * cumulative[bounds[len(bounds)-1]]
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		count := cumulative[le]
		if count >= rank {
			if math.IsInf(le, 1) {
				return lower, true
			}
			if count == below {
				return le, true
			}
			return lower + (le-lower)*(rank-below)/(count-below), true
		}
		lower, below = le, count
	}
	return lower, true
}
