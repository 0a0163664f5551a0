package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Scale is what the scale scenario measured at one size: the operator's memory and idle CPU
// with every pool full, the time from an operator restart to its first claim served, and the
// serial claims at that size beside the same claims at pool 50 (a fresh cluster of one pool)
// and beside the floor of the same cluster.
type Scale struct {
	// Sandboxes are the pool members the run asked for: Namespaces × Pools × replicas.
	Sandboxes  int `json:"sandboxes"`
	Namespaces int `json:"namespaces"`
	// Pools counts every pool of the run, all namespaces together.
	Pools int `json:"pools"`
	// FillSeconds is from the first pool created to every pool full and Ready; FillRate is
	// Sandboxes ÷ FillSeconds.
	FillSeconds float64 `json:"fillSeconds"`
	FillRate    float64 `json:"fillRate"`

	// BaselineRSSMiB and BaselineHeapInuseMiB are the operator's before the run created
	// anything: what it costs with no Sandbox.
	BaselineRSSMiB       float64 `json:"baselineRSSMiB"`
	BaselineHeapInuseMiB float64 `json:"baselineHeapInuseMiB"`
	// OperatorRSSMiB (process_resident_memory_bytes), HeapInuseMiB
	// (go_memstats_heap_inuse_bytes) and HeapAllocMiB (go_memstats_heap_alloc_bytes) are read
	// at the end of the idle window, every pool full; PeakRSSMiB is the process's VmHWM then.
	OperatorRSSMiB float64 `json:"operatorRSSMiB"`
	HeapInuseMiB   float64 `json:"heapInuseMiB"`
	HeapAllocMiB   float64 `json:"heapAllocMiB"`
	PeakRSSMiB     float64 `json:"peakRSSMiB"`
	// MiBPer1000Sandboxes is (OperatorRSSMiB − BaselineRSSMiB) per 1,000 Sandboxes, and
	// HeapInuseMiBPer1000Sandboxes the same of the heap in use: what each thousand more costs.
	MiBPer1000Sandboxes          float64 `json:"mibPer1000Sandboxes"`
	HeapInuseMiBPer1000Sandboxes float64 `json:"heapInuseMiBPer1000Sandboxes"`
	// CacheLabelSelectors says whether the operator ran with --cache-label-selectors.
	CacheLabelSelectors bool `json:"cacheLabelSelectors,omitempty"`

	// IdleSeconds is the idle window: no claim, every pool full. IdleCPUCoresPercent is the
	// operator's CPU over it in percent of one core; IdleAPIServerCPUCoresPercent
	// kube-apiserver's (-1 when not read).
	IdleSeconds                  float64 `json:"idleSeconds"`
	IdleCPUCoresPercent          float64 `json:"idleCPUCoresPercent"`
	IdleAPIServerCPUCoresPercent float64 `json:"idleAPIServerCPUCoresPercent"`

	// Restarts are the operator's restarts, in order. The Restart* figures are the median
	// restart's (by time to the first claim): one restart's time moves by seconds from run
	// to run.
	Restarts []Restart `json:"restarts,omitempty"`
	// RestartStopSeconds is how long the operator took to exit after SIGTERM.
	// RestartToReadySeconds is from the new process's start to its /readyz answering OK, and
	// RestartToFirstClaimSeconds from the same start to the watch showing Ready=True on a claim
	// created (retried until admitted) right after it. RestartClaimAttempts counts the create
	// calls that claim took: those before the webhook server listened were refused.
	RestartStopSeconds         float64 `json:"restartStopSeconds"`
	RestartToReadySeconds      float64 `json:"restartToReadySeconds"`
	RestartToFirstClaimSeconds float64 `json:"restartToFirstClaimSeconds"`
	RestartClaimAttempts       int     `json:"restartClaimAttempts"`

	// SerialClaims, SerialP50Ms and SerialP99Ms are the serial claims into one pool of the
	// full cluster (client view: create call to the watch showing Ready).
	SerialClaims int     `json:"serialClaims"`
	SerialP50Ms  float64 `json:"serialP50Ms"`
	SerialP99Ms  float64 `json:"serialP99Ms"`
	// FloorSerialP50Ms and FloorSerialP99Ms are the floor's serial claims on the same
	// cluster, the operator detached; 0 when not measured.
	FloorSerialP50Ms float64 `json:"floorSerialP50Ms"`
	FloorSerialP99Ms float64 `json:"floorSerialP99Ms"`
	// Pool50SerialP50Ms is the same serial claims on a fresh cluster with one pool of 50; 0
	// when not measured.
	Pool50SerialP50Ms float64 `json:"pool50SerialP50Ms"`
	// P50RatioToPool50 is SerialP50Ms ÷ Pool50SerialP50Ms and P50RatioToFloor SerialP50Ms ÷
	// FloorSerialP50Ms; 0 when either side is missing.
	P50RatioToPool50 float64 `json:"p50RatioToPool50"`
	P50RatioToFloor  float64 `json:"p50RatioToFloor"`
}

// Restart is one restart of the operator (see the Restart* fields of Scale).
type Restart struct {
	StopSeconds         float64 `json:"stopSeconds"`
	ToReadySeconds      float64 `json:"toReadySeconds"`
	ToFirstClaimSeconds float64 `json:"toFirstClaimSeconds"`
	ClaimAttempts       int     `json:"claimAttempts"`
	// OperatorCPUSeconds is the new process's CPU from its start to the first claim's Ready,
	// APIServerCPUSeconds kube-apiserver's from just before the stop to then: what the
	// restart's lists and watches cost on both ends. 0 when they could not be read.
	OperatorCPUSeconds  float64 `json:"operatorCPUSeconds,omitempty"`
	APIServerCPUSeconds float64 `json:"apiserverCPUSeconds,omitempty"`
}

