package reconcilers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func sandbox(mutate ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns", UID: "uid-1"},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img"}}}},
		}},
	}
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

func TestDesiredPod(t *testing.T) {
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) {
		sb.Labels = map[string]string{
			agentsv1beta1.LabelClaimUID: "claim-1",
			"team":                      "not-propagated",
		}
		sb.Spec.PodTemplate.ObjectMeta = agentsv1beta1.PodMetadata{
			Labels:      map[string]string{"app": "agent", agentsv1beta1.LabelClaimUID: "forged"},
			Annotations: map[string]string{"note": "x", "extensions.agents.x-k8s.io/y": "forged"},
		}
		sb.Spec.PodTemplate.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{
			{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "data"}},
			{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "home"}},
		}
	})
	pod := desiredPod(sb, nil)

	wantLabels := map[string]string{
		"app":                              "agent",
		agentsv1beta1.LabelClaimUID:        "claim-1",
		agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash("sb"),
		agentsv1beta1.LabelSandboxUID:      "uid-1",
	}
	if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAnnotations := map[string]string{"note": "x", annotationPropagatedKeys: `{"labels":["app"],"annotations":["note"]}`}
	if diff := cmp.Diff(wantAnnotations, pod.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	wantVolumes := []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-sb"}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "home", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home-sb"}}},
	}
	if diff := cmp.Diff(wantVolumes, pod.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if pod.Name != "sb" || pod.Namespace != "ns" {
		t.Errorf("pod is %s/%s, want ns/sb", pod.Namespace, pod.Name)
	}
	if len(sb.Spec.PodTemplate.Spec.Volumes) != 2 || sb.Spec.PodTemplate.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("desiredPod changed the Sandbox's podTemplate: %+v", sb.Spec.PodTemplate.Spec.Volumes)
	}
}

func TestPodMetadataPatch(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		pod  *corev1.Pod
		want *metadataPatch
	}{
		"in sync": {
			sb:   sandbox(),
			pod:  desiredPod(sandbox(), nil),
			want: &metadataPatch{},
		},
		"template key removed, foreign keys kept": {
			sb: sandbox(),
			pod: func() *corev1.Pod {
				p := desiredPod(sandbox(func(sb *agentsv1beta1.Sandbox) {
					sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"old": "1"}
					sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"gone": "1"}
				}), nil)
				p.Labels["added-by-someone"] = "x"
				p.Annotations["kubectl.kubernetes.io/restartedAt"] = "x"
				return p
			}(),
			want: &metadataPatch{
				Labels:      map[string]*string{"old": nil},
				Annotations: map[string]*string{"gone": nil, annotationPropagatedKeys: str(`{}`)},
			},
		},
		"claim binding reaches the pod, pool membership leaves it": {
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Labels = map[string]string{agentsv1beta1.LabelClaimUID: "c1", agentsv1beta1.LabelLaunchType: "warm"}
			}),
			pod: desiredPod(sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Labels = map[string]string{agentsv1beta1.LabelWarmPoolSandbox: "abcd"}
			}), nil),
			want: &metadataPatch{Labels: map[string]*string{
				agentsv1beta1.LabelClaimUID:        str("c1"),
				agentsv1beta1.LabelWarmPoolSandbox: nil,
			}},
		},
		"changed template value": {
			sb: sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"app": "v2"}
			}),
			pod: desiredPod(sandbox(func(sb *agentsv1beta1.Sandbox) {
				sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"app": "v1"}
			}), nil),
			want: &metadataPatch{Labels: map[string]*string{"app": str("v2")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := podMetadataPatch(tc.sb, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("patch does not encode: %v", err)
			}
		})
	}
}

func TestServicePorts(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{ContainerPort: 9090, Name: "metrics"}}},
			{Name: "setup", Ports: []corev1.ContainerPort{{ContainerPort: 7777}}},
		},
		Containers: []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{
				{ContainerPort: 8080, Name: "http"},
				{ContainerPort: 53, Protocol: corev1.ProtocolUDP},
				{ContainerPort: 53, Protocol: corev1.ProtocolTCP},
			}},
			{Name: "b", Ports: []corev1.ContainerPort{
				{ContainerPort: 8080, Name: "dup"},                                 // same port and protocol: dropped
				{ContainerPort: 8081, Name: "http"},                                // name taken: generated
				{ContainerPort: 8080, Protocol: corev1.ProtocolSCTP, Name: "sctp"}, // other protocol: kept
			}},
		},
	}
	port := func(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, Protocol: proto, TargetPort: intstr.FromInt32(p)}
	}
	want := []corev1.ServicePort{
		port("metrics", 9090, corev1.ProtocolTCP),
		port("http", 8080, corev1.ProtocolTCP),
		port("p-53-udp", 53, corev1.ProtocolUDP),
		port("p-53-tcp", 53, corev1.ProtocolTCP),
		port("p-8081-tcp", 8081, corev1.ProtocolTCP),
		port("sctp", 8080, corev1.ProtocolSCTP),
	}
	if diff := cmp.Diff(want, servicePorts(spec)); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

