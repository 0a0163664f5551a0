package reconcilers

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	buildversion "github.com/sandgate-dev/sandgate/internal/version"
)

// The public controller's metrics beyond the two claim startup histograms
// (sandboxclaim_metrics.go), with its names, types, label names and buckets
// (sigs.k8s.io/agent-sandbox internal/metrics), so that its dashboards and alerts work
// unchanged. They are fed from the events the public controller feeds them from.
const (
	MetricClientClaimStartupLatency = "agent_sandbox_client_claim_startup_latency_ms"
	MetricSandboxCreationLatency    = "agent_sandbox_creation_latency_ms"
	MetricClaimCreationTotal        = "agent_sandbox_claim_creation_total"
	MetricSandboxes                 = "agent_sandboxes"
	MetricBuildInfo                 = "agent_sandbox_build_info"
)

// Values of the public metrics' labels.
const (
	LaunchTypeUnknown    = "unknown"
	PodConditionReady    = "ready"
	PodConditionNotReady = "not_ready"
	// unknownTemplate is the public controller's sandbox_template of a Sandbox without a
	// template-ref annotation, on the claim metrics.
	unknownTemplate = "__unknown__"
)

// sandboxCreationBuckets are the public controller's, in milliseconds: 50 ms to 10 minutes.
var sandboxCreationBuckets = []float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 240000, 300000, 600000}

// publicMetrics are the public controller's series sandgate feeds besides the two claim
// startup histograms.
type publicMetrics struct {
	clientStartup   *prometheus.HistogramVec
	sandboxCreation *prometheus.HistogramVec
	claimCreations  *prometheus.CounterVec
	buildInfo       prometheus.GaugeFunc
}

func newPublicMetrics() publicMetrics {
	bi := buildversion.Get()
	return publicMetrics{
		clientStartup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricClientClaimStartupLatency,
			Help: "End-to-end latency from client request to SandboxClaim Ready state in milliseconds. " +
				"Note: This metric may be affected by clock skew between the client and controller.",
			Buckets: claimLatencyBuckets,
		}, []string{"launch_type", "sandbox_template"}),
		sandboxCreation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricSandboxCreationLatency,
			Help:    "Latency from Sandbox creation to Pod Ready state in milliseconds. For warm launches, this measures controller synchronization overhead since the Pod is pre-provisioned.",
			Buckets: sandboxCreationBuckets,
		}, []string{"namespace", "launch_type", "sandbox_template"}),
		claimCreations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricClaimCreationTotal,
			Help: "Total number of SandboxClaims created, labeled by namespace, sandbox template, launch type, warmpool name, pod condition, and created_by.",
		}, []string{"namespace", "sandbox_template", "launch_type", "warmpool_name", "pod_condition", "created_by"}),
		buildInfo: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricBuildInfo,
			Help: "Agent sandbox controller build metadata exposed as labels with a constant value of 1.",
			ConstLabels: prometheus.Labels{
				"git_version": bi.GitVersion,
				"git_commit":  bi.GitCommit,
				"build_date":  bi.BuildDate,
				"go_version":  bi.GoVersion,
				"compiler":    bi.Compiler,
				"platform":    bi.Platform,
			},
		}, func() float64 { return 1 }),
	}
}

func (p publicMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.clientStartup, p.sandboxCreation, p.claimCreations, p.buildInfo}
}

// normalizeCreatedBy is the created_by label value of a created-by label value.
func normalizeCreatedBy(v string) string {
	switch v {
	case agentsv1beta1.CreatedByGoClient, agentsv1beta1.CreatedByPythonClient, agentsv1beta1.CreatedByController:
		return v
	}
	return agentsv1beta1.CreatedByUnknown
}

// servedPodCondition is the pod_condition of a Sandbox a claim was served with.
func servedPodCondition(sb *agentsv1beta1.Sandbox) string {
	if sb != nil && meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.ConditionReady) {
		return PodConditionReady
	}
	return PodConditionNotReady
}

// claimCreated counts a claim served: bound to a warm member (podCondition of the member) or
// given a cold-started Sandbox (not_ready), as the public controller counts them.
func (m *Metrics) claimCreated(claim *extv1beta1.SandboxClaim, template, launchType, podCondition string) {
	m.public.claimCreations.WithLabelValues(claim.Namespace, template, launchType, claim.Spec.WarmPoolRef.Name,
		podCondition, normalizeCreatedBy(claim.Labels[agentsv1beta1.LabelCreatedBy])).Inc()
}

