//go:build integration

package claims_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
)

// histogram sums the observations of a histogram family over its series: count and sum.
func histogram(families []*dto.MetricFamily, name string) (count uint64, sum float64) {
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			count += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// The platform's startup histograms are fed from a claim's timestamp annotations, which the
// claim's creator writes: a tenant who sets client-first-requested-at (and the admission
// times) to year 1 must not add a 292-year observation to the platform-wide histograms, nor
// one of an hour. Admission stamps its own times whatever the tenant sent, and the client's
// time is read only within a minute of the claim's creation; an honest client's is observed.
func TestAttackClaimTimestampsStayOutOfPlatformMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := setupWithoutManager(t, 0)
	e.opts.Configure = func(o *operator.Options) { o.MetricsRegistry = reg }
	e.Manager = cluster.StartManager(t, e.opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(3).Obj())
	e.waitPoolReady("pool", 3)
	mallory := cluster.UserWithRole(t, e.Client, e.ns, "mallory", framework.TenantRole)
	gather := func(g Gomega) []*dto.MetricFamily {
		families, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		return families
	}

	for name, at := range map[string]string{
		"year-one": time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano),
		"hour-ago": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano),
	} {
		e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim(name, e.ns, "pool").
			Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, at).
			Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, at).
			Annotation(agentsv1beta1.AnnotationControllerFirstObservedAt, at).Obj())).To(Succeed())
		c, _ := e.waitClaimReady(name)
		for _, key := range []string{agentsv1beta1.AnnotationWebhookFirstObservedAt, agentsv1beta1.AnnotationControllerFirstObservedAt} {
			stamped, err := time.Parse(time.RFC3339Nano, c.Annotations[key])
			e.g.Expect(err).NotTo(HaveOccurred(), "%s %q", key, c.Annotations[key])
			e.g.Expect(stamped).To(BeTemporally("~", c.CreationTimestamp.Time, time.Minute), "%s of claim %s: want admission's time", key, name)
		}
	}
	// Both are observed from admission's times (the webhook's, the controller's first sight).
	e.eventually(func(g Gomega) {
		n, _ := histogram(gather(g), "agent_sandbox_claim_startup_latency_ms")
		g.Expect(n).To(Equal(uint64(2)))
	})

	requested := time.Now().UTC().Format(time.RFC3339Nano)
	e.g.Expect(mallory.Create(e.ctx(), builders.MakeClaim("honest", e.ns, "pool").
		Annotation(agentsv1beta1.AnnotationClientFirstRequestedAt, requested).Obj())).To(Succeed())
	e.waitClaimReady("honest")
	var families []*dto.MetricFamily
	e.eventually(func(g Gomega) {
		families = gather(g)
		n, _ := histogram(families, "agent_sandbox_client_claim_startup_latency_ms")
		g.Expect(n).NotTo(BeZero())
	})

	bound := float64(framework.Timeout.Milliseconds())
	n, sum := histogram(families, "agent_sandbox_client_claim_startup_latency_ms")
	e.g.Expect(n).To(Equal(uint64(1)), "client startup observations: want the honest claim's only")
	e.g.Expect(sum).To(BeNumerically("<", bound), "client startup latency sum (ms)")
	n, sum = histogram(families, "agent_sandbox_claim_startup_latency_ms")
	e.g.Expect(n).To(Equal(uint64(3)))
	e.g.Expect(sum).To(BeNumerically("<", 3*bound), "claim startup latency sum (ms)")

	// A claim's owner with update rights (the editor role) cannot rewrite admission's times
	// either: only the operator may.
	eve := cluster.Tenant(t, e.Client, e.ns, "eve")
	e.g.Expect(eve.Create(e.ctx(), builders.MakeClaim("eves", e.ns, "pool").Obj())).To(Succeed())
	for _, key := range []string{agentsv1beta1.AnnotationWebhookFirstObservedAt, agentsv1beta1.AnnotationControllerFirstObservedAt} {
		c := e.claim(e.g, "eves")
		err := eve.Patch(e.ctx(), c, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+key+`":"0001-01-01T00:00:00Z"}}}`)))
		e.g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "owner rewriting %s: want 422, got %v", key, err)
		e.g.Expect(err).To(MatchError(ContainSubstring("metadata.annotations[" + key + "]")))
	}
	for _, fam := range families {
		if fam.GetName() == "sandgate_claim_phase_seconds" {
			for _, m := range fam.GetMetric() {
				e.g.Expect(m.GetHistogram().GetSampleSum()).To(BeNumerically("<", 3*framework.Timeout.Seconds()), "%v", m.GetLabel())
			}
		}
	}
}
