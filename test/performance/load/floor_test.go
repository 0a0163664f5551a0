package load

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/reconcilers"
)

// readyMember is a pool member as the operator leaves it: controlled by its pool, labelled a
// member, Ready.
func readyMember(name string) *agentsv1beta1.Sandbox {
	sb := builders.MakeSandbox(name, "bench").Label(agentsv1beta1.LabelWarmPoolSandbox, "abc").Obj()
	sb.ResourceVersion = "41"
	sb.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "extensions.agents.x-k8s.io/v1beta1", Kind: "SandboxWarmPool", Name: "bench-pool", UID: "pool-uid", Controller: ptr.To(true),
	}}
	sb.Status.PodIPs = []string{"10.244.0.7"}
	sb.Status.Conditions = []metav1.Condition{{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "DependenciesReady", Message: "Pod is Ready"}}
	return sb
}

func TestIsReadyMember(t *testing.T) {
	cases := map[string]struct {
		edit func(*agentsv1beta1.Sandbox)
		want bool
	}{
		"a Ready member of the pool":  {edit: func(*agentsv1beta1.Sandbox) {}, want: true},
		"bound to a claim already":    {edit: func(sb *agentsv1beta1.Sandbox) { sb.Labels[agentsv1beta1.LabelClaimUID] = "c" }},
		"not Ready":                   {edit: func(sb *agentsv1beta1.Sandbox) { sb.Status.Conditions[0].Status = metav1.ConditionFalse }},
		"without the warm-pool label": {edit: func(sb *agentsv1beta1.Sandbox) { delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox) }},
		"controlled by a claim":       {edit: func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences[0].Kind = "SandboxClaim" }},
		"without a controller":        {edit: func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences[0].Controller = nil }},
		"being deleted":               {edit: func(sb *agentsv1beta1.Sandbox) { sb.DeletionTimestamp = ptr.To(metav1.Now()) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sb := readyMember("m")
			tc.edit(sb)
			if got := isReadyMember(sb); got != tc.want {
				t.Errorf("isReadyMember = %v, want %v", got, tc.want)
			}
		})
	}
}

