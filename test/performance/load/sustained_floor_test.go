package load

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func TestParseLifetime(t *testing.T) {
	cases := map[string]struct {
		in             string
		wantLo, wantHi time.Duration
		wantErr        bool
	}{
		"a range":             {in: "5s-30s", wantLo: 5 * time.Second, wantHi: 30 * time.Second},
		"one duration":        {in: "10s", wantLo: 10 * time.Second, wantHi: 10 * time.Second},
		"spaces around":       {in: " 1s - 2m ", wantLo: time.Second, wantHi: 2 * time.Minute},
		"min above max":       {in: "30s-5s", wantErr: true},
		"not a duration":      {in: "5-30", wantErr: true},
		"an empty right side": {in: "5s-", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			lo, hi, err := ParseLifetime(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseLifetime(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if lo != tc.wantLo || hi != tc.wantHi {
				t.Errorf("ParseLifetime(%q) = %s, %s; want %s, %s", tc.in, lo, hi, tc.wantLo, tc.wantHi)
			}
		})
	}
}

// A replacement is the model member under a new name: the same labels, owner and spec, its
// identity rewritten wherever the model's appears, no pod-name annotation of the model's pod.
func TestCopySandboxKeepsTheOperatorsShape(t *testing.T) {
	model := readyMember("bench-pool-abcde")
	model.UID = "model-uid"
	model.Labels[agentsv1beta1.LabelSandboxNameHash] = agentsv1beta1.NameHash(model.Name)
	model.Annotations = map[string]string{agentsv1beta1.AnnotationPodName: "bench-pool-abcde-x", "keep": "me"}

	got := copySandbox(model, "bench-pool-z1")
	if got.UID != "" || got.ResourceVersion != "" || got.CreationTimestamp != (metav1.Time{}) || len(got.Status.Conditions) != 0 {
		t.Errorf("copy keeps what the API server sets: %+v", got.ObjectMeta)
	}
	if diff := cmp.Diff(model.OwnerReferences, got.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{
		agentsv1beta1.LabelWarmPoolSandbox: "abc",
		agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("bench-pool-z1"),
	}
	for k, v := range model.Labels {
		if _, ok := wantLabels[k]; !ok {
			wantLabels[k] = v
		}
	}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, got.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func TestCopyPodIsOwnedByTheReplacement(t *testing.T) {
	model := readyMember("bench-pool-abcde")
	model.UID = "model-uid"
	sb := copySandbox(model, "bench-pool-z1")
	sb.UID = "new-uid"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: model.Name, Namespace: "bench", UID: "pod-uid", ResourceVersion: "7",
			Labels: map[string]string{agentsv1beta1.LabelSandboxUID: "model-uid", "app": "agent"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: model.Name, UID: "model-uid", Controller: ptr.To(true),
			}},
		},
		Spec:   corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	got := copyPod(pod, model, sb)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "bench-pool-z1", Namespace: "bench",
			Labels: map[string]string{agentsv1beta1.LabelSandboxUID: "new-uid", "app": "agent"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "agents.x-k8s.io/v1beta1", Kind: "Sandbox", Name: "bench-pool-z1", UID: "new-uid", Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:1"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copyPod (-want +got):\n%s", diff)
	}
	if pod.OwnerReferences[0].UID != "model-uid" {
		t.Errorf("copyPod changed the model's owner reference")
	}
}

func TestCopyStatusDescribesTheReplacementsPod(t *testing.T) {
	model := readyMember("bench-pool-abcde")
	model.UID = "model-uid"
	model.Status.Selector = agentsv1beta1.LabelSandboxUID + "=model-uid"
	model.Status.NodeName = "kwok-node-0"
	sb := copySandbox(model, "bench-pool-z1")
	sb.UID, sb.Generation = "new-uid", 1
	pod := &corev1.Pod{
		Spec:   corev1.PodSpec{NodeName: "kwok-node-1"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}}},
	}
	got := copyStatus(model, sb, pod)
	if got.Selector != agentsv1beta1.LabelSandboxUID+"=new-uid" || got.NodeName != "kwok-node-1" {
		t.Errorf("selector %q, node %q; want the replacement's", got.Selector, got.NodeName)
	}
	if diff := cmp.Diff([]string{"10.244.0.9"}, got.PodIPs); diff != "" {
		t.Errorf("pod IPs (-want +got):\n%s", diff)
	}
	if len(got.Conditions) != 1 || got.Conditions[0].Reason != "DependenciesReady" || got.Conditions[0].ObservedGeneration != 1 {
		t.Errorf("conditions %+v, want the model's Ready observed at generation 1", got.Conditions)
	}
	if model.Status.PodIPs[0] != "10.244.0.7" {
		t.Errorf("copyStatus changed the model")
	}
}

// Arrivals end early only once they have run StopBehind and fallen more than a tenth behind
// the rate; without StopBehind they never do.
func TestBehind(t *testing.T) {
	cfg := SustainedConfig{Rate: 50, StopBehind: time.Minute}
	cases := map[string]struct {
		cfg     SustainedConfig
		created int
		elapsed time.Duration
		want    bool
	}{
		"on pace":                         {cfg: cfg, created: 3000, elapsed: time.Minute},
		"a tenth behind, within the rule": {cfg: cfg, created: 2700, elapsed: time.Minute},
		"more than a tenth behind":        {cfg: cfg, created: 2699, elapsed: time.Minute, want: true},
		"far behind, but too early":       {cfg: cfg, created: 100, elapsed: 59 * time.Second},
		"far behind, no StopBehind":       {cfg: SustainedConfig{Rate: 50}, created: 100, elapsed: 10 * time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := behind(tc.cfg, tc.created, tc.elapsed); got != tc.want {
				t.Errorf("behind(%d created in %s) = %v, want %v", tc.created, tc.elapsed, got, tc.want)
			}
		})
	}
}
