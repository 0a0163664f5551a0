package reconcilers

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// FuzzChildAdoption sends the adoption test arbitrary pods found under a Sandbox's pod name.
// Whatever the pod, a pod the Sandbox would take over runs exactly the Sandbox's containers
// (images, commands, security contexts), no other volume source than the Sandbox's (no
// hostPath), and the Sandbox's host namespaces, service account and runtime class: a found
// child never widens what the Sandbox runs.
// `go test` runs the seeds; `go test -fuzz FuzzChildAdoption ./reconcilers` explores further.
func FuzzChildAdoption(f *testing.F) {
	sb := testSandbox()
	want := desiredPod(sb, nil)
	evil := want.DeepCopy()
	evil.Spec.Containers[0].Image = "attacker.example/evil:1"
	sidecar := want.DeepCopy()
	sidecar.Spec.Containers = append(sidecar.Spec.Containers, corev1.Container{Name: "side", Image: "x"})
	privileged := want.DeepCopy()
	privileged.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	host := want.DeepCopy()
	host.Spec.HostNetwork = true
	hostPath := want.DeepCopy()
	hostPath.Spec.Volumes = append(hostPath.Spec.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	for _, p := range []*corev1.Pod{want, evil, sidecar, privileged, host, hostPath} {
		raw, _ := json.Marshal(p.Spec)
		f.Add(string(raw))
	}
	f.Fuzz(func(t *testing.T, specJSON string) {
		var have corev1.PodSpec
		if json.Unmarshal([]byte(specJSON), &have) != nil {
			return
		}
		if !podSpecMatches(&want.Spec, &have) {
			return
		}
		got := withoutInjectedTokenVolume(&want.Spec, &have)
		if len(got.Containers) != len(want.Spec.Containers) || len(got.InitContainers) != len(want.Spec.InitContainers) {
			t.Fatalf("a pod with other containers would be adopted: %s", specJSON)
		}
		for i, c := range want.Spec.Containers {
			h := got.Containers[i]
			if h.Image != c.Image || !equality.Semantic.DeepEqual(orZero(h.SecurityContext), orZero(c.SecurityContext)) || len(h.Command) != len(c.Command) {
				t.Fatalf("a pod running another container %d would be adopted: %s", i, specJSON)
			}
		}
		for _, v := range got.Volumes {
			if v.HostPath != nil {
				t.Fatalf("a pod with a hostPath volume would be adopted: %s", specJSON)
			}
		}
		if got.HostNetwork || got.HostPID || got.HostIPC || (got.ServiceAccountName != "" && got.ServiceAccountName != "default") ||
			got.RuntimeClassName != nil || !equality.Semantic.DeepEqual(orZero(got.SecurityContext), corev1.PodSecurityContext{}) {
			t.Fatalf("a pod with other privileges would be adopted: %s", specJSON)
		}
	})
}
