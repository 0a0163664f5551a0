//go:build integration

package sdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/agent-sandbox/clients/go/sandbox"
	"sigs.k8s.io/agent-sandbox/sandbox-router/authz"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
)

var cluster *framework.Cluster

// runtimePort is the port the SDK and the router address on every sandbox pod (their default).
const runtimePort = 8888

// routerUser is the identity the router runs as: its ServiceAccount in its manifests.
const routerUser = "system:serviceaccount:default:sandbox-router"

// TestMain runs the suite in a network namespace of its own (see InOwnNetworkNamespace), on a
// local control plane whose pods get loopback IPs, with sandgate's webhooks installed.
func TestMain(m *testing.M) {
	if code, reexeced := InOwnNetworkNamespace(); reexeced {
		os.Exit(code)
	}
	os.Exit(framework.RunSuite(m, controlplane.Options{
		Profile: controlplane.ProfileFast, Webhooks: true, Nodes: 4, PodCIDR: controlplane.LoopbackPodCIDR,
	}, func(c *framework.Cluster) { cluster = c }))
}

// env is one test's namespace, sandgate, runtime stand-in, router and SDK client.
type env struct {
	t       *testing.T
	ns      string
	admin   client.Client
	tenant  client.WithWatch
	runtime *Runtime
	router  *Router
	secret  []byte // the router's scoped-token secret, when it runs in that mode
}

type routerMode int

const (
	allowAll routerMode = iota
	scopedToken
)

func (e *env) ctx() context.Context { return context.Background() }

