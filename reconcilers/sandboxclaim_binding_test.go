package reconcilers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/sandgate-dev/sandgate/api"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// The members of TestBindWarm are labelled with the version their blueprint is.
var (
	memberHash = policy.SandboxHash(poolMember("m", "", true, ""))
	keyMember  = memberKey{Namespace: "ns", Pool: "p", Hash: memberHash}
)

// TestTemplateOfVersion: a cold-started Sandbox is built from exactly the version its claim is
// stamped with; when that version is gone, the claim is restamped before the Sandbox exists.
func TestTemplateOfVersion(t *testing.T) {
	tmpl := func(image string) *extv1beta1.SandboxTemplate {
		return builders.MakeTemplate("tmpl", "ns").Image(image).Obj()
	}
	hashOf := func(t *extv1beta1.SandboxTemplate) string {
		return policy.TemplateHash(t)
	}
	v1, v2 := tmpl("img:1"), tmpl("img:2")
	gone := "0123456789abcdef0123456789abcdef"
	tests := map[string]struct {
		cached, server *extv1beta1.SandboxTemplate
		stamp          string
		refuseRestamp  bool
		wantImage      string // "" for not served
		wantRestamp    string // the new stamp, "" for no write
		wantReason     string // the claim's Ready reason, "" for none set
		wantEvents     []string
	}{
		"the cache has the claim's version":  {cached: v1, server: v2, stamp: hashOf(v1), wantImage: "img:1"},
		"the cache lags the claim's version": {cached: v1, server: v2, stamp: hashOf(v2), wantImage: "img:2"},
		"the claim's version is gone: restamped, visibly": {cached: v1, server: v2, stamp: gone, wantImage: "img:2", wantRestamp: hashOf(v2),
			wantReason: extv1beta1.ReasonRestamped, wantEvents: []string{"event Warning ClaimRestamped SandboxClaim/c"}},
		"the claim's version is gone, restamping off: not served": {cached: v1, server: v2, stamp: gone, refuseRestamp: true,
			wantReason: extv1beta1.ReasonStampedVersionGone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := builders.MakeClaim("c", "ns", "pool").Annotation(agentsv1beta1.AnnotationSandboxTemplateHash, tc.stamp).Obj()
			var restamp string
			cl := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tc.server.DeepCopy(), c).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					data, err := patch.Data(obj)
					if err != nil {
						return err
					}
					var body struct {
						Metadata struct {
							Annotations map[string]string `json:"annotations"`
						} `json:"metadata"`
					}
					if err := json.Unmarshal(data, &body); err != nil {
						return err
					}
					restamp = body.Metadata.Annotations[agentsv1beta1.AnnotationSandboxTemplateHash]
					return cl.Patch(ctx, obj, patch, opts...)
				},
			}).Build()
			journal := &fakeAPI{}
			r := &claimReconciler{Client: cl, APIReader: cl, RefuseRestamp: tc.refuseRestamp, Recorder: journalRecorder{journal}}
			r.init()

			s := &claimStep{claim: c}
			got, err := r.templateOfVersion(context.Background(), s, tc.cached, tc.stamp)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantImage == "" && got != nil:
				t.Errorf("served from %s, want the claim left unserved", got.Spec.PodTemplate.Spec.Containers[0].Image)
			case tc.wantImage != "" && got == nil:
				t.Errorf("not served, want it built from %s", tc.wantImage)
			case got != nil && got.Spec.PodTemplate.Spec.Containers[0].Image != tc.wantImage:
				t.Errorf("built from %s, want %s", got.Spec.PodTemplate.Spec.Containers[0].Image, tc.wantImage)
			}
			reason := ""
			if ready := meta.FindStatusCondition(c.Status.Conditions, agentsv1beta1.ConditionReady); ready != nil {
				reason = ready.Reason
			}
			if reason != tc.wantReason {
				t.Errorf("Ready reason %q, want %q", reason, tc.wantReason)
			}
			for _, e := range s.events {
				e()
			}
			if diff := cmp.Diff(tc.wantEvents, journal.Journal()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if restamp != tc.wantRestamp {
				t.Errorf("restamped to %q, want %q", restamp, tc.wantRestamp)
			}
		})
	}
}

