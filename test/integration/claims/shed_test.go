//go:build integration

package claims_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// Past what the cluster serves, new claims are refused at admission with 429 Too Many
// Requests and a retry hint, through the API server: retryAfterSeconds in the Status and the
// Retry-After header, which client-go honours by retrying by itself. The operator here is a
// replica that never leads (another holds the Lease): it admits claims, as every replica does,
// and reconciles none, so nothing is served and every claim admitted stays ahead of the next
// (the pool has no member to take). Up to MinBacklog claims are admitted; the next is refused.
// A creator with nothing waiting is still admitted, and once nothing waits, so is everyone
// again.
func TestClaimsPastWhatTheClusterServesAreRefusedWith429AndARetryHint(t *testing.T) {
	e := setupWithoutManager(t, 0)
	// Another replica holds the Lease for an hour: the manager below follows, its claim
	// controller never runs.
	e.create(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: operator.LeaderElectionID},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}})
	opts := e.opts
	opts.Configure = func(o *operator.Options) {
		o.LeaderElection, o.LeaderElectionNamespace = true, e.ns
		// Ten seconds: a cluster stalled for ten times that opens the gate, longer than the
		// test waits for anything below.
		o.ClaimAdmissionMaxWait = 10 * time.Second
	}
	e.Manager = cluster.StartManager(t, opts)
	e.create(builders.MakeTemplate("tmpl", e.ns).Obj())
	e.create(builders.MakePool("pool", e.ns, "tmpl").Replicas(0).Obj())

	jane, hints := e.userSeeingRetryAfter("jane@example.com")
	bob, _ := e.userSeeingRetryAfter("bob@example.com")
	for i := range webhooks.MinBacklog {
		e.g.Expect(jane.Create(e.ctx(), builders.MakeClaim(fmt.Sprintf("waiting-%d", i), e.ns, "pool").Obj())).To(Succeed(),
			"fewer than MinBacklog claims ahead")
	}
	refused := jane.Create(e.ctx(), builders.MakeClaim("one-more", e.ns, "pool").Obj())
	e.g.Expect(apierrors.IsTooManyRequests(refused)).To(BeTrue(), "the create past MinBacklog claims ahead, none served: %v", refused)
	status := refused.(apierrors.APIStatus).Status()
	e.g.Expect(status.Details).NotTo(BeNil())
	e.g.Expect(status.Details.RetryAfterSeconds).To(Equal(int32(10)))
	e.g.Expect(status.Details.Kind).To(Equal("SandboxClaim"))
	e.g.Expect(status.Message).To(ContainSubstring("the cluster is behind"))
	e.g.Expect(hints()).To(ContainElement("10"), "the Retry-After header client-go retries by")

	e.g.Expect(bob.Create(e.ctx(), builders.MakeClaim("bobs", e.ns, "pool").Obj())).To(Succeed(),
		"a creator with nothing waiting is admitted while another's claims wait")

	e.g.Expect(e.Client.DeleteAllOf(e.ctx(), &extv1beta1.SandboxClaim{}, client.InNamespace(e.ns))).To(Succeed())
	e.eventually(func(g Gomega) {
		g.Expect(jane.Create(e.ctx(), builders.MakeClaim("again", e.ns, "pool").Obj())).To(Succeed(), "nothing waits any more")
	})
}

// userSeeingRetryAfter is a client of user that sees a 429 at once: the Retry-After header is
// recorded (hints returns those seen) and removed, or client-go would retry inside Create.
func (e *env) userSeeingRetryAfter(user string) (c client.Client, hints func() []string) {
	e.t.Helper()
	cfg, err := cluster.UserConfig(user)
	e.g.Expect(err).NotTo(HaveOccurred())
	rec := &retryAfterRecorder{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	c, err = client.New(rest.CopyConfig(cfg), client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c, rec.seen
}

type retryAfterRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	hints []string
}

func (r *retryAfterRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		r.mu.Lock()
		r.hints = append(r.hints, resp.Header.Get("Retry-After"))
		r.mu.Unlock()
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

func (r *retryAfterRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hints...)
}
