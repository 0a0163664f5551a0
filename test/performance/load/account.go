package load

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
	"github.com/sandgate-dev/sandgate/test/performance/stats"
)

// mutatingVerbs are the verbs of apiserver_request_total that write.
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// resource names a resource with its subresource, as "sandboxclaims/status".
func resource(res, sub string) string {
	if sub == "" {
		return res
	}
	return res + "/" + sub
}

// apiRequests summarises the apiserver_request_total delta of a run for the given number of
// claims.
func apiRequests(delta scrape.Snapshot, claims int) report.API {
	var out report.API
	byKey := map[string]float64{}
	conflicts := map[string]float64{}
	reads := map[string]float64{}
	for _, s := range delta {
		if s.Name != "apiserver_request_total" || s.Value == 0 {
			continue
		}
		verb, code := s.Labels["verb"], s.Labels["code"]
		res := resource(s.Labels["resource"], s.Labels["subresource"])
		if code == "409" {
			out.Conflicts += s.Value
			conflicts[verb+" "+res] += s.Value
		}
		if !mutatingVerbs[verb] {
			out.Reads += s.Value
			reads[verb+" "+res] += s.Value
			continue
		}
		out.Mutating += s.Value
		byKey[verb+" "+res+" "+code] += s.Value
	}
	if claims > 0 {
		out.MutatingPerClaim = round2(out.Mutating / float64(claims))
	}
	out.ByVerbResourceCode = scrape.Sorted(byKey)
	out.ConflictsByVerbResource = scrape.Sorted(conflicts)
	out.ReadsByVerbResource = scrape.Sorted(reads)
	out.ServerCPUSeconds = round2(delta.Sum("process_cpu_seconds_total", nil))
	return out
}

// operatorFigures summarises the operator's metrics delta of a run for the given claims.
func operatorFigures(delta scrape.Snapshot, claims int) report.Operator {
	out := report.Operator{Measured: true}
	out.ReconcilesByController = scrape.Sorted(delta.GroupBy("controller_runtime_reconcile_total", nil, "controller"))
	sandbox := delta.Sum("controller_runtime_reconcile_total", map[string]string{"controller": "sandbox"})
	if count := delta.Sum("sandgate_sandbox_reconciles_to_ready_count", nil); count > 0 {
		out.SandboxesBecameReady = count
		out.ReconcilesToReady = round2(delta.Sum("sandgate_sandbox_reconciles_to_ready_sum", nil) / count)
	}
	out.Writes = scrape.Sorted(delta.GroupBy("sandgate_api_writes_total", nil, "verb", "resource", "result"))
	out.WarmHits = delta.Sum("sandgate_claim_warm_hits_total", nil)
	out.ColdStarts = delta.Sum("sandgate_claim_cold_starts_total", nil)
	out.BindConflicts = scrape.Sorted(delta.GroupBy("sandgate_claim_bind_conflicts_total", nil, "reason"))
	out.CreatesInFlight = scrape.Sorted(delta.GroupBy("sandgate_sandbox_child_creates_in_flight_total", nil, "kind"))
	const startup = "agent_sandbox_claim_startup_latency_ms"
	if n := delta.Sum(startup+"_count", nil); n > 0 {
		out.StartupMeanMs = round2(delta.Sum(startup+"_sum", nil) / n)
		out.StartupP50AtMostMs = finite(delta.BucketUpperBound(startup, 0.5))
		out.StartupP99AtMostMs = finite(delta.BucketUpperBound(startup, 0.99))
	}
	phase := "sandgate_claim_phase_seconds"
	counts := delta.GroupBy(phase+"_count", nil, "phase")
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		n := counts[name]
		out.Phases = append(out.Phases, report.Phase{
			Name: name, Count: n, MeanMs: round2(delta.Sum(phase+"_sum", map[string]string{"phase": name}) / n * 1000),
		})
	}
	if claims > 0 {
		out.SandboxReconcilesPerClaim = round2(sandbox / float64(claims))
		out.WritesPerClaim = round2(delta.Sum("sandgate_api_writes_total", nil) / float64(claims))
		bookkeeping := delta.Sum("sandgate_claim_bookkeeping_writes_total", nil)
		claimPath := delta.Sum("sandgate_api_writes_total", map[string]string{"resource": "sandboxclaims"}) +
			delta.Sum("sandgate_api_writes_total", map[string]string{"resource": "sandboxclaims/status"}) +
			delta.Sum("sandgate_api_writes_total", map[string]string{"resource": "sandboxes", "verb": "patch"}) -
			bookkeeping
		out.ClaimPathWritesPerClaim = round2(claimPath / float64(claims))
		out.ClaimBookkeepingWritesPerClaim = round2(bookkeeping / float64(claims))
	}
	return out
}

