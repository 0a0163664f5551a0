//go:build integration

// Package fairshare_test runs ClaimPolicies (docs/fair-share.md) against a local control
// plane: refusals as a client receives them through the API server, exact usage under bursts
// against two webhook replicas, slots that come back, warm shares at bind time, and the
// attacks of tenants on all of it (*attack_test.go). Each test gets its own namespace and its
// own managers, watching only that namespace.
package fairshare_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/test/framework/invariants"
)

var cluster *framework.Cluster

// SANDGATE_TEST_LOG=<file> keeps the controllers' logs (see framework.RunSuite).
func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m, controlplane.Options{Profile: controlplane.ProfileFast, Webhooks: true},
		func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace, its admin client and its managers.
type env struct {
	t      *testing.T
	g      *WithT
	ns     string
	Client client.Client
}

// setup creates the test's namespace; the test starts its managers (one, or two replicas).
func setup(t *testing.T) *env {
	t.Helper()
	admin, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, g: NewWithT(t), ns: framework.NamespaceName(t), Client: admin}
	framework.CreateNamespace(t, admin, e.ns)
	t.Cleanup(func() { invariants.Check(e.g, admin, e.ns) })
	return e
}

// managerOptions are a manager of the test's namespace with the extensions on.
func (e *env) managerOptions(webhooks bool, configure func(*operator.Options)) framework.ManagerOptions {
	return framework.ManagerOptions{Namespaces: []string{e.ns}, Extensions: true, Webhooks: webhooks, Configure: configure}
}

// startManager starts one replica serving the cluster's webhooks.
func (e *env) startManager(configure func(*operator.Options)) *framework.Manager {
	return cluster.StartManager(e.t, e.managerOptions(true, configure))
}

// replicas is the webhook address of two replicas behind a proxy that sends each admission
// request to the next replica in turn.
type replicas struct {
	served [2]atomic.Int64
	// down are the replicas stopped (stop): the proxy sends them nothing, as a Service drops
	// the endpoint of a pod that is gone.
	down     [2]atomic.Bool
	managers [2]*framework.Manager
}

// stop stops replica i, mid-test, after the proxy stopped sending it requests.
func (r *replicas) stop(i int) {
	r.down[i].Store(true)
	r.managers[i].Stop()
}

// startReplicas starts two replicas that elect a leader (only the leader reconciles; both
// admit), each serving the webhooks on a port of its own, and a proxy on the address the
// cluster's webhook configurations call that hands each request to the next replica in turn:
// the API server's requests of one connection (HTTP/2) go to both. Replica 0 is started first
// and holds the leader's Lease before replica 1 starts: replica 0 is the leader.
func (e *env) startReplicas(configure func(*operator.Options)) *replicas {
	e.t.Helper()
	host, port, certDir := cluster.WebhookAddress()
	ports, err := controlplane.ReservePorts(2)
	e.g.Expect(err).NotTo(HaveOccurred())
	r := &replicas{}
	backends := make([]*url.URL, 2)
	for i := range ports {
		backends[i] = &url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))}
		r.managers[i] = cluster.StartManager(e.t, e.managerOptions(false, func(o *operator.Options) {
			o.WebhookHost, o.WebhookPort, o.WebhookCertDir, o.SelfSignedCerts = "127.0.0.1", ports[i], certDir, false
			o.LeaderElection, o.LeaderElectionNamespace = true, e.ns
			if configure != nil {
				configure(o)
			}
		}))
		if i == 0 {
			e.eventually(func(g Gomega) {
				lease := &coordinationv1.Lease{}
				g.Expect(e.Client.Get(e.ctx(), e.key(operator.LeaderElectionID), lease)).To(Succeed())
				g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			})
		}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	e.g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cluster.Env.WebhookInstallOptions.LocalServingCAData)
	var next atomic.Int64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			i := int(next.Add(1) % 2)
			if r.down[i].Load() {
				i = 1 - i
			}
			r.served[i].Add(1)
			pr.SetURL(backends[i])
		},
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
		// A request the API server gives up on is its business (the webhook timeout): no noise.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	e.g.Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (e *env) ctx() context.Context { return context.Background() }

func (e *env) create(obj client.Object) {
	e.t.Helper()
	e.g.Expect(e.Client.Create(e.ctx(), obj)).To(Succeed())
}

func (e *env) eventually(f func(g Gomega)) {
	e.t.Helper()
	e.g.Eventually(f).WithTimeout(framework.Timeout).WithPolling(framework.Interval).Should(Succeed())
}