// The floor's writes are the operator's: one merge patch binding the member under its
// resourceVersion, one status patch mirroring the member's readiness.
func TestFloorPatches(t *testing.T) {
	claim := builders.MakeClaim("claim-000-0000", "bench", "bench-pool").Label(agentsv1beta1.LabelCreatedBy, agentsv1beta1.CreatedByGoClient).Obj()
	claim.UID, claim.Generation = "claim-uid", 1
	member := readyMember("bench-pool-abcde")

	cases := map[string]struct {
		body any
		want string
	}{
		"bind": {
			body: floorBindPatch(claim, member),
			want: `{"metadata":{"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/created-by":"go-client",` +
				`"agents.x-k8s.io/launch-type":"warm","agents.x-k8s.io/warm-pool-sandbox":null},` +
				`"ownerReferences":[{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","name":"claim-000-0000",` +
				`"uid":"claim-uid","controller":true,"blockOwnerDeletion":true}],"resourceVersion":"41"}}`,
		},
		"route": {
			body: floorRoutePatch(claim, "42", memberPod(member)),
			want: `{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":null,"sandgate.dev/metadata-from":"42"},` +
				`"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/created-by":"go-client",` +
				`"agents.x-k8s.io/warm-pool-sandbox":null}}}`,
		},
		"route of a pod without the idle member's marks": {
			body: floorRoutePatch(claim, "42", &corev1.Pod{}),
			want: `{"metadata":{"annotations":{"sandgate.dev/metadata-from":"42"},"labels":{"agents.x-k8s.io/claim-uid":"claim-uid","agents.x-k8s.io/created-by":"go-client"}}}`,
		},
		"status": {
			body: floorStatusPatch(claim, member, time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)),
			want: `{"status":{"conditions":[{"type":"Ready","status":"True","observedGeneration":1,` +
				`"lastTransitionTime":"2026-11-23T05:00:00Z","reason":"DependenciesReady","message":"Pod is Ready"}],` +
				`"sandbox":{"name":"bench-pool-abcde","podIPs":["10.244.0.7"]}}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// memberPod is the pod the operator made for member: named after it, controlled by it, and
// marked as an idle pool member's pod is.
func memberPod(member *agentsv1beta1.Sandbox) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: member.Name, Namespace: member.Namespace,
		Labels:          map[string]string{agentsv1beta1.LabelWarmPoolSandbox: "abc", agentsv1beta1.LabelSandboxUID: string(member.UID)},
		Annotations:     map[string]string{reconcilers.AnnotationSafeToEvict: "true"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Sandbox", Name: member.Name, UID: member.UID, Controller: ptr.To(true)}},
	}}
}

// The route write goes to each member's own pod: the one of its pod name that it controls.
func TestMembersPods(t *testing.T) {
	plain, renamed, stranger := readyMember("plain"), readyMember("renamed"), readyMember("stranger")
	plain.UID, renamed.UID, stranger.UID = "uid-plain", "uid-renamed", "uid-stranger"
	renamed.Annotations = map[string]string{agentsv1beta1.AnnotationPodName: "renamed-pod"}
	renamedPod := memberPod(renamed)
	renamedPod.Name = "renamed-pod"
	foreign := memberPod(stranger)
	foreign.OwnerReferences[0].UID = "someone-else"
	pods := []corev1.Pod{*memberPod(plain), *renamedPod, *foreign, *memberPod(readyMember("renamed"))}

	got := map[string]string{}
	for member, pod := range membersPods([]*agentsv1beta1.Sandbox{plain, renamed, stranger}, pods) {
		got[member] = pod.Name
	}
	if diff := cmp.Diff(map[string]string{"plain": "plain", "renamed": "renamed-pod"}, got); diff != "" {
		t.Errorf("members' pods (-want +got):\n%s", diff)
	}
}

func TestFloorPoolHandsOutEachMemberOnce(t *testing.T) {
	p := &floorPool{members: []*agentsv1beta1.Sandbox{readyMember("a"), readyMember("b")}}
	var got []string
	for {
		m, ok := p.pop()
		if !ok {
			break
		}
		got = append(got, m.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("members handed out (-want +got):\n%s", diff)
	}
}

func TestClientPath(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	w := &ClaimWatcher{seen: map[string]ReadyClaim{"ready": {ReadyAt: ms(16)}}}
	claims := []*sent{
		{name: "ready", createdAt: t0, callTook: 5 * time.Millisecond,
			floor: &floorTimes{bindStart: ms(6), bindEnd: ms(10), statusStart: ms(11), statusEnd: ms(15)}},
		// Created but never Ready, or never bound: not part of the path.
		{name: "never-ready", createdAt: t0, callTook: time.Millisecond, floor: &floorTimes{}},
		{name: "unbound", createdAt: t0},
	}
	got := clientPath(claims, w)
	for name, s := range map[string]struct {
		count int
		mean  float64
	}{
		"before bind":     {got.BeforeBind.Count, got.BeforeBind.Mean},
		"bind":            {got.Bind.Count, got.Bind.Mean},
		"between patches": {got.BetweenPatches.Count, got.BetweenPatches.Mean},
		"status":          {got.Status.Count, got.Status.Mean},
		"watch delivery":  {got.WatchDelivery.Count, got.WatchDelivery.Mean},
	} {
		want := map[string]float64{"before bind": 1, "bind": 4, "between patches": 1, "status": 4, "watch delivery": 1}[name]
		if s.count != 1 || s.mean != want {
			t.Errorf("%s: %d samples, mean %v ms; want 1 sample of %v ms", name, s.count, s.mean, want)
		}
	}
}

func TestBusyCPUSeconds(t *testing.T) {
	cases := map[string]struct {
		stat    string
		want    float64
		wantErr bool
	}{
		// user 100 + nice 1 + system 50 + irq 2 + softirq 3 + steal 4; idle and iowait left out.
		"every field":    {stat: "cpu  100 1 50 9000 700 2 3 4 0 0\ncpu0 50 0 25 4500 350 1 1 2 0 0\n", want: 1.6},
		"no cpu line":    {stat: "intr 1 2 3\n", wantErr: true},
		"garbled number": {stat: "cpu  x 1 50 9000 700 2 3 4 0 0\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := busyCPUSeconds(tc.stat)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("busyCPUSeconds = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