func TestCreatedBy(t *testing.T) {
	tests := map[string]struct {
		claim         *extv1beta1.SandboxClaim
		wantCreatedBy string
	}{
		"plain": {claim: claim()},
		"known creator": {
			claim:         claim(func(w *builders.ClaimWrapper) { w.Label(agentsv1beta1.LabelCreatedBy, "python-client") }),
			wantCreatedBy: "python-client",
		},
		"unknown creator": {
			claim:         claim(func(w *builders.ClaimWrapper) { w.Label(agentsv1beta1.LabelCreatedBy, "curl") }),
			wantCreatedBy: agentsv1beta1.CreatedByUnknown,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := createdBy(tc.claim); got != tc.wantCreatedBy {
				t.Errorf("createdBy = %q, want %q", got, tc.wantCreatedBy)
			}
		})
	}
}

// TestBindWarm drives the binding protocol against an API server that answers each bind
// patch as the test says: losses (409, 403, 404) move on to the next member, other errors
// end the attempt and leave the member available.
func TestBindWarm(t *testing.T) {
	gr := schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}
	conflict := apierrors.NewConflict(gr, "m", errors.New("changed"))
	denied := apierrors.NewForbidden(gr, "m", errors.New("binding guard"))
	gone := apierrors.NewNotFound(gr, "m")
	unavailable := apierrors.NewServiceUnavailable("try later")
	tests := map[string]struct {
		// answers are the API server's answers to the bind patches, in order; nil binds.
		answers       []error
		wantBound     bool
		wantErr       bool
		wantPatches   int
		wantLost      float64
		wantAvailable int
	}{
		"the first member binds": {
			answers: []error{nil}, wantBound: true, wantPatches: 1, wantAvailable: 2,
		},
		"409 and 403 move on to the next member": {
			answers: []error{conflict, denied, nil}, wantBound: true, wantPatches: 3, wantLost: 2, wantAvailable: 0,
		},
		"every member lost: nothing bound, no error": {
			answers: []error{conflict, gone, denied}, wantPatches: 3, wantLost: 3, wantAvailable: 0,
		},
		"a server error ends the attempt and leaves the member available": {
			answers: []error{unavailable}, wantErr: true, wantPatches: 1, wantAvailable: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var patches []map[string]any
			var patched []string
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
					data, err := patch.Data(obj)
					if err != nil {
						return err
					}
					var body map[string]any
					if err := json.Unmarshal(data, &body); err != nil {
						return err
					}
					patches = append(patches, body)
					patched = append(patched, obj.GetName())
					answer := tc.answers[len(patches)-1]
					if answer == nil {
						obj.SetResourceVersion("bound")
					}
					return answer
				},
			}).Build()
			metrics, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			index := newWarmIndex()
			for _, name := range []string{"m1", "m2", "m3"} {
				index.Observe(poolMember(name, memberHash, true, "1"))
			}
			r := &claimReconciler{Client: metrics.WrapClient(c), APIReader: c, Metrics: metrics, Index: index}
			r.init()
			step := &claimStep{claim: claim(), mem: &claimMemory{}}

			pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()
			sb, err := r.bindWarm(context.Background(), step, pool, keyMember, "tmpl")

			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want error = %v", err, tc.wantErr)
			}
			if (sb != nil) != tc.wantBound {
				t.Errorf("bound = %v, want %v", sb, tc.wantBound)
			}
			if len(patches) != tc.wantPatches {
				t.Errorf("bind patches = %d, want %d", len(patches), tc.wantPatches)
			}
			seen := map[string]bool{}
			for i, p := range patches {
				md := p["metadata"].(map[string]any)
				if md["resourceVersion"] != "1" {
					t.Errorf("bind patch without the member's resourceVersion as precondition: %v", md)
				}
				if seen[patched[i]] {
					t.Errorf("member %s tried twice: %v", patched[i], patched)
				}
				seen[patched[i]] = true
			}
			if got := metrics.BindConflicts(); got != tc.wantLost {
				t.Errorf("lost binds = %v, want %v", got, tc.wantLost)
			}
			if available, _ := index.Counts(keyMember); available != tc.wantAvailable {
				t.Errorf("available after = %d, want %d", available, tc.wantAvailable)
			}
			wantHits := 0.0
			if tc.wantBound {
				wantHits = 1
				if diff := cmp.Diff(agentsv1beta1.LaunchTypeWarm, step.mem.launchType); diff != "" {
					t.Errorf("claim memory (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{bindItem(sb.Name)}, r.expected.pending(client.ObjectKeyFromObject(step.claim))); diff != "" {
					t.Errorf("expected binding until the cache shows it (-want +got):\n%s", diff)
				}
				if len(step.events) != 0 || step.mem.adopted != sb.Name {
					t.Errorf("events queued %d, adopted %q: want none now, SandboxAdopted of %s left for the bookkeeping once claims pause",
						len(step.events), step.mem.adopted, sb.Name)
				}
			}
			if got := metrics.WarmHits(); got != wantHits {
				t.Errorf("warm hits = %v, want %v", got, wantHits)
			}
		})
	}
}