func (e *env) key(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.ns, Name: name} }

// tenant returns a client acting as user name in groups (and system:authenticated), holding
// the shipped sandbox-tenant-role in the test's namespace. The cluster provisions a user once
// for every test of the suite: a name is given the same groups in every test.
func (e *env) tenant(name string, groups ...string) client.Client {
	e.t.Helper()
	return e.userWithRole(framework.TenantRole, name, groups...)
}

// userWithRole returns a client acting as user name in groups, holding the shipped ClusterRole
// of config/rbac/<roleFile> in the test's namespace.
func (e *env) userWithRole(roleFile, name string, groups ...string) client.Client {
	e.t.Helper()
	// UserWithRole provisions the user without groups of its own; a user is provisioned once,
	// so doing it first with the groups gives the tenant them.
	cfg, err := cluster.UserConfig(name, append([]string{"system:authenticated"}, groups...)...)
	e.g.Expect(err).NotTo(HaveOccurred())
	cluster.UserWithRole(e.t, e.Client, e.ns, name, roleFile)
	// Unthrottled (client-go's default is 5 requests a second): a burst is a burst.
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	e.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// policy creates p in the test's namespace (as the platform would) and waits until the
// operator counted it.
func (e *env) policy(p *tenancyv1alpha1.ClaimPolicy) {
	e.t.Helper()
	p.Namespace = e.ns
	e.create(p)
	e.waitCounted(p.Name)
}

func (e *env) waitCounted(name string) *tenancyv1alpha1.ClaimPolicy {
	e.t.Helper()
	p := &tenancyv1alpha1.ClaimPolicy{}
	e.eventually(func(g Gomega) {
		g.Expect(e.Client.Get(e.ctx(), e.key(name), p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, tenancyv1alpha1.ConditionCounted)).To(BeTrue(), "conditions %+v", p.Status.Conditions)
	})
	return p
}

// status reads the policy's status.
func (e *env) status(g Gomega, name string) tenancyv1alpha1.ClaimPolicyStatus {
	p := &tenancyv1alpha1.ClaimPolicy{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), p)).To(Succeed())
	return p.Status
}

func tenantStatus(st tenancyv1alpha1.ClaimPolicyStatus, name string) tenancyv1alpha1.TenantStatus {
	for _, ts := range st.Tenants {
		if ts.Name == name {
			return ts
		}
	}
	if st.Unnamed != nil && name == tenancyv1alpha1.UnnamedTenant {
		return *st.Unnamed
	}
	return tenancyv1alpha1.TenantStatus{}
}

// claims lists the claims of the namespace by creator.
func (e *env) claimsBy(g Gomega) map[string]int {
	var list extv1beta1.SandboxClaimList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns))).To(Succeed())
	out := map[string]int{}
	for _, c := range list.Items {
		out[c.Annotations[agentsv1beta1.AnnotationCreator]]++
	}
	return out
}

func (e *env) claim(g Gomega, name string) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{}
	g.Expect(e.Client.Get(e.ctx(), e.key(name), c)).To(Succeed())
	return c
}

// boundSandbox is the Sandbox bound to the claim (nil when none).
func (e *env) boundSandbox(g Gomega, c *extv1beta1.SandboxClaim) *agentsv1beta1.Sandbox {
	var list agentsv1beta1.SandboxList
	g.Expect(e.Client.List(e.ctx(), &list, client.InNamespace(e.ns), client.MatchingLabels{agentsv1beta1.LabelClaimUID: string(c.UID)})).To(Succeed())
	if len(list.Items) == 0 {
		return nil
	}
	return &list.Items[0]
}

func (e *env) waitPoolReady(pool string, n int32) {
	e.t.Helper()
	e.eventually(func(g Gomega) {
		p := &extv1beta1.SandboxWarmPool{}
		g.Expect(e.Client.Get(e.ctx(), e.key(pool), p)).To(Succeed())
		g.Expect(p.Status.ReadyReplicas).To(Equal(n))
	})
}

// events lists the reasons and notes of the events about a claim.
func (e *env) claimEvents(g Gomega, claim string) []string {
	reasons, err := framework.EventReasons(e.ctx(), e.Client, e.ns, "SandboxClaim", claim)
	g.Expect(err).NotTo(HaveOccurred())
	return reasons
}

// errStatus is the API status of err (a failed create as the client received it).
func errStatus(err error) metav1.Status {
	var s interface{ Status() metav1.Status }
	if errors.As(err, &s) {
		return s.Status()
	}
	return metav1.Status{Message: fmt.Sprint(err)}
}