func TestPodWake(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	with := func(m func(*corev1.Pod)) *corev1.Pod { p := base(); m(p); return p }
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s}
	}
	cases := map[string]struct {
		old, cur *corev1.Pod
		want     string
	}{
		"nothing that matters": {base(), with(func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }), wakeIgnored},
		"containers ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.ContainersReady, corev1.ConditionTrue)}
		}), wakeIgnored},
		"initialized": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodInitialized, corev1.ConditionTrue)}
		}), wakeIgnored},
		"scheduled":   {base(), with(func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), wakeDelayed},
		"ip assigned": {base(), with(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}} }), wakeDelayed},
		"unschedulable": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		}), wakeDelayed},
		"running":          {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), wakeDelayed},
		"deletion started": {base(), with(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), wakeDelayed},
		"ready": {base(), with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), wakeImmediate},
		"not ready anymore": {with(func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}
		}), base(), wakeImmediate},
		"succeeded": {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), wakeImmediate},
		"failed":    {base(), with(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), wakeImmediate},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := podWake(tc.old, tc.cur); got != tc.want {
				t.Errorf("podWake = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	running := func(ready bool, ip string) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
		if ip != "" {
			p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		return p
	}
	svc := &corev1.Service{}
	withService := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.Service = ptr.To(true) })
	suspended := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended })
	type want struct {
		ready           bool
		reason, message string
	}
	cases := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		pod  *corev1.Pod
		svc  *corev1.Service
		want want
	}{
		"no pod":            {sandbox(), nil, nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod does not exist"}},
		"pending":           {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod exists with phase: Pending"}},
		"running not ready": {sandbox(), running(false, "10.0.0.1"), nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Running but not Ready"}},
		"ready without ip":  {sandbox(), running(true, ""), nil, want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Running but not Ready"}},
		"ready":             {sandbox(), running(true, "10.0.0.1"), nil, want{true, agentsv1beta1.ReasonDependenciesReady, "Pod is Ready"}},
		"ready with service": {withService, running(true, "10.0.0.1"), svc,
			want{true, agentsv1beta1.ReasonDependenciesReady, "Pod is Ready; Service Exists"}},
		"ready, service missing": {withService, running(true, "10.0.0.1"), nil,
			want{false, agentsv1beta1.ReasonDependenciesNotReady, "Pod is Ready; Service sb does not exist"}},
		"succeeded":  {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, nil, want{false, agentsv1beta1.ReasonPodSucceeded, "Pod exists with phase: Succeeded"}},
		"failed":     {sandbox(), &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, nil, want{false, agentsv1beta1.ReasonPodFailed, "Pod exists with phase: Failed"}},
		"suspending": {suspended, running(true, "10.0.0.1"), nil, want{false, agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspending"}},
		"suspended":  {suspended, nil, nil, want{false, agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspended"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ready, reason, msg := readiness(tc.sb, tc.pod, tc.svc)
			if diff := cmp.Diff(tc.want, want{ready, reason, msg}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("readiness (-want +got):\n%s", diff)
			}
		})
	}
}

// A child's create event is no news to the Sandbox that created it; a Service of the same
// name is another object.
func TestChildCreateExpected(t *testing.T) {
	e := newExpectations(clocktesting.NewFakePassiveClock(planNow))
	owner := types.NamespacedName{Namespace: "ns", Name: "sb"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	e.expect(owner, createOf(pod))
	if e.observe(owner, createOf(svc)) {
		t.Error("a Service event consumed a pod expectation")
	}
	if !e.observe(owner, createOf(pod)) {
		t.Error("the expected pod create was not recognised")
	}
	if e.observe(owner, createOf(pod)) {
		t.Error("an expectation was consumed twice")
	}
}

// Suspended with someone else's pod of the Sandbox's name: the public project's messages, and
// nothing of that pod's scheduling reported as the Sandbox's.
func TestSuspendedWithAForeignPod(t *testing.T) {
	r := &sandboxReconciler{Clock: clocktesting.NewFakePassiveClock(planNow)}
	sb := sandbox(func(sb *agentsv1beta1.Sandbox) { sb.Spec.OperatingMode = agentsv1beta1.OperatingModeSuspended })
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: sb.Namespace},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.9"}}, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	r.setStatus(sb, foreign, nil)
	got := map[string][3]string{}
	for _, c := range sb.Status.Conditions {
		got[c.Type] = [3]string{string(c.Status), c.Reason, c.Message}
	}
	want := map[string][3]string{
		agentsv1beta1.ConditionSuspended: {"False", agentsv1beta1.ReasonPodNotOwned, "Refused to delete pod because it is not owned by this sandbox"},
		agentsv1beta1.ConditionReady:     {"False", agentsv1beta1.ReasonSandboxSuspended, "Sandbox is suspending"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}
