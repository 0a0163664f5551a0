package report

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// WriteText prints r as the table a person reads after a run.
func WriteText(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The tabwriter buffers every line; a failing w shows up in Flush.
	pf := func(format string, args ...any) { _, _ = fmt.Fprintf(tw, format, args...) }
	p := r.Parameters
	title := "load run"
	if r.Scenario != "" {
		title = "scenario " + r.Scenario
	}
	what := fmt.Sprintf("%d burst(s) of %d claims at %g QPS", p.TotalBursts, p.BurstSize, p.QPS)
	if p.BurstSize == 1 {
		what = fmt.Sprintf("%d claims one at a time", p.TotalBursts)
	}
	switch {
	case p.LightFloor:
		title += " (light floor: minimal Sandboxes without pods, no operator, no webhooks; the load generator writes)"
	case p.FloorAdmission && p.FloorRoute:
		title += " (contract floor: no operator; admission webhooks answered at once; the load generator writes, the route write included)"
	case p.FloorAdmission:
		title += " (floor: no operator; admission webhooks answered at once by a stand-in; the load generator writes)"
	case p.Floor:
		title += " (floor: no operator, no webhooks; the load generator writes)"
	}
	cluster := p.Cluster
	if p.Profile != "" {
		cluster += ", pod profile " + p.ProfileDescription()
	}
	pf("\n== %s: %s into a pool of %d (%s)\n", title, what, p.WarmPoolSize, cluster)
	pf("pool fill\t%.1f s\n", r.PoolFillSeconds)
	pf("load average at start\t%.1f on %d CPUs\n", r.LoadAverage, runtime.NumCPU())
	if o := r.OtherWork; o != nil {
		pf("other work on the machine, first claim → last Ready\t%.2f s CPU in %.2f s (%s of %d CPUs)\n", o.CPUSeconds, o.WindowSeconds, share(o), o.CPUs)
	}
	pf("run (first create → last Ready)\t%.2f s\n", r.RunSeconds)
	switch {
	case p.Floor:
		pf("refill after the run\tnone: no operator\n")
	case r.RefillSeconds >= 0:
		pf("refill after the run\t%.2f s\n", r.RefillSeconds)
	default:
		pf("refill after the run\tnot complete\n")
	}
	c := r.Claims
	pf("claims\t%d created, %d Ready, %d never Ready, %d create errors\n", c.Created, c.Ready, c.NeverReady, c.CreateErrors)
	pf("launch\t%d warm, %d cold, %d unknown; %d on a stale template\n", c.WarmHits, c.ColdStarts, c.UnknownLaunch, c.Stale)
	pf("\n")
	pf("startup latency (ms)\tn\tp50\tp90\tp99\tmax\n")
	for _, row := range []struct {
		name string
		s    stats.Summary
	}{
		{"client: create call → watch Ready", r.Latency.Client},
		{"server: webhook-first-observed-at → watch Ready", r.Latency.Server},
		{"create call", r.Latency.CreateCall},
	} {
		if row.s.Count == 0 {
			pf("%s\t0\t-\t-\t-\t-\n", row.name)
			continue
		}
		pf("%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\n", row.name, row.s.Count, row.s.P50, row.s.P90, row.s.P99, row.s.Max)
	}
	pf("\n")
	a := r.API
	pf("API mutating requests (all clients, refill included)\t%.0f\t%.2f per claim\n", a.Mutating, a.MutatingPerClaim)
	pf("API read requests\t%.0f\n", a.Reads)
	pf("409 Conflict responses\t%.0f\t%s\n", a.Conflicts, keys(a.ConflictsByVerbResource))
	pf("kube-apiserver CPU during the run\t%.2f s\n", a.ServerCPUSeconds)
	pf("kube-apiserver CPU, first claim → last Ready\t%s s\n", cpu(a.ClaimsCPUSeconds))
	for _, row := range a.ByVerbResourceCode {
		pf("  %s\t%.0f\t%s per claim\n", row.Key, row.Count, perClaim(row.Count, c.Created))
	}
	for _, w := range r.Webhooks {
		pf("  webhook %s %s (%s)\t%.0f calls\tmean %.2f ms, p50 ≈ %.2f ms, p99 ≈ %.2f ms; %.0f rejected, %.0f skipped by matchConditions\n",
			w.Name, w.Operation, w.Type, w.Calls, w.MeanMs, w.P50Ms, w.P99Ms, w.Rejected, w.Excluded)
	}
	if ws := r.WebhookServer; ws != nil {
		if ws.CPUSeconds >= 0 {
			pf("webhook server: %s\t%.2f s CPU\n", ws.Process, ws.CPUSeconds)
		} else {
			pf("webhook server: %s\n", ws.Process)
		}
		for _, p := range ws.Paths {
			pf("  served %s\t%.0f calls\tmean %.2f ms, p50 ≈ %.2f ms, p99 ≈ %.2f ms\n", p.Path, p.Calls, p.MeanMs, p.P50Ms, p.P99Ms)
		}
	}
	if r.LoadGeneratorCPUSeconds > 0 {
		pf("load generator CPU, first claim → last Ready\t%.2f s\n", r.LoadGeneratorCPUSeconds)
	}
	if cp := r.ClientPath; cp != nil {
		route := ""
		if cp.Route.Count > 0 {
			route = fmt.Sprintf(", route %.2f", cp.Route.Mean)
		}
		pf("floor writes, mean (ms)\tcreate call %.2f, → bind %.2f, bind %.2f%s, → status %.2f, status %.2f, → watch Ready %.2f\n",
			r.Latency.CreateCall.Mean, cp.BeforeBind.Mean, cp.Bind.Mean, route, cp.BetweenPatches.Mean, cp.Status.Mean, cp.WatchDelivery.Mean)
	}
	if cp := r.ColdPath; cp != nil {
		pf("%s\n", cp)
	}
	pf("\n")
	o := r.Operator
	if o.Measured {
		pf("operator writes\t%.0f\t%.2f per claim\n", sum(o.Writes), o.WritesPerClaim)
		pf("operator writes on the claim path\t%.2f per claim\t(claims, claim status, Sandbox binding, before Ready)\n", o.ClaimPathWritesPerClaim)
		pf("claim writes after Ready\t%.2f per claim\t(the sandbox-name annotation, once claims pause)\n", o.ClaimBookkeepingWritesPerClaim)
		for _, row := range o.Writes {
			pf("  %s\t%.0f\n", row.Key, row.Count)
		}
		pf("operator's claim counters\t%.0f warm, %.0f cold; lost binds: %s\n", o.WarmHits, o.ColdStarts, keys(o.BindConflicts))
		pf("child creates not sent again\t%s\t(in flight: the cache did not show the earlier create yet)\n", keys(o.CreatesInFlight))
		if o.StartupMeanMs > 0 {
			pf("operator's startup histogram (ms)\tmean %.1f, p50 %s, p99 %s\n", o.StartupMeanMs, atMost(o.StartupP50AtMostMs), atMost(o.StartupP99AtMostMs))
		}
		for _, ph := range o.Phases {
			pf("  claim phase %s\t%.0f\tmean %.2f ms\n", ph.Name, ph.Count, ph.MeanMs)
		}
		pf("reconciles by controller\t%s\n", keys(o.ReconcilesByController))
		pf("Sandbox reconciles per claim\t%.2f\n", o.SandboxReconcilesPerClaim)
		if o.SandboxesBecameReady > 0 {
			pf("Sandbox reconciles create → Ready\t%.2f (mean of %.0f Sandboxes)\n", o.ReconcilesToReady, o.SandboxesBecameReady)
		}
	} else {
		pf("operator metrics\tnot measured\n")
	}
	if o.PeakRSSMiB > 0 {
		pf("operator CPU\t%.2f s during the run, %.2f s since start\n", o.CPUSeconds, o.CPUSecondsTotal)
		pf("operator peak memory (VmHWM)\t%.1f MiB\n", o.PeakRSSMiB)
	}
	for _, comp := range r.Components {
		pf("%s CPU during the run\t%.2f s\t(peak %.0f MiB)\n", comp.Name, comp.CPUSeconds, comp.PeakRSSMiB)
	}
	for _, e := range r.Errors {
		pf("problem\t%s\n", e)
	}
	if f := r.Floor; f != nil {
		q := r.Ratios()
		pf("\nagainst the floor of the same scenario\tfloor\tsandgate\tsandgate ÷ floor\n")
		pf("client p50 (ms)\t%.1f\t%.1f\t%.2f\n", f.Latency.Client.P50, r.Latency.Client.P50, q.P50)
		pf("client p99 (ms)\t%.1f\t%.1f\t%.2f\n", f.Latency.Client.P99, r.Latency.Client.P99, q.P99)
		pf("kube-apiserver CPU, first claim → last Ready (s)\t%s\t%s\t%.2f\n", cpu(f.API.ClaimsCPUSeconds), cpu(r.API.ClaimsCPUSeconds), q.CPU)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing the result: %w", err)
	}
	return nil
}

// atMost renders a bucket bound of a histogram quantile.
func atMost(bound float64) string {
	switch {
	case bound < 0:
		return "> largest bucket"
	case bound == 0:
		return "-"
	default:
		return fmt.Sprintf("≤ %g", bound)
	}
}

func keys(rows []scrape.Count) string {
	if len(rows) == 0 {
		return "-"
	}
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = fmt.Sprintf("%s %.0f", r.Key, r.Count)
	}
	return strings.Join(parts, ", ")
}

func sum(rows []scrape.Count) float64 {
	var s float64
	for _, r := range rows {
		s += r.Count
	}
	return s
}

func perClaim(v float64, claims int) string {
	if claims == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/float64(claims))
}
