//go:build integration

package sandbox_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/operator"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/test/framework"
	"github.com/sandgate-dev/sandgate/webhooks"
)

func TestCreateToReadyWithService(t *testing.T) {
	e := setup(t)
	// A reserved key in the pod template: admission refuses it from users, but the operator
	// copies templates verbatim, and one written before the rule existed may hold such a key.
	// The controller leaves it off the pod.
	operator, err := cluster.ClientAs(webhooks.DefaultOperatorUser)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(operator.Create(e.ctx(), builders.MakeSandbox("web", e.ns).
		ContainerPort("main", 8080, corev1.ProtocolTCP, "http").
		ContainerPort("main", 9000, corev1.ProtocolUDP, "").
		PodLabel("app", "agent").
		PodAnnotation("note", "hello").
		PodLabel(agentsv1beta1.LabelClaimUID, "forged-by-operator-copy").
		Service(true).Obj())).To(Succeed())

	sb := e.waitReady("web", readyPodService)
	e.eventually(func(g Gomega) {
		sb = e.sandbox(g, "web")
		hash := agentsv1beta1.NameHash("web")
		pod := e.pod(g, "web")
		g.Expect(sb.Status.PodIPs).To(Equal([]string{pod.Status.PodIP}))
		g.Expect(sb.Status.PodIPs[0]).NotTo(BeEmpty())
		g.Expect(sb.Status.NodeName).To(HavePrefix("kwok-node-"))
		g.Expect(sb.Status.NodeName).To(Equal(pod.Spec.NodeName))
		// The public value, exactly: the name hash alone (the Service below adds the UID).
		g.Expect(sb.Status.Selector).To(Equal(agentsv1beta1.LabelSandboxNameHash + "=" + hash))
		g.Expect(sb.Status.Service).To(Equal("web"))
		g.Expect(sb.Status.ServiceFQDN).To(Equal("web." + e.ns + ".svc.cluster.local"))
		expectCondition(g, sb, agentsv1beta1.ConditionPodScheduled, wantCondition{Status: metav1.ConditionTrue, Reason: "PodScheduled"})
		expectCondition(g, sb, agentsv1beta1.ConditionSuspended, notSuspended)
		expectNoCondition(g, sb, agentsv1beta1.ConditionFinished)

		g.Expect(metav1.IsControlledBy(pod, sb)).To(BeTrue(), "pod owners %+v", pod.OwnerReferences)
		g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxNameHash, hash))
		g.Expect(pod.Labels).To(HaveKeyWithValue("app", "agent"))
		g.Expect(pod.Labels).NotTo(HaveKey(agentsv1beta1.LabelClaimUID), "reserved keys from users are not propagated")
		g.Expect(pod.Annotations).To(HaveKeyWithValue("note", "hello"))

		svc := &corev1.Service{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "web"}, svc)).To(Succeed())
		g.Expect(metav1.IsControlledBy(svc, sb)).To(BeTrue())
		g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		// The Sandbox's UID with the public name hash: a colliding name's pod is not selected.
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{agentsv1beta1.LabelSandboxNameHash: hash, agentsv1beta1.LabelSandboxUID: string(sb.UID)}))
		g.Expect(svc.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxNameHash, hash))
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
		}
		g.Expect(ports).To(ConsistOf("http 8080/TCP", "p-9000-udp 9000/UDP"))
	})
	// The deprecated version's /scale publishes status.selector (kubectl scale, autoscalers):
	// the public value there too, as the API server converts and serves it.
	scale := &autoscalingv1.Scale{}
	e.g.Expect(e.Client.SubResource("scale").Get(e.ctx(), &agentsv1alpha1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "web"}}, scale)).To(Succeed())
	e.g.Expect(scale.Status.Selector).To(Equal(agentsv1beta1.LabelSandboxNameHash + "=" + agentsv1beta1.NameHash("web")))
}

