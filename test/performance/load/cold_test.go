package load

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

func coldFixture(t *testing.T) (*extv1beta1.SandboxTemplate, *extv1beta1.SandboxClaim, *agentsv1beta1.Sandbox) {
	t.Helper()
	tmpl := builders.MakeTemplate("bench-template", "bench").UID("tmpl-uid").PodLabel("team", "a").PodAnnotation("note", "x").Obj()
	claim := builders.MakeClaim("claim-000-0000", "bench", "bench-pool").UID("claim-uid").
		Label(agentsv1beta1.LabelCreatedBy, agentsv1beta1.CreatedByGoClient).Obj()
	sb, err := coldSandbox(tmpl, claim)
	if err != nil {
		t.Fatal(err)
	}
	sb.UID, sb.Generation = "sandbox-uid", 1
	return tmpl, claim, sb
}

// The cold floor's Sandbox is the one reconcilers' coldStart creates: named after the claim,
// controlled by it, the template's blueprint, the keys clients and the binding guard read.
func TestColdSandboxIsSandgatesColdStart(t *testing.T) {
	tmpl, _, sb := coldFixture(t)
	if sb.Name != "claim-000-0000" {
		t.Errorf("name %q, want the claim's", sb.Name)
	}
	wantLabels := map[string]string{
		agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash("bench-template"),
		agentsv1beta1.LabelClaimUID:               "claim-uid",
		agentsv1beta1.LabelLaunchType:             agentsv1beta1.LaunchTypeCold,
		agentsv1beta1.LabelSandboxTemplateHash:    policy.TemplateHash(tmpl),
		agentsv1beta1.LabelCreatedBy:              agentsv1beta1.CreatedByGoClient,
	}
	if diff := cmp.Diff(wantLabels, sb.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{
		agentsv1beta1.AnnotationSandboxTemplateRef: "bench-template",
		agentsv1beta1.AnnotationPodName:            "claim-000-0000",
	}
	if diff := cmp.Diff(wantAnnotations, sb.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if ref := metav1.GetControllerOf(sb); ref == nil || ref.Kind != kindSandboxClaim || ref.UID != "claim-uid" {
		t.Errorf("controller %+v, want the claim", ref)
	}
	if got, want := policy.SandboxHash(sb), policy.TemplateHash(tmpl); got != want {
		t.Errorf("blueprint hash %s, want the template's %s: the spec is not the template's blueprint", got, want)
	}
}

// The cold floor's pod is the one reconcilers' desiredPod builds: the template's own keys
// (recorded in propagated-keys), the Sandbox's labels pods carry, the identity labels, name
// hash and Sandbox UID; controlled by the Sandbox; the blueprint's pod spec.
func TestColdPodIsSandgatesPod(t *testing.T) {
	tmpl, _, sb := coldFixture(t)
	pod := coldPod(sb)
	wantLabels := map[string]string{
		"team":                      "a",
		agentsv1beta1.LabelClaimUID: "claim-uid",
		agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash("bench-template"),
		agentsv1beta1.LabelTemplateUID:            "tmpl-uid",
		agentsv1beta1.LabelCreatedBy:              agentsv1beta1.CreatedByGoClient,
		agentsv1beta1.LabelSandboxNameHash:        agentsv1beta1.NameHash("claim-000-0000"),
		agentsv1beta1.LabelSandboxUID:             "sandbox-uid",
	}
	if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["team"],"annotations":["note"]}`}
	if diff := cmp.Diff(wantAnnotations, pod.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "Sandbox" || ref.UID != "sandbox-uid" || ref.APIVersion != "agents.x-k8s.io/v1beta1" {
		t.Errorf("controller %+v, want the Sandbox", ref)
	}
	if pod.Name != sb.Annotations[agentsv1beta1.AnnotationPodName] {
		t.Errorf("pod %s, the Sandbox's pod-name annotation says %s", pod.Name, sb.Annotations[agentsv1beta1.AnnotationPodName])
	}
	bp := policy.TemplateBlueprint(tmpl)
	if diff := cmp.Diff(bp.PodTemplate.Spec, pod.Spec); diff != "" {
		t.Errorf("pod spec is not the blueprint's (-want +got):\n%s", diff)
	}
	// Every label the Sandbox's status.selector and its Service select on is on the pod.
	st := coldSandboxStatus(sb, readyPod(), time.Now())
	for _, k := range []string{agentsv1beta1.LabelSandboxNameHash, agentsv1beta1.LabelSandboxUID} {
		if _, ok := pod.Labels[k]; !ok {
			t.Errorf("pod lacks %s, which the selector %q names", k, st.Selector)
		}
	}
}

func readyPod() *corev1.Pod {
	pod := builders.MakePod("claim-000-0000", "bench").Obj()
	pod.Spec.NodeName = "node-0"
	pod.Status.PodIP = "10.244.0.9"
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.9"}}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}
	return pod
}

// The Sandbox's status is sandgate's first write of it, once the pod is Ready: selector,
// address, node and the conditions Suspended, PodScheduled and Ready in that order.
func TestColdSandboxStatusIsSandgatesReadyStatus(t *testing.T) {
	_, _, sb := coldFixture(t)
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	got := coldSandboxStatus(sb, readyPod(), now)
	at := metav1.NewTime(now)
	want := agentsv1beta1.SandboxStatus{
		Selector: agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash("claim-000-0000"),
		PodIPs:   []string{"10.244.0.9"},
		NodeName: "node-0",
		Conditions: []metav1.Condition{
			{Type: agentsv1beta1.ConditionSuspended, Status: metav1.ConditionFalse, Reason: agentsv1beta1.ReasonNotSuspended, Message: messageNotSuspended, ObservedGeneration: 1, LastTransitionTime: at},
			{Type: agentsv1beta1.ConditionPodScheduled, Status: metav1.ConditionTrue, Reason: "PodScheduled", ObservedGeneration: 1, LastTransitionTime: at},
			{Type: agentsv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonDependenciesReady, Message: agentsv1beta1.MessagePodReady, ObservedGeneration: 1, LastTransitionTime: at},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// A pod that became Ready before anyone waited for it is handed out all the same, once.
func TestPodWatcherHandsOutReadyPods(t *testing.T) {
	w := &podWatcher{ready: map[string]*corev1.Pod{}, waiting: map[string]chan *corev1.Pod{}, done: make(chan struct{})}
	notReady := readyPod()
	notReady.Name, notReady.Status.Conditions = "pending", nil
	w.observe(notReady)
	early := readyPod()
	early.Name = "early"
	w.observe(early)
	ctx := context.Background()
	if got, err := w.wait(ctx, "early"); err != nil || got.Name != "early" {
		t.Errorf("wait(early) = %v, %v; want the pod seen before", got, err)
	}

	done := make(chan *corev1.Pod)
	go func() {
		got, _ := w.wait(ctx, "late")
		done <- got
	}()
	for {
		w.mu.Lock()
		_, registered := w.waiting["late"]
		w.mu.Unlock()
		if registered {
			break
		}
		time.Sleep(time.Millisecond)
	}
	late := readyPod()
	late.Name = "late"
	w.observe(late)
	if got := <-done; got == nil || got.Name != "late" {
		t.Errorf("wait(late) = %v, want the pod seen after", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := w.wait(cctx, "pending"); err == nil {
		t.Errorf("wait for a pod never Ready returned no error")
	}
}
