// Package stats summarises latency samples the way the public load tests report them:
// StartupLatency50/90/99 are nearest-rank percentiles in milliseconds.
package stats

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of durations in milliseconds.
type Summary struct {
	Count int     `json:"count"`
	Min   float64 `json:"minMs"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
	Mean  float64 `json:"meanMs"`
}

// Summarize returns the summary of samples; the zero Summary when there are none.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	ms := make([]float64, len(samples))
	var sum float64
	for i, d := range samples {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return Summary{
		Count: len(ms),
		Min:   round(ms[0]),
		P50:   round(percentile(ms, 50)),
		P90:   round(percentile(ms, 90)),
		P99:   round(percentile(ms, 99)),
		Max:   round(ms[len(ms)-1]),
		Mean:  round(sum / float64(len(ms))),
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted: the smallest
// sample that at least p percent of the samples do not exceed. Nearest rank never
// interpolates, so the p99 of 50 samples is the largest one, not a value nobody measured.
// It returns NaN for no samples or p outside (0, 100].
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// round keeps microsecond precision, which is all a millisecond report needs.
func round(ms float64) float64 { return math.Round(ms*1000) / 1000 }
