//go:build integration

package install_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api"
	"github.com/sandgate-dev/sandgate/test/env/controlplane"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/webhooks"
)

// cluster is an API server alone (no nodes, scheduler or garbage collector): the priority
// tests check that it accepts the rendered flow-control objects and classifies the
// operator's requests with them. The other tests of the package only render.
var cluster *framework.Cluster

func TestMain(m *testing.M) {
	opts := controlplane.Options{NoKwok: true, NoScheduler: true, NoControllerManager: true}
	os.Exit(framework.RunSuite(m, opts, func(c *framework.Cluster) { cluster = c }))
}

// Response headers in which the API server names the flow schema and priority level that
// classified a request.
const (
	headerFlowSchemaUID    = "X-Kubernetes-PF-FlowSchema-UID"
	headerPriorityLevelUID = "X-Kubernetes-PF-PriorityLevel-UID"
)

// precedences of the built-in flow schemas the operator's must come between: the control
// plane's own (kube-system's service accounts, the last of them) and `service-accounts`, which
// takes every service account to workload-low.
const (
	precedenceKubeSystemServiceAccounts = 900
	precedenceServiceAccounts           = 9000
	flowSchemaServiceAccounts           = "service-accounts"
)

// priority returns the rendered flow schema and priority level.
func (r *rendered) priority(t *testing.T) (*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration) {
	t.Helper()
	if len(r.flowSchemas) != 1 || len(r.levels) != 1 {
		t.Fatalf("want one FlowSchema and one PriorityLevelConfiguration, got %d and %d", len(r.flowSchemas), len(r.levels))
	}
	return &r.flowSchemas[0], &r.levels[0]
}

// The operator's requests have a priority level of their own, matched by its service account
// as the Deployment runs it, before the built-in schema for all service accounts.
func TestOperatorHasItsOwnPriorityLevel(t *testing.T) {
	r := render(t)
	d, _ := r.manager(t)
	fs, pl := r.priority(t)
	for _, name := range []string{fs.Name, pl.Name} {
		if !strings.HasPrefix(name, "sandgate-") {
			t.Errorf("%s is not named with the install's prefix sandgate-", name)
		}
	}
	if fs.Spec.PriorityLevelConfiguration.Name != pl.Name {
		t.Errorf("FlowSchema %s sends requests to level %q, want the rendered %q", fs.Name, fs.Spec.PriorityLevelConfiguration.Name, pl.Name)
	}
	if l := pl.Spec.Limited; pl.Spec.Type != flowcontrolv1.PriorityLevelEnablementLimited || l == nil ||
		l.NominalConcurrencyShares == nil || *l.NominalConcurrencyShares <= 0 {
		t.Errorf("PriorityLevelConfiguration %s: want a Limited level with assured concurrency shares, got %+v", pl.Name, pl.Spec)
	}
	if p := fs.Spec.MatchingPrecedence; p <= precedenceKubeSystemServiceAccounts || p >= precedenceServiceAccounts {
		t.Errorf("FlowSchema %s: matchingPrecedence %d, want between %d and %d: after the control plane's schemas, before service-accounts",
			fs.Name, p, precedenceKubeSystemServiceAccounts, precedenceServiceAccounts)
	}

	want := []flowcontrolv1.Subject{{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: d.Namespace, Name: d.Spec.Template.Spec.ServiceAccountName},
	}}
	if len(fs.Spec.Rules) == 0 {
		t.Fatalf("FlowSchema %s has no rules", fs.Name)
	}
	everyResource, everyURL := false, false
	for i, rule := range fs.Spec.Rules {
		if diff := cmp.Diff(want, rule.Subjects); diff != "" {
			t.Errorf("FlowSchema %s rule %d: subjects are not the manager's service account (-want +got):\n%s", fs.Name, i, diff)
		}
		for _, rr := range rule.ResourceRules {
			everyResource = everyResource || (all(rr.Verbs) && all(rr.APIGroups) && all(rr.Resources) && all(rr.Namespaces) && rr.ClusterScope)
		}
		for _, nr := range rule.NonResourceRules {
			everyURL = everyURL || (all(nr.Verbs) && all(nr.NonResourceURLs))
		}
	}
	if !everyResource || !everyURL {
		t.Errorf("FlowSchema %s does not match every request of the operator (every resource %v, every URL %v)", fs.Name, everyResource, everyURL)
	}
	// The identity the flow schema names is the one the binding guard admits.
	if got := serviceaccount.MakeUsername(d.Namespace, d.Spec.Template.Spec.ServiceAccountName); got != webhooks.DefaultOperatorUser {
		t.Errorf("the manager runs as %s, the binding guard admits %s", got, webhooks.DefaultOperatorUser)
	}
}

