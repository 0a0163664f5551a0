package performance

import (
	"flag"
	"strings"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// AddFlags registers the flags of sandgate-bench on fs, bound to o's fields, with o's values
// (DefaultOptions) as their defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.BurstSize, "burst-size", o.BurstSize, "claims per burst")
	fs.Float64Var(&o.QPS, "qps", o.QPS, "rate at which a burst's claims are created, per second")
	fs.IntVar(&o.TotalBursts, "total-bursts", o.TotalBursts, "number of bursts; each waits for the previous one's claims to be Ready")
	fs.IntVar(&o.Serial, "serial", o.Serial, "create N claims one at a time, each after the previous is Ready (same as --burst-size 1 --total-bursts N)")
	fs.IntVar(&o.WarmPoolSize, "warmpool-size", o.WarmPoolSize, "replicas of the warm pool")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of the run (created; default bench-<time>)")
	fs.StringVar(&o.Template, "template", o.Template, "YAML or JSON file with the pod spec of the template (default: one container, image registry.example/agent:1)")
	fs.DurationVar(&o.PoolCreateWait, "pool-create-wait", o.PoolCreateWait, "how long to wait for the pool to be full and Ready before the run")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long a burst's claims may take to become Ready")
	fs.DurationVar(&o.BurstPause, "burst-pause", o.BurstPause, "wait this long after a burst's claims are all Ready before the next burst (the public rapid-burst recipe pauses 20s); scenarios set their own")
	fs.DurationVar(&o.RefillWait, "refill-wait", o.RefillWait, "how long to wait after the run for the pool to be full again (its requests are counted)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of an existing cluster (an admin: the API server's /metrics is read); default: start a local control plane")
	fs.StringVar(&o.OperatorCmd, "operator-cmd", o.OperatorCmd,
		"command line of the operator to run, with placeholders {{kubeconfig}} {{webhook-host}} {{webhook-port}} {{webhook-cert-dir}} {{metrics-port}} {{probe-port}}; "+
			"default: build ./cmd/sandgate and run it (local cluster), none with --kubeconfig; \"none\" runs no operator")
	fs.StringVar(&o.FeatureGates, "apiserver-feature-gates", o.FeatureGates, "kube-apiserver's --feature-gates in the local cluster, as CBORServingAndStorage=true (CBOR for custom resources: alpha and off by default in v1.37)")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "simulated nodes of the local cluster (default: enough for the pool and the claims)")
	controlplane.AddProfileFlags(fs, &o.Profile, &o.PodStartup)
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks, "install config/webhook in the local cluster; --webhooks=false for an operator that serves none")
	fs.BoolVar(&o.ServeV1alpha1, "serve-v1alpha1", o.ServeV1alpha1, "serve the deprecated v1alpha1 of the CRDs in the local cluster, as config/default does; --serve-v1alpha1=false serves v1beta1 only, as config/v1beta1-only does")
	fs.StringVar(&o.CPUProfile, "apiserver-profile", o.CPUProfile, "write a CPU profile of kube-apiserver over the start of the run to this file (go tool pprof reads it)")
	fs.StringVar(&o.WebhookProfile, "webhook-server-profile", o.WebhookProfile, "with --apiserver-profile: also write a CPU profile of the process answering the webhooks (the operator, started with --enable-pprof, or a floor's stand-in process) over the same seconds to this file")
	fs.IntVar(&o.ProfileSeconds, "apiserver-profile-seconds", o.ProfileSeconds, "length of the --apiserver-profile")
	fs.BoolVar(&o.Floor, "floor", o.Floor, "measure the API server's floor instead of the operator: the operator fills the pool and is stopped, its webhooks removed, and the load generator makes each claim's three writes itself (local cluster only)")
	fs.BoolVar(&o.FloorAdmission, "floor-admission", o.FloorAdmission, "with --floor: keep the operator's webhook configurations and answer every admission call at once from a stand-in process (the load generator re-executed; see --stand-in-in-process), allowing it (a claim's create gets webhook-first-observed-at): the floor of an API guarded by admission webhooks, their round trips included, no decision in them")
	fs.BoolVar(&o.FloorRoute, "floor-route", o.FloorRoute, "with --floor: after each bind, also make sandgate's route write (one merge patch of the member's pod: claim-uid label on, warm-pool label and safe-to-evict mark off) before the claim's Ready status; with --floor-admission, the contract floor: every write and admission round trip sandgate's API asks of a warm claim, no decision in them")
	fs.BoolVar(&o.StandInInProc, "stand-in-in-process", o.StandInInProc, "with --floor: answer the floor's webhooks (conversion, and with --floor-admission the admission calls) from the load generator's own process, as the floors did before, instead of a process of their own (for comparison: the load generator's goroutines then share its CPU)")
	fs.BoolVar(&o.LightFloor, "light-floor", o.LightFloor, "the floor on minimal members: like --floor, but the pool has no replicas and the load generator makes --warmpool-size minimal Ready Sandboxes without pods for the claims to bind, the lower bound of what the claims alone cost (local cluster only)")
	fs.StringVar(&o.JSONPath, "json", o.JSONPath, "also write the result as JSON to this file")
	fs.StringVar(&o.Scenarios, "scenarios", o.Scenarios, "run canonical scenarios instead (each on a fresh local cluster): all, or a comma-separated list of "+strings.Join(ScenarioNames(), ", "))
	fs.IntVar(&o.ScalePool, "scale-pool", o.ScalePool, "pool size of the large scale scenario")
	fs.StringVar(&o.Out, "out", o.Out, "with --scenarios: write the markdown report (docs/performance.md) from the results")
	fs.StringVar(&o.ResultsDir, "results-dir", o.ResultsDir, "with --scenarios: where the JSON results of each scenario are written and read")
	fs.BoolVar(&o.Render, "render", o.Render, "with --scenarios and --out: only rewrite the report from the JSON results already in --results-dir")
	fs.BoolVar(&o.Splice, "splice", o.Splice, "with --scenarios and --out: keep the report in --out and replace only its sections that stand apart from the run tables (the rapid bursts, the demand trace, fair share) with those of the results in --results-dir; a scenario measured alone then joins a report measured in full before")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "with --scenarios: alternating (floor, sandgate) rounds of each scenario measured in rounds, judged by the median of each ratio (default: 5 for the short scenarios, 3 for sustained-10, which splits --sustained-duration over them; the other long scenarios run once)")
	fs.BoolVar(&o.SkipFloor, "skip-floor", o.SkipFloor, "with --scenarios: do not measure each scenario's floor (faster; the report then has no ratios)")
}