// A member whose blueprint is not the version its labels say is never handed out: the claim
// path deletes it (the pool replaces it) and looks for the next one.
func TestBindWarmRetiresAMemberThatIsNotItsVersion(t *testing.T) {
	edited := poolMember("m1", memberHash, true, "1")
	edited.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "agent", Image: "attacker.example/evil:1"}}
	a := newFakeAPI(t, edited, claim())
	index := newWarmIndex()
	observeSandboxes(t, a, index) // as the informer shows them, resourceVersions included
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	r.Index = index
	step := &claimStep{claim: claim(), mem: &claimMemory{}}
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()

	sb, err := r.bindWarm(context.Background(), step, pool, keyMember, "tmpl")
	if err != nil || sb != nil {
		t.Fatalf("bound %v (error %v), want nothing bound", sb, err)
	}
	if diff := cmp.Diff([]string{"delete Sandbox/m1"}, writesOf(a.Journal())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if err := a.Get(context.Background(), client.ObjectKeyFromObject(edited), &agentsv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
		t.Errorf("the edited member: %v, want it deleted", err)
	}
	if available, _ := index.Counts(keyMember); available != 0 {
		t.Errorf("%d members available, want none", available)
	}
}

func TestBindPatch(t *testing.T) {
	member := poolMember("pool-abc", "h1", true, "42")
	tests := map[string]struct {
		claim *extv1beta1.SandboxClaim
		want  string
	}{
		"plain claim: owner, labels, precondition, nothing else": {
			claim: claim(),
			want: `{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/launch-type":"warm","agents.x-k8s.io/warm-pool-sandbox":null},` +
				`"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"c","uid":"claim-uid","controller":true,"blockOwnerDeletion":true}],` +
				`"resourceVersion":"42"}}`,
		},
		"creator and pod metadata ride along in the same patch": {
			claim: claim(func(w *builders.ClaimWrapper) {
				w.Label(agentsv1beta1.LabelCreatedBy, "my-script").PodLabel("team", "a")
			}),
			want: `{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/created-by":"unknown","agents.x-k8s.io/launch-type":"warm","agents.x-k8s.io/warm-pool-sandbox":null},` +
				`"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"c","uid":"claim-uid","controller":true,"blockOwnerDeletion":true}],` +
				`"resourceVersion":"42"},"spec":{"podTemplate":{"metadata":{"labels":{"team":"a"}}}}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(bindPatch(tc.claim, member))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("bind patch (-want +got):\n%s", diff)
			}
		})
	}
}

// A member the pool marked safe to evict loses the mark in the bind patch itself.
func TestBindPatchRemovesTheEvictionMark(t *testing.T) {
	member := poolMember("pool-abc", "h1", true, "42")
	member.Annotations = map[string]string{AnnotationSafeToEvict: "true"}
	got, err := json.Marshal(bindPatch(claim(), member))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":null}`; !strings.Contains(string(got), want) {
		t.Errorf("bind patch %s does not contain %s", got, want)
	}
}

// wantServedAs reconciles a claim on a pool of no members, built with pod metadata by
// withMetadata, by a claim controller configure sets up: its Ready reason is wantReason,
// saying wantMsg, and it is served (its cold Sandbox created) exactly when that reason is
// SandboxNotReady.
func wantServedAs(t *testing.T, withMetadata func(*builders.ClaimWrapper), configure func(*claimReconciler), wantReason, wantMsg string) {
	t.Helper()
	tmpl := testTemplate()
	pool := builders.MakePool("pool", "ns", tmpl.Name).Replicas(0).UID("pool-uid").Obj()
	claim := testClaim(tmpl, withMetadata)
	a := newFakeAPI(t, tmpl, pool, claim)
	clk := clocktesting.NewFakeClock(planNow)
	r := newClaimReconciler(t, a, clk)
	configure(r)

	reconcileClaim(t, r)
	clk.Step(interimReportDelay) // a served claim's cold Sandbox is reported then
	reconcileClaim(t, r)

	ready := meta.FindStatusCondition(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady)
	if ready == nil || ready.Reason != wantReason || !strings.Contains(ready.Message, wantMsg) {
		t.Fatalf("Ready = %+v, want reason %s saying %q", ready, wantReason, wantMsg)
	}
	if served := len(claimSandboxes(t, a, claim.UID)) == 1; served != (wantReason == extv1beta1.ReasonSandboxNotReady) {
		t.Errorf("claim served: %t, want %t", served, !served)
	}
}

// A claim admitted before the label allowlist (no webhook, or an older one) is not served
// with a label outside it: Ready=False InvalidMetadata naming the label, as the public
// controller reports it; under a list that allows the label it is served.
func TestClaimServeAppliesTheLabelAllowlist(t *testing.T) {
	tests := map[string]struct {
		domains    *policy.LabelDomains
		label      string
		wantReason string
		wantMsg    string
	}{
		"the public default domain": {label: "sandbox.users.io/team", wantReason: extv1beta1.ReasonSandboxNotReady},
		"outside the default list": {label: "example.com/team", wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg: `spec.additionalPodMetadata.labels[example.com/team]: Forbidden: label domain "example.com" is not in the allowlist; allowed domains (and their subdomains): sandbox.users.io`},
		"unprefixed": {label: "team", wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg: "spec.additionalPodMetadata.labels[team]: Forbidden"},
		"allowed by a configured list": {domains: policy.NewLabelDomains([]string{"example.com"}), label: "example.com/team",
			wantReason: extv1beta1.ReasonSandboxNotReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantServedAs(t, func(w *builders.ClaimWrapper) { w.PodLabel(tc.label, "a") },
				func(r *claimReconciler) { r.LabelDomains = tc.domains }, tc.wantReason, tc.wantMsg)
		})
	}
}

// A claim admitted before the annotation allowlist is not served with a pod annotation
// outside it (a service mesh's, a CNI's, a runtime's): Ready=False InvalidMetadata naming the
// annotation and the flag the platform sets; under a list that allows it, it is served.
func TestClaimServeAppliesTheAnnotationAllowlist(t *testing.T) {
	tests := map[string]struct {
		domains    []string
		annotation string
		wantReason string
		wantMsg    string
	}{
		"the default domain": {annotation: "sandbox.users.io/note", wantReason: extv1beta1.ReasonSandboxNotReady},
		"a service mesh's opt-out": {annotation: "sidecar.istio.io/inject", wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg: `spec.additionalPodMetadata.annotations[sidecar.istio.io/inject]: Forbidden: annotation domain "sidecar.istio.io" is not in the allowlist; allowed domains (and their subdomains): sandbox.users.io (the platform sets them with --claim-allowed-annotation-domains)`},
		"a runtime option without a domain": {annotation: "run.oci.keep_original_groups", wantReason: extv1beta1.ReasonInvalidMetadata,
			wantMsg: "spec.additionalPodMetadata.annotations[run.oci.keep_original_groups]: Forbidden: a claim's pod annotations need a domain prefix"},
		"allowed by a configured list": {domains: []string{"example.com"}, annotation: "team.example.com/owner",
			wantReason: extv1beta1.ReasonSandboxNotReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			wantServedAs(t, func(w *builders.ClaimWrapper) { w.PodAnnotation(tc.annotation, "false") },
				func(r *claimReconciler) { r.AnnotationDomains = tc.domains }, tc.wantReason, tc.wantMsg)
		})
	}
}