func TestVolumeClaimTemplatesAndUnschedulablePod(t *testing.T) {
	e := setup(t)
	// The PVC asks for a StorageClass nobody provides, so it never binds and the scheduler
	// cannot place the pod: the Sandbox mirrors the pod's PodScheduled=False and stays not
	// Ready. (storage_test.go shows a PVC of the default class binding.)
	sb := builders.MakeSandbox("data", e.ns).VolumeClaimTemplate("workspace", "1Gi").Obj()
	sb.Spec.VolumeClaimTemplates[0].Spec.StorageClassName = ptr.To("no-such-class")
	e.create(sb)
	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "data")
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "workspace-data"}, pvc)).To(Succeed())
		g.Expect(metav1.IsControlledBy(pvc, sb)).To(BeTrue())
		g.Expect(pvc.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxNameHash, agentsv1beta1.NameHash("data")))

		pod := e.pod(g, "data")
		g.Expect(pod.Spec.Volumes).To(ContainElement(corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "workspace-data"},
		}}))
		expectCondition(g, sb, agentsv1beta1.ConditionPodScheduled, wantCondition{Status: metav1.ConditionFalse, Reason: "Unschedulable"})
		expectCondition(g, sb, agentsv1beta1.ConditionReady, wantCondition{metav1.ConditionFalse, agentsv1beta1.ReasonDependenciesNotReady, "Pod exists with phase: Pending"})
	})
}

// TestWriteDiscipline counts what one Sandbox costs from creation to Ready, and what a
// suspend/resume cycle costs, under the kubelet-like pod profile (4 pod status updates).
// Without the pod event classification each kubelet step would wake the Sandbox.
func TestWriteDiscipline(t *testing.T) {
	e := setup(t)
	start := e.counts()
	e.create(builders.MakeSandbox("counted", e.ns).Obj())
	e.waitReady("counted", readyPod)
	time.Sleep(framework.Quiet)
	created := e.counts().minus(start)
	t.Logf("create → Ready: %s", created)

	e.g.Expect(created.conflicts).To(BeZero(), "409 conflicts")
	e.g.Expect(created.updates).To(BeZero(), "Update() calls")
	e.g.Expect(created.reconciles).To(BeNumerically("<=", 3), "reconciles from creation to Ready")
	e.g.Expect(created.byKey).To(HaveKeyWithValue("create pods success", 1.0))
	e.g.Expect(slices.Collect(maps.Keys(created.byKey))).To(ConsistOf("create pods success", "patch sandboxes/status success"),
		"the pod create and status patches, nothing else")
	e.g.Expect(created.byKey["patch sandboxes/status success"]).To(BeNumerically("<=", 2), "status writes")
	// The pod-name annotation clients read was set at admission: no write of the operator's.
	e.g.Expect(e.sandbox(e.g, "counted").Annotations).To(HaveKeyWithValue(agentsv1beta1.AnnotationPodName, "counted"))
	n, sum := e.Metrics.ReconcilesToReady()
	e.g.Expect(n).To(Equal(uint64(1)))
	e.g.Expect(sum).To(Equal(created.reconciles))

	before := e.counts()
	e.patchSandbox("counted", `{"spec":{"operatingMode":"Suspended"}}`)
	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "counted")
		expectCondition(g, sb, agentsv1beta1.ConditionSuspended, wantCondition{Status: metav1.ConditionTrue, Reason: agentsv1beta1.ReasonPodTerminated})
	})
	time.Sleep(framework.Quiet)
	suspended := e.counts().minus(before)
	t.Logf("suspend: %s", suspended)

	before = e.counts()
	e.patchSandbox("counted", `{"spec":{"operatingMode":"Running"}}`)
	e.waitReady("counted", readyPod)
	time.Sleep(framework.Quiet)
	resumed := e.counts().minus(before)
	t.Logf("resume: %s", resumed)

	for name, c := range map[string]counts{"suspend": suspended, "resume": resumed} {
		e.g.Expect(c.conflicts).To(BeZero(), "%s: 409 conflicts", name)
		e.g.Expect(c.updates).To(BeZero(), "%s: Update() calls", name)
		e.g.Expect(c.reconciles).To(BeNumerically("<=", 3), "%s: reconciles", name)
	}
	e.g.Expect(suspended.byKey).To(HaveKeyWithValue("delete pods success", 1.0))
	e.g.Expect(resumed.byKey).To(HaveKeyWithValue("create pods success", 1.0))
	for _, c := range []counts{suspended, resumed} {
		e.g.Expect(c.byKey["patch sandboxes/status success"]).To(BeNumerically("<=", 2))
	}
}

