package soak

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sandgate-dev/sandgate/certs"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/soak/check"
	"github.com/sandgate-dev/sandgate/test/soak/netfault"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// replicaNames are the operator replicas a soak runs.
var replicaNames = []string{"a", "b"}

// env is the soak's cluster: the local control plane with an audit log, two supervised
// operator replicas whose webhooks the API server reaches through one load balancer and whose
// API requests go through one proxy that can slow them down.
type env struct {
	cluster  *controlplane.Cluster
	lb       *netfault.LoadBalancer
	apiProxy *netfault.LatencyProxy
	ca       *certs.CA
	certDir  string
	serial   *big.Int
	replicas []*replica
	clients  kubernetes.Interface
	logf     func(string, ...any)
}

// startEnv brings the environment up; stop ends it (also on error).
func startEnv(ctx context.Context, o Options, logf func(string, ...any)) (_ *env, retErr error) {
	e := &env{logf: logf}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, e.stop())
		}
	}()
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	binary, err := harness.BuildOperator(ctx, root, logf)
	if err != nil {
		return nil, err
	}
	e.cluster, err = controlplane.Start(ctx, controlplane.Options{
		Nodes:       o.Nodes,
		Profile:     o.Profile,
		PodStartup:  o.PodStartup,
		AuditPolicy: check.AuditPolicy,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, "config", "webhook")},
			LocalServingHost: "127.0.0.1",
		},
		KeepLogs:        o.KeepLogs,
		NoSignalHandler: true,
		Log:             o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the local cluster: %w", err)
	}
	if e.clients, err = e.cluster.Clientset(); err != nil {
		return nil, err
	}
	dir := filepath.Join(e.cluster.Dir, "soak")
	e.certDir = filepath.Join(dir, "webhook-certs")
	if e.ca, err = newWebhookCA(); err != nil {
		return nil, err
	}
	if err := e.renewCertificate(); err != nil {
		return nil, err
	}
	if err := harness.InstallWebhookCA(ctx, e.cluster.Config, filepath.Join(e.certDir, certs.CAFile)); err != nil {
		return nil, err
	}
	apiURL, err := url.Parse(e.cluster.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's address: %w", err)
	}
	if e.apiProxy, err = netfault.NewLatencyProxy("127.0.0.1:0", apiURL.Host); err != nil {
		return nil, err
	}
	for _, name := range replicaNames {
		kubeconfig := filepath.Join(dir, "replica-"+name+".kubeconfig")
		if err := e.writeReplicaKubeconfig(name, kubeconfig); err != nil {
			return nil, err
		}
		// A reservation of a create that a fault cut short after its admission ends after
		// --claim-reservation-ttl: shorter than the default 2m, so that settling is.
		r, err := newReplica(name, binary, kubeconfig, e.certDir, e.cluster.LogPath("sandgate-"+name), append([]string{"--claim-reservation-ttl=30s"}, o.OperatorArgs...))
		if err != nil {
			return nil, err
		}
		e.replicas = append(e.replicas, r)
	}
	// The API server calls the webhook URL envtest wrote into the configurations: the load
	// balancer takes its port, in front of both replicas.
	wh := e.cluster.Env.WebhookInstallOptions
	backends := make([]netfault.Backend, 0, len(e.replicas))
	for _, r := range e.replicas {
		backends = append(backends, netfault.Backend{Name: r.name, Addr: r.webhookAddr(), HealthURL: r.readyzURL()})
	}
	if e.lb, err = netfault.NewLoadBalancer(netJoin(wh.LocalServingHost, wh.LocalServingPort), backends, netfault.LoadBalancerOptions{}); err != nil {
		return nil, err
	}
	for _, r := range e.replicas {
		r.launched = true
		go r.supervise(logf)
	}
	if err := e.waitForLeader(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	logf("two replicas running behind the webhook load balancer %s; API requests through %s", netJoin(wh.LocalServingHost, wh.LocalServingPort), e.apiProxy.Addr())
	return e, nil
}

func netJoin(host string, port int) string { return host + ":" + strconv.Itoa(port) }

// writeReplicaKubeconfig provisions the replica's identity, the operator's user name (the
// binding guard admits bindings from it only) with a group naming the replica, so that the
// audit log tells the replicas apart, and points it at the API proxy.
func (e *env) writeReplicaKubeconfig(name, path string) error {
	user, err := e.cluster.Env.AddUser(envtest.User{
		Name:   webhooks.DefaultOperatorUser,
		Groups: []string{"system:masters", check.ReplicaGroupPrefix + name},
	}, nil)
	if err != nil {
		return fmt.Errorf("provisioning replica %s's user: %w", name, err)
	}
	cfg := rest.CopyConfig(user.Config())
	cfg.Host = "https://" + e.apiProxy.Addr()
	return writeKubeconfig(cfg, path)
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["soak"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["soak"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["soak"] = &clientcmdapi.Context{Cluster: "soak", AuthInfo: "soak"}
	kc.CurrentContext = "soak"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// renewCertificate writes a new serving certificate of the same CA into the replicas'
// certificate directory, as cert-manager renews a Certificate into its Secret.
func (e *env) renewCertificate() error {
	bundle, serial, err := issueServing(e.ca)
	if err != nil {
		return err
	}
	if err := bundle.Write(e.certDir); err != nil {
		return err
	}
	e.serial = serial
	return nil
}

// leader returns the replica whose current process holds the Lease (its holder is that
// process's identity and was renewed within the Lease's duration), nil when none does. The
// replicas' own leader_election_master_status is no witness: a leader that was frozen and
// woke up still reports 1 until it has noticed the loss and exited.
func (e *env) leader(ctx context.Context) *replica {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lease, err := e.clients.CoordinationV1().Leases(leaseNamespace).Get(ctx, operator.LeaderElectionID, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" || lease.Spec.RenewTime == nil {
		return nil
	}
	duration := leaseDuration
	if lease.Spec.LeaseDurationSeconds != nil {
		duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	if time.Since(lease.Spec.RenewTime.Time) > duration {
		return nil
	}
	for _, r := range e.replicas {
		if r.identity() == *lease.Spec.HolderIdentity {
			return r
		}
	}
	return nil
}

// waitForLeader waits until a replica leads and every replica is ready.
func (e *env) waitForLeader(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ready := 0
		for _, r := range e.replicas {
			if r.ready(ctx) {
				ready++
			}
		}
		if ready == len(e.replicas) && e.leader(ctx) != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no leader with every replica ready within %s (%d of %d ready); replica logs: %s", limit, ready, len(e.replicas), e.cluster.LogPath("sandgate-a"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends everything it started, the replicas first.
func (e *env) stop() error {
	for _, r := range e.replicas {
		if r.launched {
			r.stop(20 * time.Second)
		}
	}
	if e.lb != nil {
		e.lb.Close()
	}
	if e.apiProxy != nil {
		e.apiProxy.Close()
	}
	if e.cluster != nil {
		return e.cluster.Stop()
	}
	return nil
}
