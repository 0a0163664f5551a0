//go:build integration

package load_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/env/harness"
	"github.com/sandgate-dev/sandgate/test/performance/load"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// floorProbes are the probes of a floor run on env.
func floorProbes(env *harness.Env) load.Probes {
	return load.Probes{
		ComponentUsage: env.ComponentUsage,
		Healthy:        env.Err,
		DetachOperator: env.DetachOperator,
		APIServerCPU:   env.APIServerCPU,
	}
}

// writesOf is the run's mutating requests by "VERB resource code".
func writesOf(res *report.Result) map[string]float64 {
	out := map[string]float64{}
	for _, row := range res.API.ByVerbResourceCode {
		out[row.Key] = row.Count
	}
	return out
}

// checkWrites reports every write of want whose count differs, with all writes.
func checkWrites(t *testing.T, res *report.Result, want map[string]float64) {
	t.Helper()
	got := writesOf(res)
	for key, n := range want {
		if got[key] != n {
			t.Errorf("%s: %v, want %v (all writes: %v)", key, got[key], n, res.API.ByVerbResourceCode)
		}
	}
}

// TestRunMeasuresTheLightFloor runs the light floor of a small load: the pool has no
// replicas, the operator is stopped at once, and the load generator makes minimal Ready
// Sandboxes without pods before the claims and binds one per claim with the floor's three
// writes. The members are made before the measurement: the API server sees only the claims'
// writes, and no pod exists.
func TestRunMeasuresTheLightFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := startHarness(ctx, t, harness.Options{})
	cfg := smallLoad("bench-light")
	cfg.LightFloor = true
	res, err := load.Run(ctx, env.Config, cfg, floorProbes(env))
	if err != nil {
		t.Fatalf("running the light floor: %v", err)
	}
	if !res.OK() || len(res.Errors) > 0 || res.Claims.CreateErrors != 0 {
		t.Errorf("light floor run not OK: claims %+v, errors %v", res.Claims, res.Errors)
	}
	if res.Claims.Ready != claims || res.Claims.WarmHits != claims {
		t.Errorf("claims Ready %d, bound to members %d; want %d each", res.Claims.Ready, res.Claims.WarmHits, claims)
	}
	checkWrites(t, res, map[string]float64{
		"POST sandboxclaims 201": claims, "PATCH sandboxes 200": claims, "PATCH sandboxclaims/status 200": claims,
		"POST sandboxes 201": 0, "PATCH sandboxes/status 200": 0, "POST pods 201": 0,
	})
	if p := res.ClientPath; p == nil || p.Bind.Count != claims || p.Status.Count != claims {
		t.Errorf("client path not timed for every claim: %+v", p)
	}
	c := newClient(t, env)
	var pods corev1.PodList
	var sandboxes agentsv1beta1.SandboxList
	if err := c.List(ctx, &pods, client.InNamespace(cfg.Namespace)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &sandboxes, client.InNamespace(cfg.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 || len(sandboxes.Items) != int(cfg.WarmPoolSize) {
		t.Errorf("%d pods and %d Sandboxes; want none and %d", len(pods.Items), len(sandboxes.Items), cfg.WarmPoolSize)
	}
}

// TestColdClaims serves a small load cold, from a pool of zero replicas: first by sandgate,
// then as the cold floor, where the load generator writes each claim's Sandbox and pod
// itself. Every claim is Ready and counted cold in both, the floor makes exactly the cold
// path's writes, and its Sandbox and pod have the shape of sandgate's: the same label and
// annotation keys, owners, spec and status conditions.
func TestColdClaims(t *testing.T) {
	var sandgate, floor *coldObjects
	for _, tc := range []struct {
		name  string
		floor bool
		got   **coldObjects
	}{
		{name: "served by sandgate", got: &sandgate},
		{name: "cold floor", floor: true, got: &floor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			env := startHarness(ctx, t, harness.Options{})
			cfg := smallLoad("bench-cold")
			cfg.WarmPoolSize, cfg.Floor = 0, tc.floor
			probes := floorProbes(env)
			if !tc.floor {
				probes = load.Probes{Healthy: env.Err, ComponentUsage: env.ComponentUsage, APIServerCPU: env.APIServerCPU}
			}
			res, err := load.Run(ctx, env.Config, cfg, probes)
			if err != nil {
				t.Fatalf("running the load: %v", err)
			}
			if !res.OK() || len(res.Errors) > 0 || res.Claims.CreateErrors != 0 {
				t.Errorf("run not OK: claims %+v, errors %v", res.Claims, res.Errors)
			}
			if res.Claims.Ready != claims || res.Claims.ColdStarts != claims {
				t.Errorf("claims Ready %d, cold %d; want %d each", res.Claims.Ready, res.Claims.ColdStarts, claims)
			}
			if tc.floor {
				checkWrites(t, res, map[string]float64{
					"POST sandboxclaims 201": claims, "POST sandboxes 201": claims, "POST pods 201": claims,
					"PATCH sandboxes/status 200": claims, "PATCH sandboxclaims/status 200": claims,
					"PATCH sandboxes 200": 0, "PATCH pods 200": 0,
				})
			}
			*tc.got = readColdObjects(ctx, t, newClient(t, env), cfg.Namespace)
		})
	}
	if sandgate == nil || floor == nil {
		t.Fatal("no Sandbox and pod of both runs to compare")
	}
	if diff := cmp.Diff(sandgate, floor, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the cold floor's objects differ from sandgate's (-sandgate +floor):\n%s", diff)
	}
}