func TestSuspendAndResume(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("sleepy", e.ns).Service(true).VolumeClaimTemplate("home", "1Gi").Obj())
	var firstPod types.UID
	e.eventually(func(g Gomega) {
		firstPod = e.pod(g, "sleepy").UID
	})

	e.patchSandbox("sleepy", `{"spec":{"operatingMode":"Suspended"}}`)
	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "sleepy")
		expectCondition(g, sb, agentsv1beta1.ConditionSuspended, wantCondition{metav1.ConditionTrue, agentsv1beta1.ReasonPodTerminated, "Pod has been terminated. Sandbox is suspended"})
		expectCondition(g, sb, agentsv1beta1.ConditionReady, wantCondition{metav1.ConditionFalse, agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspended"})
		expectNoCondition(g, sb, agentsv1beta1.ConditionPodScheduled)
		g.Expect(sb.Status.PodIPs).To(BeEmpty())
		g.Expect(sb.Status.NodeName).To(BeEmpty())
		e.gone(g, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "sleepy"}})
	})
	// PVCs and the Service stay while suspended.
	e.consistently(func(g Gomega) {
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "home-sleepy"}, &corev1.PersistentVolumeClaim{})).To(Succeed())
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "sleepy"}, &corev1.Service{})).To(Succeed())
		g.Expect(e.sandbox(g, "sleepy").Status.Service).To(Equal("sleepy"))
	})

	e.patchSandbox("sleepy", `{"spec":{"operatingMode":"Running"}}`)
	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "sleepy")
		expectCondition(g, sb, agentsv1beta1.ConditionSuspended, notSuspended)
		pod := e.pod(g, "sleepy")
		g.Expect(pod.UID).NotTo(Equal(firstPod), "a new pod")
		g.Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Name", "home")))
	})
	// PodScheduled cannot become True (the PVC never binds), so Ready is not reached here;
	// TestWriteDiscipline covers resume to Ready.
}

func TestExpiryWithDelete(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("short", e.ns).Service(true).
		ShutdownTime(time.Now().Add(4 * time.Second)).ShutdownPolicy(agentsv1beta1.ShutdownPolicyDelete).Obj())
	e.waitReady("short", readyPodService)
	e.eventually(func(g Gomega) {
		e.gone(g, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "short"}})
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "short"}})
		e.gone(g, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "short"}})
	})
}

func TestExpiryWithRetain(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("kept", e.ns).Service(true).
		ShutdownTime(time.Now().Add(4 * time.Second)).Obj()) // shutdownPolicy defaults to Retain
	e.waitReady("kept", readyPodService)
	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "kept")
		g.Expect(sb.Spec.ShutdownPolicy).To(Equal(agentsv1beta1.ShutdownPolicyRetain))
		// Ready says why it stopped; Suspended (and Finished, had the pod ended) stay as they
		// were, as the public controller keeps them; nothing of the pod is left.
		g.Expect(sb.Status.Conditions).To(HaveLen(2), "Ready and Suspended: %+v", sb.Status.Conditions)
		expectCondition(g, sb, agentsv1beta1.ConditionReady, wantCondition{metav1.ConditionFalse, agentsv1beta1.ReasonSandboxExpired, "Sandbox has expired"})
		expectCondition(g, sb, agentsv1beta1.ConditionSuspended, notSuspended)
		expectNoCondition(g, sb, agentsv1beta1.ConditionPodScheduled)
		g.Expect(sb.Status).To(HaveField("PodIPs", BeEmpty()))
		g.Expect(sb.Status).To(HaveField("Service", BeEmpty()))
		g.Expect(sb.Status).To(HaveField("Selector", BeEmpty()))
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kept"}})
		e.gone(g, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kept"}})
	})
	e.consistently(func(g Gomega) {
		e.sandbox(g, "kept") // still there
		e.gone(g, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kept"}})
	})
}

