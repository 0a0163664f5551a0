package stats

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	cases := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{name: "median of odd count is the middle sample", sorted: []float64{1, 2, 3, 4, 5}, p: 50, want: 3},
		{name: "median of even count is the lower middle sample", sorted: []float64{1, 2, 3, 4}, p: 50, want: 2},
		{name: "p90 of 1..100", sorted: hundred, p: 90, want: 90},
		{name: "p99 of 1..100", sorted: hundred, p: 99, want: 99},
		{name: "p100 is the maximum", sorted: hundred, p: 100, want: 100},
		{name: "p99 of 50 samples is the largest", sorted: hundred[:50], p: 99, want: 50},
		{name: "tiny percentile is the minimum", sorted: hundred, p: 0.001, want: 1},
		{name: "single sample answers every percentile", sorted: []float64{7}, p: 90, want: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%d samples, %v) = %v, want %v", len(tc.sorted), tc.p, got, tc.want)
			}
		})
	}
}

func TestPercentileUndefined(t *testing.T) {
	cases := []struct {
		name   string
		sorted []float64
		p      float64
	}{
		{name: "no samples", sorted: nil, p: 50},
		{name: "zero percentile", sorted: []float64{1}, p: 0},
		{name: "above 100", sorted: []float64{1}, p: 101},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); !math.IsNaN(got) {
				t.Errorf("percentile(%v, %v) = %v, want NaN", tc.sorted, tc.p, got)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		name    string
		samples []time.Duration
		want    Summary
	}{
		{name: "no samples", want: Summary{}},
		{
			name: "unsorted input in milliseconds",
			samples: []time.Duration{
				40 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond,
				20 * time.Millisecond, 1500 * time.Microsecond,
			},
			want: Summary{Count: 5, Min: 1.5, P50: 20, P90: 40, P99: 40, Max: 40, Mean: 20.3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Summarize(tc.samples)); diff != "" {
				t.Errorf("Summarize mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
