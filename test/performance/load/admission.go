package load

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// Metrics of the API server's admission webhooks.
const (
	webhookDuration   = "apiserver_admission_webhook_admission_duration_seconds"
	webhookExclusions = "apiserver_admission_match_condition_exclusions_total"
	// webhookServed is controller-runtime's histogram of the calls a webhook server served,
	// by path (label webhook): the operator's, and the floor's stand-in's.
	webhookServed = "controller_runtime_webhook_latency_seconds"
)

// webhookResources lists the resources each webhook's rules name, by webhook name, from the
// webhook configurations in the cluster.
func webhookResources(ctx context.Context, c client.Client) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(name string, rules []admissionv1.RuleWithOperations) {
		for _, rule := range rules {
			for _, res := range rule.Resources {
				if !slices.Contains(out[name], res) {
					out[name] = append(out[name], res)
				}
			}
		}
		slices.Sort(out[name])
	}
	var mutating admissionv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &mutating); err != nil {
		return nil, fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	for _, cfg := range mutating.Items {
		for _, w := range cfg.Webhooks {
			add(w.Name, w.Rules)
		}
	}
	var validating admissionv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &validating); err != nil {
		return nil, fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	for _, cfg := range validating.Items {
		for _, w := range cfg.Webhooks {
			add(w.Name, w.Rules)
		}
	}
	return out, nil
}

// webhookType names the type label of the API server's admission metrics: "admit" for a
// mutating webhook, "validating" (durations) or "validate" (matchConditions) for a
// validating one.
func webhookType(label string) string {
	switch {
	case label == "admit":
		return "mutating"
	case strings.HasPrefix(label, "validat"):
		return "validating"
	default:
		return label
	}
}

// webhookCosts summarises the admission webhooks' metrics delta of a run by webhook and
// operation, with the resources their rules name.
func webhookCosts(delta scrape.Snapshot, resources map[string][]string) []report.Webhook {
	type key struct{ name, operation string }
	rows := map[key]*report.Webhook{}
	row := func(labels map[string]string) *report.Webhook {
		k := key{labels["name"], labels["operation"]}
		if rows[k] == nil {
			rows[k] = &report.Webhook{Name: k.name, Operation: k.operation, Type: webhookType(labels["type"]), Resources: resources[k.name]}
		}
		return rows[k]
	}
	for _, s := range delta {
		if s.Value == 0 {
			continue
		}
		switch s.Name {
		case webhookDuration + "_count":
			w := row(s.Labels)
			w.Calls += s.Value
			if s.Labels["rejected"] == "true" {
				w.Rejected += s.Value
			}
		case webhookDuration + "_sum":
			row(s.Labels).SumSeconds += s.Value
		case webhookExclusions:
			if s.Labels["kind"] == "webhook" {
				row(s.Labels).Excluded += s.Value
			}
		}
	}
	out := make([]report.Webhook, 0, len(rows))
	for k, w := range rows {
		if w.Calls > 0 {
			w.MeanMs = round2(w.SumSeconds / w.Calls * 1000)
			calls := delta.Select(map[string]string{"name": k.name, "operation": k.operation})
			w.P50Ms, w.P99Ms = quantilesMs(calls, webhookDuration)
		}
		w.SumSeconds = round6(w.SumSeconds)
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b report.Webhook) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Operation, b.Operation)
	})
	return out
}

// quantilesMs are the p50 and p99 of histogram name in s (one label set, selected),
// interpolated in its buckets, in milliseconds; 0 for one s cannot estimate.
func quantilesMs(s scrape.Snapshot, name string) (p50, p99 float64) {
	if v, ok := s.Quantile(name, 0.5); ok {
		p50 = round2(v * 1000)
	}
	if v, ok := s.Quantile(name, 0.99); ok {
		p99 = round2(v * 1000)
	}
	return p50, p99
}

func round6(v float64) float64 { return float64(int64(v*1e6+0.5)) / 1e6 }

// webhookServer is the webhook server's own view of the run's calls: the operator's in
// sandgate's run, the stand-in's in a floor run; nil when neither was scraped.
func webhookServer(floor bool, before, after snapshot) *report.WebhookServer {
	ws := &report.WebhookServer{CPUSeconds: -1}
	var delta scrape.Snapshot
	switch {
	case !floor && before.operator != nil && after.operator != nil:
		ws.Process = "operator"
		delta = scrape.Delta(before.operator, after.operator)
		if before.usage != nil && after.usage != nil {
			ws.CPUSeconds = round2(after.usage.CPUSeconds - before.usage.CPUSeconds)
		}
	case floor && before.standIn != nil && after.standIn != nil:
		ws.Process = "load generator"
		delta = scrape.Delta(before.standIn, after.standIn)
		if before.standInUsage != nil && after.standInUsage != nil {
			ws.Process = "stand-in process"
			ws.CPUSeconds = round2(after.standInUsage.CPUSeconds - before.standInUsage.CPUSeconds)
		}
	default:
		return nil
	}
	counts := delta.GroupBy(webhookServed+"_count", nil, "webhook")
	for _, path := range slices.Sorted(maps.Keys(counts)) {
		n := counts[path]
		if n == 0 {
			continue
		}
		calls := delta.Select(map[string]string{"webhook": path})
		p := report.WebhookPath{Path: path, Calls: n, MeanMs: round2(calls.Sum(webhookServed+"_sum", nil) / n * 1000)}
		p.P50Ms, p.P99Ms = quantilesMs(calls, webhookServed)
		ws.Paths = append(ws.Paths, p)
	}
	return ws
}