func TestDeletedPodIsRecreated(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("phoenix", e.ns).Obj())
	e.waitReady("phoenix", readyPod)
	var old *corev1.Pod
	e.eventually(func(g Gomega) { old = e.pod(g, "phoenix") })
	e.g.Expect(e.Client.Delete(e.ctx(), old)).To(Succeed())
	e.eventually(func(g Gomega) {
		pod := e.pod(g, "phoenix")
		g.Expect(pod.UID).NotTo(Equal(old.UID))
		expectCondition(g, e.sandbox(g, "phoenix"), agentsv1beta1.ConditionReady, readyPod)
	})
}

func TestFinishedPod(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		t.Run(string(phase), func(t *testing.T) {
			e := setup(t)
			e.create(builders.MakeSandbox("job", e.ns).Obj())
			e.waitReady("job", readyPod)
			var pod *corev1.Pod
			e.eventually(func(g Gomega) { pod = e.pod(g, "job") })
			// What a kubelet reports when the pod's containers exit for good.
			patch := fmt.Sprintf(`{"status":{"phase":%q,"conditions":[{"type":"Ready","status":"False","reason":"PodCompleted"}]}}`, phase)
			e.g.Expect(e.Client.Status().Patch(e.ctx(), pod, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())

			reason := agentsv1beta1.ReasonPodSucceeded
			if phase == corev1.PodFailed {
				reason = agentsv1beta1.ReasonPodFailed
			}
			e.eventually(func(g Gomega) {
				sb := e.sandbox(g, "job")
				expectCondition(g, sb, agentsv1beta1.ConditionFinished, wantCondition{Status: metav1.ConditionTrue, Reason: reason})
				msg := agentsv1beta1.MessagePodSucceeded
				if phase == corev1.PodFailed {
					msg = agentsv1beta1.MessagePodFailed
				}
				expectCondition(g, sb, agentsv1beta1.ConditionFinished, wantCondition{metav1.ConditionTrue, reason, msg})
				expectCondition(g, sb, agentsv1beta1.ConditionReady, wantCondition{metav1.ConditionFalse, reason, msg})
			})
			e.consistently(func(g Gomega) {
				g.Expect(e.pod(g, "job").UID).To(Equal(pod.UID), "a finished pod is kept, not replaced")
			})
		})
	}
}

// TestAdoption: a Sandbox runs only a pod built for it. A pod that holds its name is taken
// over only when it says so (the public adoptable label, or the Sandbox's own UID stamp) and is
// exactly what the Sandbox would build; otherwise it is left alone and the Sandbox builds its
// own pod under a generated name, with a ChildNameTaken event.
func TestAdoption(t *testing.T) {
	cases := map[string]struct {
		labels    map[string]string
		image     string
		wantAdopt bool
	}{
		"adoptable label, the Sandbox's own spec": {labels: map[string]string{agentsv1beta1.LabelAdoptable: "true"}, wantAdopt: true},
		"adoptable label, another image":          {labels: map[string]string{agentsv1beta1.LabelAdoptable: "true"}, image: "attacker.example/evil:1"},
		"matching name hash only":                 {labels: map[string]string{agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("orphan")}},
		"neither":                                 {labels: map[string]string{"app": "other"}},
		"adoptable is not ok":                     {labels: map[string]string{agentsv1beta1.LabelAdoptable: "yes"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := setup(t)
			pre := builders.MakePod("orphan", e.ns).Obj()
			pre.Labels = tc.labels
			if tc.image != "" {
				pre.Spec.Containers[0].Image = tc.image
			}
			e.create(pre)
			e.eventually(func(g Gomega) { g.Expect(e.pod(g, "orphan").Status.PodIP).NotTo(BeEmpty()) })

			e.create(builders.MakeSandbox("orphan", e.ns).Obj())
			sb := e.waitReady("orphan", readyPod)
			if tc.wantAdopt {
				pod := e.pod(e.g, "orphan")
				e.g.Expect(pod.UID).To(Equal(pre.UID), "the pre-existing pod is adopted, not replaced")
				e.g.Expect(metav1.IsControlledBy(pod, sb)).To(BeTrue())
				e.g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxNameHash, agentsv1beta1.NameHash("orphan")))
				e.g.Expect(pod.Labels).To(HaveKeyWithValue(agentsv1beta1.LabelSandboxUID, string(sb.UID)))
				return
			}
			own := sb.Annotations[agentsv1beta1.AnnotationPodName]
			e.g.Expect(own).To(HavePrefix("orphan-"), "the Sandbox builds its own pod under a generated name")
			e.g.Expect(metav1.IsControlledBy(e.pod(e.g, own), sb)).To(BeTrue())
			e.consistently(func(g Gomega) {
				pod := e.pod(g, "orphan")
				g.Expect(pod.OwnerReferences).To(BeEmpty(), "a foreign pod is left alone")
				g.Expect(pod.Labels).To(Equal(tc.labels))
			})
			var events eventsv1.EventList
			e.g.Expect(e.Client.List(e.ctx(), &events, client.InNamespace(e.ns))).To(Succeed())
			e.g.Expect(events.Items).To(ContainElement(And(HaveField("Reason", "ChildNameTaken"), HaveField("Regarding.Name", "orphan"))))
		})
	}
}