// A change of the label allowlist wakes exactly the unbound claims refused for their pod
// metadata: served claims are not judged again, other waiting claims do not care.
func TestClaimsRefusedForMetadataWakeOnAllowlistChange(t *testing.T) {
	tmpl := testTemplate()
	withReady := func(name, reason, sandbox string) *extv1beta1.SandboxClaim {
		c := testClaim(tmpl, func(w *builders.ClaimWrapper) {})
		c.Name, c.UID = name, types.UID(name+"-uid")
		c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
		c.Status.Sandbox.Name = sandbox
		return c
	}
	a := newFakeAPI(t, tmpl,
		withReady("refused", extv1beta1.ReasonInvalidMetadata, ""),
		withReady("waiting", extv1beta1.ReasonSandboxCreatePending, ""),
		withReady("served", extv1beta1.ReasonInvalidMetadata, "sb"))
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))

	got := r.claimsRefusedForMetadata(context.Background(), nil)
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "refused"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("woken claims (-want +got):\n%s", diff)
	}
}

// answerLost applies the first n bind patches and loses their answers, as a kube-apiserver
// killed between writing to etcd and answering does.
type answerLost struct {
	client.Client
	n int
	// creates is how many creates are applied with their answers lost.
	creates int
}

func (c *answerLost) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.creates == 0 {
		return c.Client.Create(ctx, obj, opts...)
	}
	c.creates--
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	return apierrors.NewServiceUnavailable("the API server went away before it answered")
}