// coldObjects is the shape of a cold claim's Sandbox and pod: what must not differ between
// sandgate's and the floor's.
type coldObjects struct {
	SandboxLabels, SandboxAnnotations, PodLabels, PodAnnotations []string
	SandboxOwner, PodOwner                                       string
	SandboxConditions                                            []string
	SandboxSpec                                                  agentsv1beta1.SandboxSpec
	PodContainers                                                []corev1.Container
	PodIPs, Selector, NodeName                                   bool
}

// readColdObjects reads the shape of the first claim's Sandbox and pod.
func readColdObjects(ctx context.Context, t *testing.T, c client.Client, ns string) *coldObjects {
	t.Helper()
	const name = "claim-000-0000"
	var sb agentsv1beta1.Sandbox
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sb); err != nil {
		t.Fatalf("reading the first claim's Sandbox: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.Annotations[agentsv1beta1.AnnotationPodName]}, &pod); err != nil {
		t.Fatalf("reading the first claim's pod: %v", err)
	}
	owner := func(o metav1.Object) string {
		if ref := metav1.GetControllerOf(o); ref != nil {
			return ref.APIVersion + " " + ref.Kind
		}
		return ""
	}
	// The template's UID is the run's own; only its presence is shape.
	if _, ok := sb.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelTemplateUID]; ok {
		sb.Spec.PodTemplate.ObjectMeta.Labels[agentsv1beta1.LabelTemplateUID] = "<the template's UID>"
	}
	var conds []string
	for _, cond := range sb.Status.Conditions {
		conds = append(conds, cond.Type+"="+string(cond.Status)+" "+cond.Reason)
	}
	return &coldObjects{
		SandboxLabels: slices.Sorted(maps.Keys(sb.Labels)), SandboxAnnotations: slices.Sorted(maps.Keys(sb.Annotations)),
		PodLabels: slices.Sorted(maps.Keys(pod.Labels)), PodAnnotations: slices.Sorted(maps.Keys(pod.Annotations)),
		SandboxOwner: owner(&sb), PodOwner: owner(&pod),
		SandboxConditions: conds,
		SandboxSpec:       sb.Spec,
		PodContainers:     pod.Spec.Containers,
		PodIPs:            len(sb.Status.PodIPs) > 0, Selector: sb.Status.Selector != "", NodeName: sb.Status.NodeName != "",
	}
}

func newClient(t *testing.T, env *harness.Env) client.Client {
	t.Helper()
	c, err := load.NewClient(env.Config, 10)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