// TestScopedChildCaches: with --cache-label-selectors the manager caches only the Pods and
// Services that carry the sandbox tracking label. Sandboxes still get their pod and Service,
// and an unlabelled pod and Service holding a Sandbox's child names, which the cache cannot
// show, are still seen as taken: the Sandbox builds its own under generated names and leaves
// them alone.
func TestScopedChildCaches(t *testing.T) {
	e := setupWith(t, func(o *operator.Options) { o.CacheLabelSelectors = true })

	e.create(builders.MakeSandbox("plain", e.ns).Service(true).Obj())
	sb := e.waitReady("plain", readyPodService)
	e.g.Expect(metav1.IsControlledBy(e.pod(e.g, "plain"), sb)).To(BeTrue())

	squatter := builders.MakePod("taken", e.ns).Obj()
	squatter.Labels = map[string]string{"app": "other"}
	e.create(squatter)
	squatSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: e.ns, Labels: map[string]string{"app": "other"}},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "other"}},
	}
	e.create(squatSvc)
	e.create(builders.MakeSandbox("taken", e.ns).Service(true).Obj())
	sb = e.waitReady("taken", readyPodService)
	own := sb.Annotations[agentsv1beta1.AnnotationPodName]
	e.g.Expect(own).To(HavePrefix("taken-"), "the Sandbox builds its own pod under a generated name")
	e.g.Expect(metav1.IsControlledBy(e.pod(e.g, own), sb)).To(BeTrue())
	e.g.Expect(sb.Status.Service).To(HavePrefix("taken-"), "and its own Service")
	e.consistently(func(g Gomega) {
		g.Expect(e.pod(g, "taken").OwnerReferences).To(BeEmpty(), "a foreign pod is left alone")
		svc := &corev1.Service{}
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKeyFromObject(squatSvc), svc)).To(Succeed())
		g.Expect(svc.OwnerReferences).To(BeEmpty(), "a foreign Service is left alone")
	})
}

func TestMultiplePods(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("twin", e.ns).Obj())
	sb := e.waitReady("twin", readyPod)
	extra := builders.MakePod("twin-extra", e.ns).Obj()
	extra.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox"))}
	e.create(extra)

	e.eventually(func(g Gomega) {
		sb := e.sandbox(g, "twin")
		expectCondition(g, sb, agentsv1beta1.ConditionReady, wantCondition{metav1.ConditionFalse, agentsv1beta1.ReasonMultiplePods,
			"multiple Pods (2) are controlled by this Sandbox; refusing to choose or create a Pod"})
		var events eventsv1.EventList
		g.Expect(e.Client.List(e.ctx(), &events, client.InNamespace(e.ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", "MultiplePods"),
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Regarding.Name", "twin"),
		)))
	})
	e.consistently(func(g Gomega) {
		e.pod(g, "twin")
		e.pod(g, "twin-extra")
	})
}

