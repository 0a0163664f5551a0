package reconcilers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// A Sandbox runs only children it built: an object that holds a child's name is adopted only
// when it has no controller, carries the Sandbox's UID stamp or the public adoptable label,
// and is what the Sandbox would build. Otherwise the Sandbox builds its own under a generated
// name and says so in a Warning event.
func TestSandboxRunsOnlyChildrenBuiltForIt(t *testing.T) {
	withVolume := func(w *builders.SandboxWrapper) { w.VolumeClaimTemplate("data", "1Gi") }
	tests := map[string]struct {
		sandbox     *agentsv1beta1.Sandbox
		squat       func(sb *agentsv1beta1.Sandbox) client.Object
		wantAdopted bool
	}{
		"an orphaned pod of another Sandbox of the same name (another UID)": {
			sandbox: testSandbox(withoutPodName),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil
				pod.Labels[agentsv1beta1.LabelSandboxUID] = "an-earlier-uid"
				return pod
			},
		},
		"a pod with the Sandbox's name hash and the attacker's image": {
			sandbox: testSandbox(withoutPodName),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil
				delete(pod.Labels, agentsv1beta1.LabelSandboxUID)
				pod.Spec.Containers[0].Image = "attacker.example/evil:1"
				return pod
			},
		},
		"an adoptable pod with the attacker's image": {
			sandbox: testSandbox(withoutPodName),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil
				pod.Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
				pod.Spec.Containers[0].Image = "attacker.example/evil:1"
				return pod
			},
		},
		"an adoptable pod that adds a privileged sidecar": {
			sandbox: testSandbox(withoutPodName),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil
				pod.Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Image: "x",
					SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}})
				return pod
			},
		},
		"an adoptable pod that is exactly what the Sandbox builds is taken over": {
			sandbox: testSandbox(withoutPodName),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pod := sandboxPod(sb, true)
				pod.OwnerReferences = nil
				pod.Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
				return pod
			},
			wantAdopted: true,
		},
		"a PVC someone else provisioned under the volume's name": {
			sandbox: testSandbox(withoutPodName, withVolume),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pvc := desiredPVC(sb, &sb.Spec.VolumeClaimTemplates[0])
				pvc.Labels = map[string]string{agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash(sb.Name)}
				return pvc
			},
		},
		"an adoptable PVC restored from someone's snapshot": {
			sandbox: testSandbox(withoutPodName, withVolume),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				pvc := desiredPVC(sb, &sb.Spec.VolumeClaimTemplates[0])
				pvc.Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: "poisoned"}
				return pvc
			},
		},
		"a headless Service of the Sandbox's name that selects the attacker's pod": {
			sandbox: testSandbox(withoutPodName, func(w *builders.SandboxWrapper) { w.Service(true) }),
			squat: func(sb *agentsv1beta1.Sandbox) client.Object {
				svc := desiredService(sb)
				svc.Labels = map[string]string{agentsv1beta1.LabelAdoptable: "true"}
				svc.Spec.Selector = map[string]string{"app": "attacker"}
				svc.Spec.Type = corev1.ServiceTypeNodePort
				svc.Spec.ClusterIP = ""
				return svc
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			squat := tc.squat(tc.sandbox)
			a := newFakeAPI(t, tc.sandbox, squat)
			r := newSandboxReconciler(t, a, clocktesting.NewFakeClock(planNow))
			reconcileSandbox(t, r)

			got := squat.DeepCopyObject().(client.Object)
			if err := a.Get(context.Background(), client.ObjectKeyFromObject(squat), got); err != nil {
				t.Fatal(err)
			}
			if adopted := isControlledBy(got, tc.sandbox); adopted != tc.wantAdopted {
				t.Fatalf("%T %s adopted: %v, want %v", squat, squat.GetName(), adopted, tc.wantAdopted)
			}
			var taken []string
			for _, e := range eventsOf(a.Journal()) {
				if strings.Contains(e, eventChildNameTaken) {
					taken = append(taken, e)
				}
			}
			if tc.wantAdopted {
				if len(taken) != 0 {
					t.Errorf("events %v, want no %s", taken, eventChildNameTaken)
				}
				return
			}
			if diff := cmp.Diff([]string{"event Warning " + eventChildNameTaken + " Sandbox/sb"}, taken); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The Sandbox built its own child under a generated name.
			var own []string
			var list client.ObjectList
			switch squat.(type) {
			case *corev1.Pod:
				list = &corev1.PodList{}
			case *corev1.PersistentVolumeClaim:
				list = &corev1.PersistentVolumeClaimList{}
			case *corev1.Service:
				list = &corev1.ServiceList{}
			}
			if err := a.List(context.Background(), list, client.InNamespace("ns")); err != nil {
				t.Fatal(err)
			}
			if err := meta.EachListItem(list, func(o runtime.Object) error {
				if obj := o.(client.Object); isControlledBy(obj, tc.sandbox) {
					own = append(own, obj.GetName())
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(own) != 1 || own[0] == squat.GetName() || !strings.HasPrefix(own[0], squat.GetName()+"-") {
				t.Errorf("the Sandbox's own children %v, want one named %s-<generated>", own, squat.GetName())
			}
		})
	}
}

// The API server stores an unset pod security context as an empty one: a pod that is what the
// Sandbox builds is still recognised as such.
func TestPodSpecMatchesWhatTheAPIServerStores(t *testing.T) {
	want := desiredPod(testSandbox(), nil).Spec
	stored := want.DeepCopy()
	stored.SecurityContext = &corev1.PodSecurityContext{}
	stored.RestartPolicy = corev1.RestartPolicyAlways
	stored.DNSPolicy = corev1.DNSClusterFirst
	stored.Containers[0].TerminationMessagePath = corev1.TerminationMessagePathDefault
	stored.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if !podSpecMatches(&want, stored) {
		t.Errorf("the stored form of the Sandbox's own pod does not match")
	}
	stored.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}
	if podSpecMatches(&want, stored) {
		t.Errorf("a pod that runs as root matches a Sandbox that does not say so")
	}
}

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
