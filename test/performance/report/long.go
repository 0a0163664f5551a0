package report

import (
	"fmt"
	"strings"
)

// writeLong writes the figures only the long scenarios have: a sustained run's warm share,
// pool and latency over time beside its floor's, the scale run's memory, idle CPU,
// restart and serial claims, and a burst run's figures burst by burst. Scenarios without them are left out; nothing is written when
// no result has them.
func writeLong(p func(string, ...any), results []*Result) {
	var sustained, scale, bursts []*Result
	for _, r := range results {
		if r.Bursts != nil && len(r.Bursts.Bursts) > 0 {
			bursts = append(bursts, r)
		}
		if r.Sustained != nil {
			sustained = append(sustained, r)
		}
		if r.Scale != nil {
			scale = append(scale, r)
		}
	}
	if len(sustained) > 0 {
		writeSustained(p, sustained)
	}
	if len(scale) > 0 {
		writeScale(p, scale)
	}
	if len(bursts) > 0 {
		writeBursts(p, bursts)
	}
}

func writeSustained(p func(string, ...any), results []*Result) {
	p("## Sustained traffic")
	p("")
	p("Claims created at a steady rate, each deleted a random lifetime after its Ready, the pool")
	p("refilling meanwhile; the floor refills the pool itself (a copy of an operator member per")
	p("member taken: Sandbox, pod, Ready status). Warm: the claim's Sandbox was a ready pool member")
	p("when the claim needed it. Refill kept up: from %d s after the first claim to the last create,", RefillGraceSeconds)
	p("the pool never showed zero ready members. Target: ≥ 99%% warm when the pool holds at least")
	p("the rate × a member's start-up time; p50 ≤ 1.3 ×, p99 ≤ 1.5 ×, API server CPU ≤ 1.3 × the floor.")
	p("")
	p("| scenario | run | rate asked / reached (/s) | seconds | claims Ready | warm | fewest ready members | dry (s) | refill kept up | p50 (ms) | p99 (ms) | API server CPU (s) |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
	for _, r := range results {
		rows := []struct {
			name string
			r    *Result
		}{{"floor", r.Floor}, {"contract floor", r.ContractFloor}, {"sandgate", r}}
		for _, row := range rows {
			x := row.r
			if x == nil && row.name == "contract floor" {
				continue // measured only at a rate the machine carries
			}
			if x == nil || x.Sustained == nil {
				p("| %s | %s | not measured | | | | | | | | | |", r.Scenario, row.name)
				continue
			}
			s := x.Sustained
			p("| %s | %s | %g / %.1f | %s | %d | %.1f%% | %d | %d | %s | %.1f | %.1f | %s |", r.Scenario, row.name,
				s.Rate, s.AchievedRate, arrivalSeconds(s), x.Claims.Ready, 100*s.WarmShare, s.MinReady, s.DrySeconds,
				yesNo(s.RefillKeptUp), x.Latency.Client.P50, x.Latency.Client.P99, cpu(x.API.ClaimsCPUSeconds))
		}
		if q := r.Ratios(); q.P50 > 0 {
			p("| %s | sandgate ÷ floor | | | | | | | | %s | %s | %s |", r.Scenario,
				ratioMark(q.P50, tgt(r, func(t *Targets) float64 { return t.FloorP50Ratio })),
				ratioMark(q.P99, tgt(r, func(t *Targets) float64 { return t.FloorP99Ratio })),
				ratioMark(q.CPU, tgt(r, func(t *Targets) float64 { return t.FloorCPURatio })))
		}
		if q := r.ContractRatios(); q.P50 > 0 {
			p("| %s | sandgate ÷ contract floor | | | | | | | | %s | %s | %s |", r.Scenario,
				ratioMark(q.P50, tgt(r, func(t *Targets) float64 { return t.FloorP50Ratio })),
				ratioMark(q.P99, tgt(r, func(t *Targets) float64 { return t.FloorP99Ratio })),
				ratioMark(q.CPU, tgt(r, func(t *Targets) float64 { return t.FloorCPURatio })))
		}
	}
	p("")
	p("The contract floor (see [Against the floor](#against-the-floor)) refills as the floor does,")
	p("its members' creates through the kept webhook configurations too.")
	p("")
	for _, r := range results {
		f := r.Floor
		if f == nil || f.Sustained == nil || f.Sustained.StoppedBehindSeconds <= 0 {
			continue
		}
		p("**%s is beyond this machine.** Its floor fell behind: after %.0f s its claims not Ready", r.Scenario, f.Sustained.StoppedBehindSeconds)
		p("yet held every slot of the load generator (ten seconds' worth), %.1f claims/s reached of %g asked,", f.Sustained.AchievedRate, f.Sustained.Rate)
		p("with no operator at all. The arrivals ended there (`--sustained-stop-behind`), and sandgate's run")
		p("had the same %.0f s of arrivals, so that the two compare; minutes more would only measure a", f.Sustained.StoppedBehindSeconds)
		p("growing queue. The warm-share target holds only for a rate the floor carries: see the")
		p("scenarios at a lower rate, or `--sustained-rate`.")
		p("")
	}
	for _, r := range results {
		if len(r.Rounds) > 1 {
			p("**%s** was measured in %d rounds; the runs above and the windows below are its median", r.Scenario, len(r.Rounds))
			p("round's, the ratios the medians of the rounds' (every round: [Against the floor](#against-the-floor)).")
			p("")
		}
		p("**%s** over time (windows of %d s by create time; sandgate, then its floor):", r.Scenario, WindowSeconds)
		p("")
		p("| at (s) | claims | p50 (ms) | p99 (ms) | warm | floor p50 (ms) | floor p99 (ms) | floor warm |")
		p("|---:|---:|---:|---:|---:|---:|---:|---:|")
		var floorWindows []Window
		if r.Floor != nil && r.Floor.Sustained != nil {
			floorWindows = r.Floor.Sustained.Windows
		}
		for i, w := range r.Sustained.Windows {
			fp50, fp99, fwarm := "-", "-", "-"
			if i < len(floorWindows) && floorWindows[i].Claims > 0 {
				f := floorWindows[i]
				fp50, fp99, fwarm = fmt.Sprintf("%.1f", f.P50Ms), fmt.Sprintf("%.1f", f.P99Ms), fmt.Sprintf("%.0f%%", 100*f.WarmShare)
			}
			p("| %.0f | %d | %.1f | %.1f | %.0f%% | %s | %s | %s |", w.AtSeconds, w.Claims, w.P50Ms, w.P99Ms, 100*w.WarmShare, fp50, fp99, fwarm)
		}
		p("")
	}
}

// arrivalSeconds is how long the arrivals of s ran: the duration asked, or when they ended
// early because they fell behind.
func arrivalSeconds(s *Sustained) string {
	if s.StoppedBehindSeconds > 0 {
		return fmt.Sprintf("%.0f of %.0f (fell behind)", s.StoppedBehindSeconds, s.DurationSeconds)
	}
	return fmt.Sprintf("%.0f", s.DurationSeconds)
}

func writeScale(p func(string, ...any), results []*Result) {
	p("## Scale")
	p("")
	p("Sandboxes in many pools and namespaces on one local control plane, with the operator's default")
	p("settings. Memory per 1,000 Sandboxes is the operator's growth over what it takes with none.")
	p("Targets: serial p50 at scale ÷ at a pool of 50 ≤ %g; first claim served ≤ %g s after an operator", ScaleP50RatioTarget, ScaleRestartToClaimSeconds)
	p("restart (the median of the restarts, each listed after it).")
	p("")
	p("| scenario | Sandboxes | namespaces × pools | fill (s) | fill rate (/s) | RSS (MiB) | heap in use (MiB) | RSS per 1,000 (MiB) | heap per 1,000 (MiB) | idle CPU, operator / API server | restart: ready / first claim (s) | serial p50 / p99 (ms) | floor p50 (ms) | ÷ pool 50 |")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
	for _, r := range results {
		s := r.Scale
		p("| %s | %d | %d × %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f%% / %.1f%% | %.2f / %s | %.1f / %.1f | %.1f | %s |", r.Scenario,
			s.Sandboxes, s.Namespaces, s.Pools/max(s.Namespaces, 1), s.FillSeconds, s.FillRate, s.OperatorRSSMiB, s.HeapInuseMiB,
			s.MiBPer1000Sandboxes, s.HeapInuseMiBPer1000Sandboxes, s.IdleCPUCoresPercent, s.IdleAPIServerCPUCoresPercent,
			s.RestartToReadySeconds, mark(fmt.Sprintf("%.1f", s.RestartToFirstClaimSeconds), s.RestartToFirstClaimSeconds, ScaleRestartToClaimSeconds)+restartCells(s.Restarts),
			s.SerialP50Ms, s.SerialP99Ms, s.FloorSerialP50Ms, ratioMark(s.P50RatioToPool50, ScaleP50RatioTarget))
	}
	p("")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// restartCells lists each restart's time to its first claim after the median's, as
// " (14.4, 9.2, 9.8)"; "" for one restart.
func restartCells(rs []Restart) string {
	if t := restartTimes(rs, 1); t != nil {
		return " (" + strings.Join(t, ", ") + ")"
	}
	return ""
}