func (c *answerLost) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := bindPrecondition(obj, patch); !ok || c.n == 0 {
		return c.Client.Patch(ctx, obj, patch, opts...)
	}
	c.n--
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	return &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/apis/agents.x-k8s.io/v1beta1/namespaces/ns/sandboxes/" + obj.GetName(), Err: io.ErrUnexpectedEOF}
}

// boundTo lists the Sandboxes the claim controls on the API server.
func boundTo(t *testing.T, a *fakeAPI, claimUID types.UID) []string {
	t.Helper()
	var list agentsv1beta1.SandboxList
	if err := a.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range list.Items {
		if policy.IsControlledBy(&list.Items[i], policy.ClaimKind, claimUID) {
			names = append(names, list.Items[i].Name)
		}
	}
	return names
}

// A bind patch that got no answer may have been applied (the soak saw it: the API server was
// killed between the write and its answer). The claim is then bound to that member, and to
// nothing else: the next attempt reads it first instead of binding another member.
func TestBindWhoseAnswerWasLostIsFoundNotRepeated(t *testing.T) {
	a := newFakeAPI(t, poolMember("m1", memberHash, true, "1"), poolMember("m2", memberHash, true, "1"), claim())
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	observeSandboxes(t, a, r.Index)
	r.Client = &answerLost{Client: r.Client, n: 1}
	step := &claimStep{claim: claim(), mem: &claimMemory{}}
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()

	sb, err := r.bindWarm(context.Background(), step, pool, keyMember, "tmpl")
	if err == nil || sb != nil {
		t.Fatalf("first attempt: bound %v, error %v; want the lost answer's error", sb, err)
	}
	first := boundTo(t, a, step.claim.UID)
	if len(first) != 1 {
		t.Fatalf("the lost bind was not applied: bound to %v", first)
	}
	sb, err = r.bindWarm(context.Background(), step, pool, keyMember, "tmpl")
	if err != nil || sb == nil || sb.Name != first[0] {
		t.Fatalf("second attempt: bound %v, error %v; want %s, whose bind had been applied", sb, err, first[0])
	}
	if got := boundTo(t, a, step.claim.UID); len(got) != 1 {
		t.Errorf("claim bound to %v, want only %s", got, first[0])
	}
	if binds := a.Binds(); len(binds) != 1 {
		t.Errorf("bind patches %v, want the one whose answer was lost", binds)
	}
}