// account fills in the figures measured between before and after.
func (r *runner) account(res *report.Result, before, after snapshot, webhooks map[string][]string) {
	claims := res.Claims.Created
	if before.api != nil && after.api != nil {
		delta := scrape.Delta(before.api, after.api)
		res.API = apiRequests(delta, claims)
		res.Webhooks = webhookCosts(delta, webhooks)
	}
	if before.operator != nil && after.operator != nil {
		res.Operator = operatorFigures(scrape.Delta(before.operator, after.operator), claims)
	}
	if before.usage != nil && after.usage != nil {
		res.Operator.CPUSeconds = round2(after.usage.CPUSeconds - before.usage.CPUSeconds)
		res.Operator.CPUSecondsTotal = round2(after.usage.CPUSeconds)
		res.Operator.PeakRSSMiB = round2(float64(after.usage.PeakRSSBytes) / (1 << 20))
	}
	res.WebhookServer = webhookServer(r.cfg.Floor, before, after)
	for name, a := range after.components {
		b := before.components[name]
		res.Components = append(res.Components, report.Component{
			Name:       name,
			CPUSeconds: round2(a.CPUSeconds - b.CPUSeconds),
			PeakRSSMiB: round2(float64(a.PeakRSSBytes) / (1 << 20)),
		})
	}
	sort.Slice(res.Components, func(i, j int) bool { return res.Components[i].CPUSeconds > res.Components[j].CPUSeconds })
}

// launchTypes computes latencies and looks up how each Ready claim's Sandbox was launched and
// whether it was built from the claim's stamped template.
func (r *runner) launchTypes(ctx context.Context, res *report.Result, claims []*sent, w *ClaimWatcher) error {
	var clientView, serverView, call []time.Duration
	for _, s := range claims {
		if s.createErr != nil {
			continue
		}
		call = append(call, s.callTook)
		obs, ok := w.Ready(s.name)
		if !ok {
			res.Claims.NeverReady++
			continue
		}
		res.Claims.Ready++
		clientView = append(clientView, obs.ReadyAt.Sub(s.createdAt))
		if !obs.webhookAt.IsZero() {
			serverView = append(serverView, obs.ReadyAt.Sub(obs.webhookAt))
		}
	}
	res.Latency = report.Latency{Client: stats.Summarize(clientView), Server: stats.Summarize(serverView), CreateCall: stats.Summarize(call)}
	if res.Claims.Ready == 0 {
		return errNoClaims
	}
	var list agentsv1beta1.SandboxList
	if err := r.c.List(ctx, &list, client.InNamespace(r.cfg.Namespace)); err != nil {
		return fmt.Errorf("listing sandboxes for launch types: %w", err)
	}
	sandboxes := make(map[string]*agentsv1beta1.Sandbox, len(list.Items))
	for i := range list.Items {
		sandboxes[list.Items[i].Name] = &list.Items[i]
	}
	var first time.Time
	for _, s := range claims {
		if s.createErr == nil && (first.IsZero() || s.createdAt.Before(first)) {
			first = s.createdAt
		}
	}
	for _, s := range claims {
		obs, ok := w.Ready(s.name)
		if !ok {
			continue
		}
		sample := report.Sample{
			AtSeconds: round3(s.createdAt.Sub(first).Seconds()),
			Ms:        round3(float64(obs.ReadyAt.Sub(s.createdAt)) / float64(time.Millisecond)),
		}
		if r.bursts != nil {
			sample.Burst = s.burst
		}
		sb := sandboxes[obs.Sandbox]
		if sb == nil {
			res.Claims.UnknownLaunch++
			res.Samples = append(res.Samples, sample)
			continue
		}
		sample.Warm = sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm
		res.Samples = append(res.Samples, sample)
		switch sb.Labels[agentsv1beta1.LabelLaunchType] {
		case agentsv1beta1.LaunchTypeWarm:
			res.Claims.WarmHits++
		case agentsv1beta1.LaunchTypeCold:
			res.Claims.ColdStarts++
		default:
			res.Claims.UnknownLaunch++
		}
		if hash, ok := sb.Labels[agentsv1beta1.LabelSandboxTemplateHash]; ok && obs.Stamp != "" && hash != obs.Stamp {
			res.Claims.Stale++
		}
	}
	return nil
}

// finite maps a quantile beyond the last finite bucket to -1, which JSON can carry.
func finite(v float64, _ bool) float64 {
	if math.IsInf(v, 1) {
		return -1
	}
	return v
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