// claimReadyPublic observes, when a claim first becomes Ready, the public latencies that
// hang on its Sandbox and its client: from the client's request (the
// client-first-requested-at annotation the SDKs set; skipped when absent, unparsable, more
// than MaxClaimTimestampSkew from the claim's creation (claimTimestamp) or after now), and
// the Sandbox's creation to its Ready transition. launchType and template label them; sb is
// the claim's Sandbox, nil when the cache does not show it.
func (m *Metrics) claimReadyPublic(claim *extv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, launchType, template string, now time.Time) {
	if sb != nil {
		if launchType == LaunchTypeUnknown {
			launchType = agentsv1beta1.LaunchTypeCold
			if sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm {
				launchType = agentsv1beta1.LaunchTypeWarm
			}
		}
		if template == "" {
			template = sb.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef]
		}
	}
	if template == "" {
		template = unknownTemplate
	}
	if at, ok := claimTimestamp(claim, agentsv1beta1.AnnotationClientFirstRequestedAt); ok {
		if d := now.Sub(at); d >= 0 {
			m.public.clientStartup.WithLabelValues(launchType, template).Observe(float64(d.Milliseconds()))
		}
	}
	if sb == nil || sb.CreationTimestamp.IsZero() {
		return
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.LastTransitionTime.IsZero() {
		return
	}
	if d := ready.LastTransitionTime.Sub(sb.CreationTimestamp.Time); d >= 0 {
		m.public.sandboxCreation.WithLabelValues(sb.Namespace, launchType, template).Observe(float64(d.Milliseconds()))
	}
}

// observePublicStartup feeds claimReadyPublic from the claim's Sandbox in the cache.
func (r *claimReconciler) observePublicStartup(ctx context.Context, claim *extv1beta1.SandboxClaim, launchType, template string, now time.Time) {
	var sb *agentsv1beta1.Sandbox
	if name := claim.Status.Sandbox.Name; name != "" {
		sb = &agentsv1beta1.Sandbox{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: name}, sb); err != nil {
			sb = nil
		}
	}
	r.Metrics.claimReadyPublic(claim, sb, launchType, template, now)
}

// sandboxCollector is the agent_sandboxes gauge: at each scrape, the Sandboxes the cache
// holds, counted by namespace, readiness, expiry, launch type, template, owner kind and
// creator, as the public controller's collector counts them.
type sandboxCollector struct {
	reader client.Reader
	log    logr.Logger
	desc   *prometheus.Desc
}

// NewSandboxCollector returns the agent_sandboxes collector, which lists Sandboxes from
// reader (the manager's cache) at each scrape.
func NewSandboxCollector(reader client.Reader, log logr.Logger) prometheus.Collector {
	return &sandboxCollector{
		reader: reader,
		log:    log,
		desc: prometheus.NewDesc(MetricSandboxes, "Monitor the point-in-time number of sandboxes in the cluster.",
			[]string{"namespace", "ready_condition", "expired", "launch_type", "sandbox_template", "owned_by", "created_by"}, nil),
	}
}

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// sandboxCollectTimeout bounds one scrape's list.
const sandboxCollectTimeout = 5 * time.Second

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), sandboxCollectTimeout)
	defer cancel()
	var list agentsv1beta1.SandboxList
	if err := c.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		c.log.Error(err, "listing sandboxes for the agent_sandboxes metric")
		return
	}
	type key struct{ ns, ready, expired, launch, template, owner, createdBy string }
	counts := map[key]int{}
	for i := range list.Items {
		sb := &list.Items[i]
		k := key{ns: sb.Namespace, ready: "false", expired: "false", launch: agentsv1beta1.LaunchTypeCold, template: "unknown", owner: "None", createdBy: agentsv1beta1.CreatedByUnknown}
		if cond := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.ConditionReady); cond != nil {
			if cond.Status == metav1.ConditionTrue {
				k.ready = "true"
			}
			if cond.Reason == agentsv1beta1.ReasonSandboxExpired {
				k.expired = "true"
			}
		}
		if sb.Labels[agentsv1beta1.LabelLaunchType] == agentsv1beta1.LaunchTypeWarm {
			k.launch = agentsv1beta1.LaunchTypeWarm
		}
		if t := sb.Annotations[agentsv1beta1.AnnotationSandboxTemplateRef]; t != "" {
			k.template = t
		}
		if ref := metav1.GetControllerOf(sb); ref != nil && (ref.Kind == claimKind || ref.Kind == warmPoolKind) {
			// Owner references keep the version current when they were written: match the group.
			if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == extv1beta1.GroupVersion.Group {
				k.owner = ref.Kind
			}
		}
		if v, ok := sb.Labels[agentsv1beta1.LabelCreatedBy]; ok {
			k.createdBy = normalizeCreatedBy(v)
		}
		counts[k]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n),
			k.ns, k.ready, k.expired, k.launch, k.template, k.owner, k.createdBy)
	}
}
