package webhooks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestShedDecision(t *testing.T) {
	waited := func(creator string) webhooks.WaitingClaim { return webhooks.WaitingClaim{Creator: creator} }
	took := func(ds ...time.Duration) []webhooks.Served {
		var out []webhooks.Served
		for _, d := range ds {
			out = append(out, webhooks.Served{Took: d})
		}
		return out
	}
	const maxWait = 5 * time.Second
	for _, tc := range []struct {
		name    string
		served  []webhooks.Served
		waiting []webhooks.WaitingClaim
		creator string
		want    webhooks.Shed
	}{
		{name: "nothing served, nothing waits", creator: "a", want: webhooks.Shed{}},
		{name: "a burst the cluster absorbs: some claims are still served fast", creator: "a",
			served: took(9*time.Second, time.Second), waiting: []webhooks.WaitingClaim{waited("a")},
			want: webhooks.Shed{Served: 2, Median: time.Second, Waiting: 1}},
		{name: "exactly the limit is not past it", creator: "a",
			served: took(maxWait), waiting: []webhooks.WaitingClaim{waited("a")},
			want: webhooks.Shed{Served: 1, Median: maxWait, Waiting: 1}},
		{name: "served late, nothing waits: the backlog is gone", creator: "a",
			served: took(9 * time.Second), want: webhooks.Shed{Served: 1, Median: 9 * time.Second}},
		{name: "nothing served lately: claims never Ready hold nothing shut", creator: "a",
			waiting: []webhooks.WaitingClaim{waited("a"), waited("a")}, want: webhooks.Shed{Waiting: 2}},
		{name: "every claim served late refuses the backlog's creator", creator: "a",
			served: took(6*time.Second, 8*time.Second), waiting: []webhooks.WaitingClaim{waited("a"), waited("a")},
			want: webhooks.Shed{Refuse: true, Served: 2, Median: 6 * time.Second, Waiting: 2, Mine: 2, Share: 2}},
		{name: "a creator with nothing waiting is admitted while another floods", creator: "b",
			served: took(9 * time.Second), waiting: []webhooks.WaitingClaim{waited("a"), waited("a"), waited("a")},
			want: webhooks.Shed{Served: 1, Median: 9 * time.Second, Waiting: 3, Share: 3}},
		{name: "a creator below its fair share is admitted", creator: "b",
			served: took(9 * time.Second), waiting: []webhooks.WaitingClaim{waited("a"), waited("a"), waited("a"), waited("b")},
			want: webhooks.Shed{Served: 1, Median: 9 * time.Second, Waiting: 4, Mine: 1, Share: 2}},
		{name: "a creator at its fair share is refused", creator: "b",
			served: took(9 * time.Second), waiting: []webhooks.WaitingClaim{waited("a"), waited("a"), waited("b"), waited("b")},
			want: webhooks.Shed{Refuse: true, Served: 1, Median: 9 * time.Second, Waiting: 4, Mine: 2, Share: 2}},
		{name: "a few claims served at once do not hide a standing queue", creator: "a",
			served: took(300*time.Millisecond, 8*time.Second, 9*time.Second), waiting: []webhooks.WaitingClaim{waited("a")},
			want: webhooks.Shed{Refuse: true, Served: 3, Median: 8 * time.Second, Waiting: 1, Mine: 1, Share: 1}},
		{name: "of an even count, the faster middle decides", creator: "a",
			served: took(time.Second, 2*time.Second, 8*time.Second, 9*time.Second), waiting: []webhooks.WaitingClaim{waited("a")},
			want: webhooks.Shed{Served: 4, Median: 2 * time.Second, Waiting: 1}},
		{name: "claims late only by their pods' start-up refuse nothing", creator: "a",
			served:  []webhooks.Served{{Took: 9 * time.Second, PodStartup: 8 * time.Second}, {Took: 7 * time.Second, PodStartup: 6500 * time.Millisecond}},
			waiting: []webhooks.WaitingClaim{waited("a"), waited("a")},
			want:    webhooks.Shed{Served: 2, Median: 500 * time.Millisecond, Waiting: 2}},
		{name: "a claim late in the control plane though its pod started at once refuses", creator: "a",
			served:  []webhooks.Served{{Took: 9 * time.Second, PodStartup: time.Second}},
			waiting: []webhooks.WaitingClaim{waited("a")},
			want:    webhooks.Shed{Refuse: true, Served: 1, Median: 8 * time.Second, Waiting: 1, Mine: 1, Share: 1}},
		{name: "the flooding creator is refused", creator: "a",
			served: took(9 * time.Second), waiting: []webhooks.WaitingClaim{waited("a"), waited("a"), waited("a"), waited("b")},
			want: webhooks.Shed{Refuse: true, Served: 1, Median: 9 * time.Second, Waiting: 4, Mine: 3, Share: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webhooks.ShedDecision(maxWait, tc.served, false, tc.waiting, tc.creator)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// The shed learns from the informer: a claim seen waiting and then Ready is served, with the
// time from its admission; a claim first seen Ready (the informer's first list, after a
// restart) is nobody's news; the claims served in the last ServedWindow count, or, when
// none was, the last one served, for ten times the limit (at least 30 s); a deleted claim no
// longer waits.
func TestClaimShedLearnsFromTheInformer(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	shed := &webhooks.ClaimShed{MaxWait: 5 * time.Second, Now: func() time.Time { return now }}
	claim := func(name string, admitted time.Time) *extv1beta1.SandboxClaim {
		return builders.MakeClaim(name, "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
			Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, admitted.Format(time.RFC3339Nano)).Obj()
	}
	ready := func(c *extv1beta1.SandboxClaim) *extv1beta1.SandboxClaim {
		c = c.DeepCopy()
		c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
		return c
	}
	fresh := builders.MakeClaim("new", "ns", "pool").Obj()

	old := claim("old", now.Add(-time.Hour))
	shed.Observe(ready(old)) // first seen Ready: an hour-old claim served nothing lately
	waiting := claim("waiting", now)
	shed.Observe(waiting)
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("a claim first seen Ready refused a new claim: %v", err)
	}
	late := claim("late", now)
	shed.Observe(late)
	now = now.Add(7 * time.Second)
	shed.Observe(ready(late))
	err := shed.Admit(someUser, fresh)
	var status apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !errors.As(err, &status) {
		t.Fatalf("a claim served 7s after admission, past a 5s limit, no pod start-up seen, with another waiting, did not refuse a new claim with 429: %v", err)
	}
	if d := status.Status().Details; d == nil || d.RetryAfterSeconds != 5 || d.Kind != "SandboxClaim" {
		t.Errorf("refusal details = %+v, want kind SandboxClaim and retryAfterSeconds 5", d)
	}
	now = now.Add(webhooks.ServedWindow + time.Millisecond)
	if err := shed.Admit(someUser, fresh); err == nil {
		t.Fatal("a gap in a backlog served late opened the gate: the last claim served speaks for the cluster for a while")
	}
	now = now.Add(50 * time.Second) // ten times the limit
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("a claim served late long ago still refused a new claim: %v", err)
	}
	shed.Observe(ready(waiting)) // served 9s after admission
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("with nothing waiting any more, a new claim was refused: %v", err)
	}
	another := claim("another", now)
	shed.Observe(another)
	if err := shed.Admit(someUser, fresh); err == nil {
		t.Fatal("a new claim was admitted while the last claim served took 9s and another waits")
	}
	shed.Forget("ns", "another")
	if err := shed.Admit(someUser, fresh); err != nil {
		t.Fatalf("a deleted claim still waits: %v", err)
	}
}

// The shed times a claim's stay in the control plane, not its pod's start-up on its node:
// claims served late only because their pods took seconds to start (a cold start on a
// cluster with slow pods, nothing backed up) refuse nothing, a claim bound to a member still
// starting has only the rest of that start-up taken off, and a pod waiting for the scheduler,
// not on a node yet, is the control plane's time. (The rule before timed admission to Ready
// and refused the first case.)
func TestClaimShedDoesNotCountThePodsStartUp(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	shed := &webhooks.ClaimShed{MaxWait: 5 * time.Second, Now: func() time.Time { return now }}
	claim := func(name string) *extv1beta1.SandboxClaim {
		return builders.MakeClaim(name, "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
			Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, now.Format(time.RFC3339Nano)).Obj()
	}
	ready := func(c *extv1beta1.SandboxClaim, sandbox string) *extv1beta1.SandboxClaim {
		c = c.DeepCopy()
		c.Status.Sandbox.Name = sandbox
		c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
		return c
	}
	// pod is the pod of Sandbox sandbox: on a node or not, Ready or not.
	pod := func(sandbox, node string, isReady bool) *corev1.Pod {
		p := builders.MakePod(sandbox, "ns").Obj()
		p.UID = types.UID("uid-" + sandbox)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: sandbox, UID: "sb", Controller: ptr.To(true)}}
		p.Spec.NodeName = node
		if isReady {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	fresh := builders.MakeClaim("new", "ns", "pool").Obj()
	refused := func() bool {
		err := shed.Admit(someUser, fresh)
		if err != nil && !apierrors.IsTooManyRequests(err) {
			t.Fatalf("Admit: %v, want nil or 429", err)
		}
		return err != nil
	}
	waiting := claim("waiting") // keeps a claim of someUser waiting throughout
	shed.Observe(waiting)

	// A cold start: its Sandbox's pod is created, placed on a node after 300 ms, and its
	// containers take 8 s to start; the claim is Ready 200 ms after its pod: 8.5 s in all.
	cold := claim("cold")
	shed.Observe(cold)
	shed.ObservePod(pod("cold", "", false))
	now = now.Add(300 * time.Millisecond)
	shed.ObservePod(pod("cold", "node-1", false))
	now = now.Add(8 * time.Second)
	shed.ObservePod(pod("cold", "node-1", true))
	now = now.Add(200 * time.Millisecond)
	shed.Observe(ready(cold, "cold"))
	if refused() {
		t.Fatal("a claim 8.5 s from admission to Ready, 8 s of it its pod starting on its node, refused a new claim under a 5 s limit")
	}

	// A claim bound to a member whose pod started 4 s before the claim came and is Ready
	// 2 s after it: only those 2 s are the pod's; the claim is Ready 6 s after its pod.
	now = now.Add(time.Minute) // the cold claim's service is long past
	shed.ObservePod(pod("member", "node-2", false))
	now = now.Add(4 * time.Second)
	starting := claim("starting")
	shed.Observe(starting)
	now = now.Add(2 * time.Second)
	shed.ObservePod(pod("member", "node-2", true))
	now = now.Add(6 * time.Second)
	shed.Observe(ready(starting, "member"))
	if !refused() {
		t.Fatal("a claim 8 s from admission to Ready, 2 s of it its member's pod starting, did not refuse a new claim under a 5 s limit")
	}

	// A pod that waits 7 s for the scheduler and starts at once: the wait is the control
	// plane's.
	now = now.Add(time.Minute)
	queued := claim("queued")
	shed.Observe(queued)
	shed.ObservePod(pod("queued", "", false))
	now = now.Add(7 * time.Second)
	shed.ObservePod(pod("queued", "node-3", true))
	shed.Observe(ready(queued, "queued"))
	if !refused() {
		t.Fatal("a claim whose pod waited 7 s to be placed did not refuse a new claim under a 5 s limit")
	}

	// The pod's start-up of another Sandbox is not this claim's.
	now = now.Add(time.Minute)
	other := claim("other")
	shed.Observe(other)
	shed.ObservePod(pod("elsewhere", "node-4", false))
	now = now.Add(7 * time.Second)
	shed.ObservePod(pod("elsewhere", "node-4", true))
	shed.Observe(ready(other, "warm"))
	if !refused() {
		t.Fatal("another Sandbox's pod start-up was taken off a claim's time")
	}
}

// In a lull, no claim served within the window, the claims waiting decide along with the
// last one served: a flood whose first claims were served fast (warm) and whose later ones
// are not served at all is a standing queue, where the rule before opened the gate on the
// fast claim served last. Not while claims are served, and not past the lull's horizon.
func TestShedDecisionInALull(t *testing.T) {
	const maxWait = 5 * time.Second
	aged := func(creator string, ds ...time.Duration) []webhooks.WaitingClaim {
		var out []webhooks.WaitingClaim
		for _, d := range ds {
			out = append(out, webhooks.WaitingClaim{Creator: creator, Own: d})
		}
		return out
	}
	fast := []webhooks.Served{{Took: 300 * time.Millisecond}}
	for _, tc := range []struct {
		name    string
		served  []webhooks.Served
		lull    bool
		waiting []webhooks.WaitingClaim
		creator string
		want    webhooks.Shed
	}{
		{name: "a stalled backlog behind a fast claim served last is refused", served: fast, lull: true, creator: "a",
			waiting: aged("a", time.Second, 6*time.Second, 7*time.Second),
			want:    webhooks.Shed{Refuse: true, Served: 1, Median: 300 * time.Millisecond, Waiting: 3, Mine: 3, Share: 3, Lull: true, WaitingMedian: 6 * time.Second, Stalled: true}},
		{name: "a lull with young claims waiting refuses nothing", served: fast, lull: true, creator: "a",
			waiting: aged("a", time.Second, 2*time.Second, 7*time.Second),
			want:    webhooks.Shed{Served: 1, Median: 300 * time.Millisecond, Waiting: 3, Lull: true, WaitingMedian: 2 * time.Second}},
		{name: "a stalled backlog refuses only creators at their fair share", served: fast, lull: true, creator: "b",
			waiting: append(aged("a", 6*time.Second, 7*time.Second, 8*time.Second), aged("b", 9*time.Second)...),
			want:    webhooks.Shed{Served: 1, Median: 300 * time.Millisecond, Waiting: 4, Mine: 1, Share: 2, Lull: true, WaitingMedian: 7 * time.Second, Stalled: true}},
		{name: "claims that will not be served without a change are no queue", served: fast, lull: true, creator: "a",
			waiting: append(aged("a", time.Second), webhooks.WaitingClaim{Creator: "a", Own: time.Minute, Stuck: true}, webhooks.WaitingClaim{Creator: "a", Own: time.Minute, Stuck: true}),
			want:    webhooks.Shed{Served: 1, Median: 300 * time.Millisecond, Waiting: 3, Lull: true, WaitingMedian: time.Second}},
		{name: "claims served in the window decide, however old the claims waiting", served: fast, creator: "a",
			waiting: aged("a", 6*time.Second, 7*time.Second),
			want:    webhooks.Shed{Served: 1, Median: 300 * time.Millisecond, Waiting: 2}},
		{name: "past the lull's horizon nothing refuses", creator: "a",
			waiting: aged("a", time.Minute, time.Minute),
			want:    webhooks.Shed{Waiting: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := webhooks.ShedDecision(maxWait, tc.served, tc.lull, tc.waiting, tc.creator)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// The claims waiting are timed as the claims served are: since admission, less their
// Sandbox's pod's start-up so far, the Sandbox found through its controller reference before
// the claim reports it. A flood that stalls after its first claims were served fast is
// refused; the same claims waiting for their pods to start on their nodes are not.
func TestClaimShedTimesTheClaimsWaitingInALull(t *testing.T) {
	for _, podsStarting := range []bool{false, true} {
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		shed := &webhooks.ClaimShed{MaxWait: 5 * time.Second, Now: func() time.Time { return now }}
		claim := func(name string) *extv1beta1.SandboxClaim {
			return builders.MakeClaim(name, "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
				Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, now.Format(time.RFC3339Nano)).Obj()
		}
		warm := claim("warm")
		shed.Observe(warm)
		now = now.Add(200 * time.Millisecond)
		served := warm.DeepCopy()
		served.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
		shed.Observe(served) // served fast: the claim served last
		for i := range 5 {
			name := fmt.Sprintf("cold-%d", i)
			shed.Observe(claim(name))
			sb := builders.MakeSandbox(name, "ns").Obj()
			sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxClaim", Name: name, UID: "c", Controller: ptr.To(true)}}
			shed.ObserveSandbox(sb)
			if podsStarting {
				pod := builders.MakePod(name, "ns").Obj()
				pod.UID = types.UID("uid-" + name)
				pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: name, UID: "sb", Controller: ptr.To(true)}}
				pod.Spec.NodeName = "node-1"
				shed.ObservePod(pod)
			}
		}
		now = now.Add(6 * time.Second) // nothing served since the warm claim
		err := shed.Admit(someUser, builders.MakeClaim("new", "ns", "pool").Obj())
		switch {
		case !podsStarting && !apierrors.IsTooManyRequests(err):
			t.Errorf("five claims waiting 6 s in the control plane, none served since a fast one, did not refuse a new claim with 429: %v", err)
		case podsStarting && err != nil:
			t.Errorf("five claims waiting 6 s for their pods to start on their nodes refused a new claim: %v", err)
		}
	}
}

// A claim served once and not Ready any more (expired with the claim retained, its pod lost)
// waits for nothing admission gave it: in the lull after it, it refuses nothing. (The rule
// before took it for a claim waiting since its admission, and refused the next claim.)
func TestClaimShedForgetsTheClaimsItServed(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	shed := &webhooks.ClaimShed{MaxWait: 5 * time.Second, Now: func() time.Time { return now }}
	c := builders.MakeClaim("retained", "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
		Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, now.Format(time.RFC3339Nano)).Obj()
	shed.Observe(c)
	now = now.Add(300 * time.Millisecond)
	c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
	shed.Observe(c)
	now = now.Add(4 * time.Second)
	c.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: extv1beta1.ReasonClaimExpired}}
	shed.Observe(c)
	now = now.Add(3 * time.Second)
	if err := shed.Admit(someUser, builders.MakeClaim("new", "ns", "pool").Obj()); err != nil {
		t.Fatalf("a claim served and since expired refused a new claim: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	for in, want := range map[time.Duration]int32{0: 1, 300 * time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 5 * time.Second: 5} {
		if got := webhooks.RetryAfter(in); got != want {
			t.Errorf("RetryAfter(%s) = %d, want %d", in, got, want)
		}
	}
}

// The stamping webhook sheds before anything else is decided for the claim (a refused claim
// reserves nothing in a ClaimPolicy's ledger), and never a dry run.
func TestClaimStampingShedsWhileTheOperatorIsBehind(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	reader := fakeClient(builders.MakeTemplate("tmpl", "ns").Obj(), builders.MakePool("pool", "ns", "tmpl").Obj())
	shed := &webhooks.ClaimShed{MaxWait: 2 * time.Second, Now: func() time.Time { return now }}
	w := &webhooks.ClaimWebhook{APIReader: reader, OperatorUser: operatorUser, Now: func() time.Time { return now }, Shed: shed}
	// One claim served 3 s after its admission, another still waiting: the cluster is behind.
	for _, name := range []string{"served", "waiting"} {
		shed.Observe(builders.MakeClaim(name, "ns", "pool").Annotation(agentsv1beta1.AnnotationCreator, someUser).
			Annotation(agentsv1beta1.AnnotationWebhookFirstObservedAt, now.Add(-3*time.Second).Format(time.RFC3339Nano)).Obj())
	}
	served := builders.MakeClaim("served", "ns", "pool").Obj()
	served.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "SandboxReady"}}
	shed.Observe(served)

	if got := code(w.Default(request(someUser, admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj())); got != 429 {
		t.Errorf("a new claim of the creator of the backlog: code %d, want 429", got)
	}
	if err := w.Default(request("other@example.com", admissionv1.Create), builders.MakeClaim("c", "ns", "pool").Obj()); err != nil {
		t.Errorf("a creator with nothing waiting was refused: %v", err)
	}
	dryRun := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: "ns", UserInfo: authenticationv1.UserInfo{Username: someUser}, DryRun: ptr.To(true)}})
	if err := w.Default(dryRun, builders.MakeClaim("c", "ns", "pool").Obj()); err != nil {
		t.Errorf("a dry run was refused: %v", err)
	}
}