// A replica that takes over with a cache that does not show its predecessor's last binding
// yet picks that member again; the conflict it gets is the claim's own binding.
func TestConflictWithTheClaimsOwnBindingIsABinding(t *testing.T) {
	a := newFakeAPI(t, poolMember("m1", memberHash, true, "1"), poolMember("m2", memberHash, true, "1"), claim())
	old := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	observeSandboxes(t, a, old.Index)
	next := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	observeSandboxes(t, a, next.Index) // the new leader's cache, before the old one's write
	old.Client = &answerLost{Client: old.Client, n: 1}
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()
	if _, err := old.bindWarm(context.Background(), &claimStep{claim: claim(), mem: &claimMemory{}}, pool, keyMember, "tmpl"); err == nil {
		t.Fatal("the old leader's bind got an answer")
	}
	first := boundTo(t, a, claim().UID)

	step := &claimStep{claim: claim(), mem: &claimMemory{}}
	sb, err := next.bindWarm(context.Background(), step, pool, keyMember, "tmpl")
	if err != nil || sb == nil || len(first) != 1 || sb.Name != first[0] {
		t.Fatalf("new leader bound %v (error %v), want %v", sb, err, first)
	}
	if got := boundTo(t, a, claim().UID); len(got) != 1 {
		t.Errorf("claim bound to %v, want only %v", got, first)
	}
}

// A cold start whose create got no answer may have created the claim's Sandbox (the long soak
// saw it during an API server restart): the next attempt, with a warm member ready by then,
// finds that Sandbox instead of binding the member too.
func TestColdStartWhoseAnswerWasLostIsFoundNotDoubled(t *testing.T) {
	a := newFakeAPI(t, claim())
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	lost := &answerLost{Client: r.Client, creates: 1}
	r.Client = lost
	step := &claimStep{claim: claim(), mem: &claimMemory{}}
	cold := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claim().Name,
		Labels:          map[string]string{agentsv1beta1.LabelClaimUID: string(claim().UID), agentsv1beta1.LabelLaunchType: agentsv1beta1.LaunchTypeCold},
		Annotations:     map[string]string{},
		OwnerReferences: []metav1.OwnerReference{claimRef(claim())}}}
	if _, err := r.createClaimSandbox(context.Background(), step, cold); err == nil {
		t.Fatal("the create's lost answer was not an error")
	}
	// A member is ready now.
	if err := a.Create(context.Background(), poolMember("m1", memberHash, true, "")); err != nil {
		t.Fatal(err)
	}
	observeSandboxes(t, a, r.Index)
	pool := builders.MakePool("p", "ns", "tmpl").UID("pool-uid").Obj()
	sb, err := r.bindWarm(context.Background(), step, pool, keyMember, "tmpl")
	if err != nil || sb == nil || sb.Name != claim().Name {
		t.Fatalf("bound %v (error %v), want the cold Sandbox %s", sb, err, claim().Name)
	}
	if got := boundTo(t, a, claim().UID); len(got) != 1 {
		t.Errorf("claim bound to %v, want only its cold Sandbox", got)
	}
	if step.mem.launchType != agentsv1beta1.LaunchTypeCold {
		t.Errorf("launch type %q, want cold", step.mem.launchType)
	}
}