// SetMedianRestart sets the Restart* figures from the median of Restarts by time to the first
// claim (the slower middle one of an even count); none without restarts.
func (s *Scale) SetMedianRestart() {
	if len(s.Restarts) == 0 {
		return
	}
	sorted := slices.SortedFunc(slices.Values(s.Restarts), func(a, b Restart) int {
		return cmp.Compare(a.ToFirstClaimSeconds, b.ToFirstClaimSeconds)
	})
	m := sorted[len(sorted)/2]
	s.RestartStopSeconds, s.RestartToReadySeconds, s.RestartToFirstClaimSeconds, s.RestartClaimAttempts =
		m.StopSeconds, m.ToReadySeconds, m.ToFirstClaimSeconds, m.ClaimAttempts
}

// Targets of the scale scenario (issue 24): serial p50 at scale ÷ at pool 50, and an operator
// restart's first claim served.
const (
	ScaleP50RatioTarget        = 1.2
	ScaleRestartToClaimSeconds = 10.0
)

// SetRatios sets the ratios of the serial p50 to pool 50 and to the floor from the figures,
// to three decimals.
func (s *Scale) SetRatios() {
	s.P50RatioToPool50 = math.Round(ratio(s.SerialP50Ms, s.Pool50SerialP50Ms)*1000) / 1000
	s.P50RatioToFloor = math.Round(ratio(s.SerialP50Ms, s.FloorSerialP50Ms)*1000) / 1000
}

// PerThousand is the increase from baseline to value per 1,000 of count; 0 without a count.
func PerThousand(value, baseline float64, count int) float64 {
	if count <= 0 {
		return 0
	}
	return math.Round((value-baseline)/(float64(count)/1000)*100) / 100
}

// WriteScaleText writes the scale figures as a short human summary with the targets.
func WriteScaleText(w io.Writer, s *Scale) error {
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	lines := []string{
		fmt.Sprintf("scale: %d Sandboxes in %d pools across %d namespaces, filled in %.0f s (%.1f Sandboxes/s)",
			s.Sandboxes, s.Pools, s.Namespaces, s.FillSeconds, s.FillRate),
		fmt.Sprintf("  operator memory, idle: RSS %.1f MiB (peak %.1f), heap in use %.1f MiB, heap alloc %.1f MiB; with no Sandbox: RSS %.1f MiB, heap in use %.1f MiB",
			s.OperatorRSSMiB, s.PeakRSSMiB, s.HeapInuseMiB, s.HeapAllocMiB, s.BaselineRSSMiB, s.BaselineHeapInuseMiB),
		fmt.Sprintf("  per 1,000 Sandboxes: RSS %.2f MiB, heap in use %.2f MiB (cache-label-selectors %v)",
			s.MiBPer1000Sandboxes, s.HeapInuseMiBPer1000Sandboxes, s.CacheLabelSelectors),
		fmt.Sprintf("  idle CPU over %.0f s: operator %.2f %% of a core, kube-apiserver %.2f %%",
			s.IdleSeconds, s.IdleCPUCoresPercent, s.IdleAPIServerCPUCoresPercent),
		fmt.Sprintf("  restart (median of %d): stopped in %.2f s; /readyz OK %.2f s and first claim Ready %.2f s after the new process started (%d create calls) — target ≤ %.0f s: %s%s",
			max(len(s.Restarts), 1), s.RestartStopSeconds, s.RestartToReadySeconds, s.RestartToFirstClaimSeconds, s.RestartClaimAttempts,
			ScaleRestartToClaimSeconds, met(s.RestartToFirstClaimSeconds > 0 && s.RestartToFirstClaimSeconds <= ScaleRestartToClaimSeconds), restartList(s.Restarts)),
		fmt.Sprintf("  serial claims (%d): p50 %.1f ms, p99 %.1f ms; floor p50 %.1f ms (×%.2f); pool 50 p50 %.1f ms",
			s.SerialClaims, s.SerialP50Ms, s.SerialP99Ms, s.FloorSerialP50Ms, s.P50RatioToFloor, s.Pool50SerialP50Ms),
		fmt.Sprintf("  serial p50 ÷ pool 50: %.2f — target ≤ %.1f: %s",
			s.P50RatioToPool50, ScaleP50RatioTarget, met(s.P50RatioToPool50 > 0 && s.P50RatioToPool50 <= ScaleP50RatioTarget)),
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return fmt.Errorf("writing the scale summary: %w", err)
		}
	}
	return nil
}

// restartTimes is each restart's time to its first claim, in order, with prec decimals; nil
// for fewer than two restarts (the median is all there is).
func restartTimes(rs []Restart, prec int) []string {
	if len(rs) < 2 {
		return nil
	}
	times := make([]string, len(rs))
	for i, r := range rs {
		times[i] = strconv.FormatFloat(r.ToFirstClaimSeconds, 'f', prec, 64)
	}
	return times
}

// restartList is "; each: 14.40, 9.20, 9.80 s", or "" for one restart.
func restartList(rs []Restart) string {
	if t := restartTimes(rs, 2); t != nil {
		return "; each: " + strings.Join(t, ", ") + " s"
	}
	return ""
}
