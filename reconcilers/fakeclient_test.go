package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sandgate-dev/sandgate/api"
	autoscalingv1alpha1 "github.com/sandgate-dev/sandgate/api/autoscaling/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	tenancyv1alpha1 "github.com/sandgate-dev/sandgate/api/tenancy/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// newClientBuilder returns a fake client builder shaped like the manager's client: the scheme
// of both groups, the status subresource of every kind that has one (so a status write
// changes only status and a spec write never status, as on an API server), and every cache
// index of package indexes, with its production extractor: a List by index in a Reconcile
// test runs the production index functions.
func newClientBuilder(t testing.TB) *fake.ClientBuilder {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithStatusSubresource(
		&agentsv1beta1.Sandbox{}, &extv1beta1.SandboxClaim{}, &extv1beta1.SandboxWarmPool{}, &extv1beta1.SandboxTemplate{},
		&corev1.Pod{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &tenancyv1alpha1.ClaimPolicy{},
		&autoscalingv1alpha1.WarmPoolAutoscaler{},
	)
	for _, ix := range indexes.All() {
		b = b.WithIndex(ix.Object, ix.Name, ix.Extract)
	}
	return b
}

// fakeAPI is the API server of a Reconcile test: a fake client built by newClientBuilder
// that, like an API server, gives created objects a UID, answers bind patches as the test
// scripts (bindAnswers) and other writes with the errors the test injects (FailOnce), and keeps
// a journal of every write and every event in the order they happened.
type fakeAPI struct {
	client.WithWatch

	mu      sync.Mutex
	journal []string
	uids    int
	// bindAnswers answer the bind patches in order: an error is returned without applying the
	// patch, nil applies it; past the end every bind patch is applied.
	bindAnswers []error
	// binds are the bind patches received, answered or not.
	binds []bindCall
	// failures are errors to answer writes with instead of applying them, by journal entry.
	failures map[string][]error
	// notes are the events' notes, formatted, in the order sent.
	notes []string
}

// bindCall is one bind patch: the Sandbox it was sent to and its resourceVersion precondition.
type bindCall struct {
	Sandbox         string
	ResourceVersion string
}

func newFakeAPI(t testing.TB, objs ...client.Object) *fakeAPI {
	t.Helper()
	a := &fakeAPI{failures: map[string][]error{}}
	a.WithWatch = newClientBuilder(t).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			a.mu.Lock()
			if obj.GetUID() == "" {
				a.uids++
				obj.SetUID(types.UID(fmt.Sprintf("uid-%d", a.uids)))
			}
			a.mu.Unlock()
			if obj.GetName() != "" {
				return a.write("create", obj, "", func() error { return c.Create(ctx, obj, opts...) })
			}
			// The name of a generated one is known once it is created.
			err := c.Create(ctx, obj, opts...)
			a.record(err, "create "+kindOf(obj)+"/"+obj.GetName())
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if rv, ok := bindPrecondition(obj, patch); ok {
				return a.write("bind", obj, "", func() error {
					if err := a.answerBind(obj.GetName(), rv); err != nil {
						return err
					}
					return c.Patch(ctx, obj, patch, opts...)
				})
			}
			return a.write("patch", obj, "", func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return a.write("update", obj, "", func() error { return c.Update(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return a.write("delete", obj, "", func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if sub == "scale" {
				// The fake client has no scale subresource for custom kinds: the API server
				// applies a scale's spec.replicas to the object's spec.replicas (the pool's
				// specReplicasPath), so a merge patch of it is that patch of the object.
				return a.write("patch", obj, sub, func() error { return c.Patch(ctx, obj, patch) })
			}
			return a.write("patch", obj, sub, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return a.write("update", obj, sub, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
	}).Build()
	return a
}

// write sends a write through do, unless an injected failure answers it, and journals it as
// "<verb> <kind>/<name>[/<subresource>]".
func (a *fakeAPI) write(verb string, obj client.Object, sub string, do func() error) error {
	entry := verb + " " + kindOf(obj) + "/" + obj.GetName()
	if sub != "" {
		entry += "/" + sub
	}
	a.mu.Lock()
	var err error
	if queue := a.failures[entry]; len(queue) > 0 {
		err, a.failures[entry] = queue[0], queue[1:]
	}
	a.mu.Unlock()
	if err == nil {
		err = do()
	}
	a.record(err, entry)
	return err
}

// FailOnce answers the next write journalled as entry ("patch Sandbox/sb/status") with err,
// without applying it.
func (a *fakeAPI) FailOnce(entry string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failures[entry] = append(a.failures[entry], err)
}

// bindPrecondition says whether a patch is a claim's bind patch (it sets the claim-uid
// label of a Sandbox) and returns its resourceVersion precondition.
func bindPrecondition(obj client.Object, patch client.Patch) (string, bool) {
	if _, ok := obj.(*agentsv1beta1.Sandbox); !ok {
		return "", false
	}
	data, err := patch.Data(obj)
	if err != nil {
		return "", false
	}
	var body struct {
		Metadata struct {
			ResourceVersion string             `json:"resourceVersion"`
			Labels          map[string]*string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "", false
	}
	if uid := body.Metadata.Labels[agentsv1beta1.LabelClaimUID]; uid == nil || *uid == "" {
		return "", false
	}
	return body.Metadata.ResourceVersion, true
}

func (a *fakeAPI) answerBind(sandbox, rv string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.binds = append(a.binds, bindCall{Sandbox: sandbox, ResourceVersion: rv})
	if n := len(a.binds); n <= len(a.bindAnswers) {
		return a.bindAnswers[n-1]
	}
	return nil
}

// record journals a write; a failed one is marked with its error's reason.
func (a *fakeAPI) record(err error, entry string) {
	if err != nil {
		entry += " (" + resultOf(err) + ")"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.journal = append(a.journal, entry)
}

// Journal returns the writes and events so far, in order, and starts a new journal: a test
// that prepares state with a first reconcile sees only what later ones do.
func (a *fakeAPI) Journal() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.journal
	a.journal = nil
	return j
}

// Binds returns the bind patches received so far.
func (a *fakeAPI) Binds() []bindCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]bindCall(nil), a.binds...)
}

// Recorder returns an event recorder that writes into the journal, without the event's note:
// "event <type> <reason> <kind>/<name>".
func (a *fakeAPI) Recorder() events.EventRecorder { return journalRecorder{a} }

type journalRecorder struct{ a *fakeAPI }

func (r journalRecorder) Eventf(regarding, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	name := "?"
	if obj, ok := regarding.(client.Object); ok {
		name = kindOf(obj) + "/" + obj.GetName()
	}
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	r.a.journal = append(r.a.journal, fmt.Sprintf("event %s %s %s", eventType, reason, name))
	r.a.notes = append(r.a.notes, fmt.Sprintf(note, args...))
}

// Notes returns the notes of the events sent so far and starts a new list.
func (a *fakeAPI) Notes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.notes
	a.notes = nil
	return n
}

// newTestMetrics returns metrics registered with a registry of their own.
func newTestMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newClaimReconciler builds the claim controller as Setup does, on a: the manager's client
// (writes counted in Metrics) for reads and writes, the API server for APIReader.
func newClaimReconciler(t testing.TB, a *fakeAPI, clk clock.PassiveClock) *claimReconciler {
	t.Helper()
	m := newTestMetrics(t)
	r := &claimReconciler{
		Client:    m.WrapClient(a),
		APIReader: a,
		Recorder:  a.Recorder(),
		Metrics:   m,
		Clock:     clk,
		Index:     newWarmIndex(),
		activity:  newPoolActivity(),
	}
	r.init()
	return r
}

// newSandboxReconciler builds the Sandbox controller as Setup and SetupWithManager do.
func newSandboxReconciler(t testing.TB, a *fakeAPI, clk clock.PassiveClock) *sandboxReconciler {
	t.Helper()
	m := newTestMetrics(t)
	return &sandboxReconciler{
		Client:           m.WrapClient(a),
		Recorder:         a.Recorder(),
		Metrics:          m,
		Clock:            clk,
		ClusterDomain:    "cluster.local",
		PodProgressDelay: DefaultPodProgressDelay,
		expected:         newExpectations(clk),
		pods:             newPodMemories(),
		podViews:         newPodMetadataViews(clk),
	}
}

// eventsOf and writesOf split a journal. The Sandbox tables check what is written and which
// events are sent; TestSandboxEventsFollowTheStatusWrite checks their order.
func eventsOf(journal []string) []string {
	var out []string
	for _, e := range journal {
		if strings.HasPrefix(e, "event ") {
			out = append(out, e)
		}
	}
	return out
}

func writesOf(journal []string) []string {
	var out []string
	for _, e := range journal {
		if !strings.HasPrefix(e, "event ") {
			out = append(out, e)
		}
	}
	return out
}