// sub is e for a subtest: its failures end the subtest, not the parent.
func (e *env) sub(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// setup starts sandgate (production wiring, webhooks on) for a new namespace, the runtime
// stand-in, the router in mode and a tenant bound to the shipped sandbox-tenant-role, as
// whom the SDK clients act.
func setup(t *testing.T, mode routerMode) *env {
	t.Helper()
	return setupWith(t, mode, nil)
}

// setupWith is setup with the operator's options changed by configure (nil: none).
func setupWith(t *testing.T, mode routerMode, configure func(*operator.Options)) *env {
	t.Helper()
	ns := framework.NamespaceName(t)
	admin, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateNamespace(t, admin, ns)
	cluster.StartManager(t, framework.ManagerOptions{Namespaces: []string{ns}, Extensions: true, Webhooks: true, Configure: configure})
	e := &env{t: t, ns: ns, admin: admin}

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The stand-in reads each request's pod from the API server: a burst's hundred requests
	// at once must not queue behind client-go's default limit of 5 per second.
	runtimeCfg := rest.CopyConfig(cluster.Config)
	runtimeCfg.QPS, runtimeCfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(runtimeCfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.runtime, err = StartRuntime(ctx, cs, runtimePort); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "router.kubeconfig")
	e.grantRouterRBAC()
	if err := cluster.WriteUserKubeconfig(routerUser, kubeconfig, "system:serviceaccounts", "system:authenticated"); err != nil {
		t.Fatal(err)
	}
	ropts := RouterOptions{Binary: routerBinary(t), Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "router.log")}
	if mode == scopedToken {
		e.secret = []byte(hex.EncodeToString(randomBytes(t, 32)))
		ropts.ScopedTokenSecretFile = filepath.Join(dir, "scoped-token-secret")
		if err := os.WriteFile(ropts.ScopedTokenSecretFile, e.secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if e.router, err = StartRouter(ctx, ropts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.router.Stop()
		if t.Failed() {
			if log, err := os.ReadFile(ropts.LogPath); err == nil {
				t.Logf("router log (last 4 KiB):\n%s", tail(log, 4096))
			}
		}
	})

	cluster.UserWithRole(t, admin, ns, "tenant", framework.TenantRole)
	tenantCfg, err := cluster.UserConfig("tenant", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	if e.tenant, err = client.NewWithWatch(tenantCfg, client.Options{Scheme: api.NewScheme()}); err != nil {
		t.Fatal(err)
	}
	return e
}

// newSDK is the public SDK in Direct-URL mode, pointed at the router. In scoped-token mode
// a transport adds each request's token, minted as the router's documentation says, for the
// Sandbox the request names, and drops the pod-IP header the router refuses as untrusted in
// that mode: every request is routed by namespace and name only.
func (e *env) newSDK(cfg *rest.Config, mode routerMode) *sandbox.Client {
	opts := sandbox.Options{APIURL: e.router.URL, Namespace: e.ns, RestConfig: rest.CopyConfig(cfg), Quiet: true}
	if mode == scopedToken {
		opts.HTTPTransport = &scopedTokenTransport{secret: e.secret, base: http.DefaultTransport}
	}
	c, err := sandbox.NewClient(e.ctx(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// newSDKTraced is newSDK (default router mode) with the SDK's spans going to tp.
func (e *env) newSDKTraced(cfg *rest.Config, tp oteltrace.TracerProvider) *sandbox.Client {
	c, err := sandbox.NewClient(e.ctx(), sandbox.Options{APIURL: e.router.URL, Namespace: e.ns, RestConfig: rest.CopyConfig(cfg), Quiet: true, TracerProvider: tp})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

type scopedTokenTransport struct {
	secret []byte
	base   http.RoundTripper
}

func (s *scopedTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	ns := req.Header.Get("X-Sandbox-Namespace")
	if ns == "" {
		ns = "default"
	}
	token, err := authz.MintScopedToken(s.secret, ns, req.Header.Get("X-Sandbox-Id"), 10*time.Minute)
	if err != nil {
		return nil, err
	}
	req.Header.Del("X-Sandbox-Pod-Ip")
	req.Header.Set("Authorization", "Bearer "+token)
	return s.base.RoundTrip(req)
}

// grantRouterRBAC gives the router's identity the ClusterRole of the router's own manifests
// (sandbox-router/deploy/rbac.yaml of the pinned module), bound to that identity.
func (e *env) grantRouterRBAC() {
	e.t.Helper()
	dir := moduleDir(e.t, "sigs.k8s.io/agent-sandbox")
	raw, err := os.ReadFile(filepath.Join(dir, "sandbox-router", "deploy", "rbac.yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var role *rbacv1.ClusterRole
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			e.t.Fatal(err)
		}
		if obj["kind"] != "ClusterRole" {
			continue
		}
		doc, err := json.Marshal(obj)
		if err != nil {
			e.t.Fatal(err)
		}
		role = &rbacv1.ClusterRole{}
		if err := json.Unmarshal(doc, role); err != nil {
			e.t.Fatal(err)
		}
	}
	if role == nil {
		e.t.Fatalf("no ClusterRole in the router's rbac.yaml")
	}
	if err := e.admin.Create(e.ctx(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: routerUser}},
	}
	if err := e.admin.Create(e.ctx(), binding); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
}

// pool creates a template and a pool of n members and waits until all are Ready and served
// by the runtime stand-in.
func (e *env) pool(name string, n int32) {
	e.t.Helper()
	e.create(builders.MakeTemplate(name, e.ns).Obj())
	e.create(builders.MakePool(name, e.ns, name).Replicas(n).Obj())
	e.poll(2*framework.Timeout, func() (bool, error) {
		p := &extv1beta1.SandboxWarmPool{}
		if err := e.admin.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: name}, p); err != nil {
			return false, err
		}
		return p.Status.ReadyReplicas == n && p.Status.Replicas == n, nil
	})
}

func (e *env) create(obj client.Object) {
	e.t.Helper()
	if err := e.admin.Create(e.ctx(), obj); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) poll(timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.ctx(), framework.Interval, timeout, true, func(context.Context) (bool, error) { return cond() }); err != nil {
		e.t.Fatal(err)
	}
}

// claimOf reads the claim the SDK made for sb.
func (e *env) claimOf(sb *sandbox.Sandbox) *extv1beta1.SandboxClaim {
	e.t.Helper()
	c := &extv1beta1.SandboxClaim{}
	if err := e.admin.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: sb.ClaimName()}, c); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// run runs a command through the router and returns the stand-in's reply: which pod answered,
// carrying which claim.
func run(ctx context.Context, sb *sandbox.Sandbox) (Reply, error) {
	res, err := sb.Run(ctx, "hostname")
	if err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := json.Unmarshal([]byte(res.Stdout), &r); err != nil {
		return Reply{}, fmt.Errorf("reply %q: %w", res.Stdout, err)
	}
	return r, nil
}

func ready(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, agentsv1beta1.ConditionReady)
}

// routerBinary is the sandbox-router make tools built for the pinned module version.
func routerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SANDGATE_SANDBOX_ROUTER"); p != "" {
		return p
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", "agent-sandbox", moduleVersion(t, "sigs.k8s.io/agent-sandbox"), "sandbox-router")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the sandbox-router is not built (%v): run make tools", err)
	}
	return p
}

func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	return goListModule(t, path, "{{.Version}}")
}

func moduleDir(t *testing.T, path string) string {
	t.Helper()
	return goListModule(t, path, "{{.Dir}}")
}

// goListModule asks the go command about a module this suite's go.mod requires (a test
// binary's build information lists no dependencies).
func goListModule(t *testing.T, path, format string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", format, path)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