func TestServiceTrueFalseUnset(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("svc", e.ns).Service(true).Obj())
	e.waitReady("svc", readyPodService)

	e.patchSandbox("svc", `{"spec":{"service":null}}`) // unset keeps the existing Service
	keepsService := func(g Gomega) {
		g.Expect(e.Client.Get(e.ctx(), client.ObjectKey{Namespace: e.ns, Name: "svc"}, &corev1.Service{})).To(Succeed())
		expectCondition(g, e.sandbox(g, "svc"), agentsv1beta1.ConditionReady, readyPodService)
	}
	e.eventually(keepsService)   // once the new generation is observed...
	e.consistently(keepsService) // ...it stays so

	e.patchSandbox("svc", `{"spec":{"service":false}}`)
	e.eventually(func(g Gomega) {
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "svc"}})
		sb := e.sandbox(g, "svc")
		g.Expect(sb.Status.Service).To(BeEmpty())
		g.Expect(sb.Status.ServiceFQDN).To(BeEmpty())
		expectCondition(g, sb, agentsv1beta1.ConditionReady, readyPod)
	})

	e.patchSandbox("svc", `{"spec":{"service":null}}`) // unset never creates one
	e.consistently(func(g Gomega) {
		e.gone(g, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "svc"}})
	})
}

func TestPodMetadataFollowsTemplate(t *testing.T) {
	e := setup(t)
	e.create(builders.MakeSandbox("meta", e.ns).PodLabel("keep", "1").PodLabel("drop", "1").PodAnnotation("a", "1").Obj())
	e.waitReady("meta", readyPod)
	var before *corev1.Pod
	e.eventually(func(g Gomega) { before = e.pod(g, "meta") })
	// Someone else labels the pod; that is theirs to keep.
	e.g.Expect(e.Client.Patch(e.ctx(), before, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"foreign":"x"}}}`)))).To(Succeed())

	e.patchSandbox("meta", `{"spec":{"podTemplate":{"metadata":{"labels":{"drop":null,"keep":"2","new":"1"},"annotations":{"a":null,"b":"2"}}}}}`)
	e.eventually(func(g Gomega) {
		pod := e.pod(g, "meta")
		g.Expect(pod.UID).To(Equal(before.UID), "metadata changes never recreate the pod")
		g.Expect(pod.Labels).To(HaveKeyWithValue("keep", "2"))
		g.Expect(pod.Labels).To(HaveKeyWithValue("new", "1"))
		g.Expect(pod.Labels).To(HaveKeyWithValue("foreign", "x"))
		g.Expect(pod.Labels).NotTo(HaveKey("drop"))
		g.Expect(pod.Annotations).To(HaveKeyWithValue("b", "2"))
		g.Expect(pod.Annotations).NotTo(HaveKey("a"))
		g.Expect(pod.Spec).To(Equal(before.Spec), "the pod spec is never written")
	})
}

// Issue 11, finding 7: a tenant creating and deleting Sandboxes does not make the operator
// remember them: its per-Sandbox bookkeeping holds only Sandboxes that exist.
func TestDeletedSandboxesForgotten(t *testing.T) {
	e := setup(t)
	mallory := cluster.Tenant(t, e.Client, e.ns, "mallory")
	cluster.AllowPods(t, e.Client, e.ns, "mallory") // a Sandbox of their own needs pod rights
	names := []string{"churn-1", "churn-2", "churn-3", "churn-4", "churn-5"}
	for _, name := range names {
		e.g.Expect(mallory.Create(e.ctx(), builders.MakeSandbox(name, e.ns).Obj())).To(Succeed())
	}
	for _, name := range names {
		e.waitReady(name, readyPod)
	}
	e.g.Expect(e.Metrics.SandboxesTracked()).To(Equal(len(names)))
	for _, name := range names {
		e.g.Expect(mallory.Delete(e.ctx(), builders.MakeSandbox(name, e.ns).Obj())).To(Succeed())
	}
	e.eventually(func(g Gomega) {
		g.Expect(e.Metrics.SandboxesTracked()).To(BeZero())
	})
}