func all(values []string) bool { return len(values) == 1 && values[0] == "*" }

// The API server accepts the rendered objects as they are and classifies the operator's
// requests into its level, while another service account of the same namespace stays with
// the built-in service-accounts schema.
func TestAPIServerClassifiesTheOperatorsRequests(t *testing.T) {
	r := render(t)
	d, _ := r.manager(t)
	fs, pl := r.priority(t)
	ctx := context.Background()
	admin, err := client.New(cluster.Config, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// kustomize's built-in schema predates flowcontrol v1 and gives both objects the
	// install's namespace; the API server drops it for cluster-scoped kinds, as it does for
	// `kubectl apply -k config/default`.
	for _, obj := range []client.Object{pl, fs} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s from the rendered install: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() {
			if err := admin.Delete(context.Background(), obj); err != nil {
				t.Errorf("deleting %s: %v", obj.GetName(), err)
			}
		})
		if obj.GetNamespace() != "" {
			t.Errorf("%s stored in namespace %q, want cluster-scoped", obj.GetName(), obj.GetNamespace())
		}
	}

	groups := []string{serviceaccount.AllServiceAccountsGroup, serviceaccount.MakeNamespaceGroupName(d.Namespace)}
	operator, err := cluster.UserConfig(webhooks.DefaultOperatorUser, groups...)
	if err != nil {
		t.Fatal(err)
	}
	other, err := cluster.UserConfig(serviceaccount.MakeUsername(d.Namespace, "someone-else"), groups...)
	if err != nil {
		t.Fatal(err)
	}

	// The API server's flow control reads its configuration through an informer.
	var lastFS, lastPL string
	err = wait.PollUntilContextTimeout(ctx, framework.Interval, framework.Timeout, true, func(ctx context.Context) (bool, error) {
		lastFS, lastPL, err = classification(ctx, operator)
		return err == nil && lastFS == string(fs.UID) && lastPL == string(pl.UID), nil
	})
	if err != nil {
		t.Errorf("the operator's request went to flow schema %q, priority level %q; want %s (%s), %s (%s)",
			lastFS, lastPL, fs.Name, fs.UID, pl.Name, pl.UID)
	}

	builtin := &flowcontrolv1.FlowSchema{}
	if err := admin.Get(ctx, client.ObjectKey{Name: flowSchemaServiceAccounts}, builtin); err != nil {
		t.Fatalf("reading the built-in flow schema: %v", err)
	}
	if got, _, err := classification(ctx, other); err != nil || got != string(builtin.UID) {
		t.Errorf("another service account's request went to flow schema %q (%v), want the built-in %s (%s)", got, err, builtin.Name, builtin.UID)
	}

	stored := &flowcontrolv1.FlowSchema{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(fs), stored); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(fromFlowSchemaConditions(stored.Status.Conditions), string(flowcontrolv1.FlowSchemaConditionDangling)); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("FlowSchema %s: Dangling condition %+v, want False (its priority level exists)", fs.Name, c)
	}
}

// classification makes a request as cfg's user and returns the flow schema and priority
// level the API server says classified it.
func classification(ctx context.Context, cfg *rest.Config) (flowSchema, priorityLevel string, err error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", err
	}
	_ = resp.Body.Close() // only the headers matter
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("GET /version: %s", resp.Status)
	}
	return resp.Header.Get(headerFlowSchemaUID), resp.Header.Get(headerPriorityLevelUID), nil
}

// fromFlowSchemaConditions converts for meta.FindStatusCondition.
func fromFlowSchemaConditions(in []flowcontrolv1.FlowSchemaCondition) []metav1.Condition {
	out := make([]metav1.Condition, len(in))
	for i, c := range in {
		out[i] = metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message}
	}
	return out
}
