package reconcilers

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

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

// A pod whose template propagates no metadata carries no record of propagated keys, and a
// bound pod then needs no write for it either: the record would be "{}" on every such pod.
func TestDesiredPodWithoutTemplateMetadata(t *testing.T) {
	pod := desiredPod(sandbox(), nil)
	if v, ok := pod.Annotations[annotationPropagatedKeys]; ok {
		t.Errorf("pod of a template without metadata has %s=%q, want none", annotationPropagatedKeys, v)
	}
	if p := podMetadataPatch(sandbox(), pod); !p.empty() {
		t.Errorf("patch of an up-to-date pod = %+v, want empty", p)
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
				Annotations: map[string]*string{"gone": nil, annotationPropagatedKeys: nil},
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

// An idle member the pool marked has a pod the autoscaler may evict; the claim's pod write
// removes the mark; a template that says itself keeps its value, and a Sandbox that is no
// pool member is never marked.
func TestPoolEvictionMark(t *testing.T) {
	marked := func(mutate ...func(*agentsv1beta1.Sandbox)) *agentsv1beta1.Sandbox {
		sb := poolMember("m", "h1", true, "1")
		sb.Annotations = map[string]string{AnnotationSafeToEvict: "true"}
		for _, f := range mutate {
			f(sb)
		}
		return sb
	}
	tests := map[string]struct {
		sb   *agentsv1beta1.Sandbox
		want string // the pod's annotation; "" for none
	}{
		"an idle marked member's pod is evictable": {sb: marked(), want: "true"},
		"an unmarked member's pod is not":          {sb: poolMember("m", "h1", true, "1")},
		"a bound member's pod is not": {sb: marked(func(sb *agentsv1beta1.Sandbox) {
			sb.Labels[agentsv1beta1.LabelClaimUID] = "claim"
		})},
		"a Sandbox no pool controls is not": {sb: marked(func(sb *agentsv1beta1.Sandbox) { sb.OwnerReferences = nil })},
		"the template's own value wins": {sb: marked(func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{AnnotationSafeToEvict: "false"}
		}), want: "false"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := desiredPod(tc.sb, nil).Annotations[AnnotationSafeToEvict]; got != tc.want {
				t.Errorf("pod annotation %s = %q, want %q", AnnotationSafeToEvict, got, tc.want)
			}
		})
	}

	// Claimed: the pod built for the idle member loses the mark in the claim's pod patch.
	idle := marked()
	pod := podOf(idle)
	bound := marked(func(sb *agentsv1beta1.Sandbox) {
		sb.Labels[agentsv1beta1.LabelClaimUID] = "claim"
		delete(sb.Labels, agentsv1beta1.LabelWarmPoolSandbox)
		delete(sb.Annotations, AnnotationSafeToEvict)
	})
	p := podMetadataPatch(bound, pod)
	if v, ok := p.Annotations[AnnotationSafeToEvict]; !ok || v != nil {
		t.Errorf("claim's pod patch %+v does not remove %s", p.Annotations, AnnotationSafeToEvict)
	}
	if p.Labels[agentsv1beta1.LabelClaimUID] == nil {
		t.Errorf("claim's pod patch %+v lacks the claim label: the mark must ride in the same patch", p.Labels)
	}
}
