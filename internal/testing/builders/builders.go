// Package builders makes test objects of every kind sandgate handles, one builder per kind:
//
//	sb := builders.MakeSandbox("web", ns).Service(true).ContainerPort("main", 8080, corev1.ProtocolTCP, "http").Obj()
//
// Defaults are the smallest valid object: one container "main" running DefaultImage, which
// kwok's simulated nodes start like any other.
package builders

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// DefaultImage is the image of the default container; nothing pulls it under kwok.
const DefaultImage = "registry.example/agent:1"

// DefaultContainer is the name of the default container.
const DefaultContainer = "main"

func defaultPodSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: DefaultContainer, Image: DefaultImage}}}
}

// blueprint holds the builder methods shared by Sandbox and SandboxTemplate.
type blueprint struct {
	bp *agentsv1beta1.SandboxBlueprint
}

func (b blueprint) container(name string) *corev1.Container {
	spec := &b.bp.PodTemplate.Spec
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	spec.Containers = append(spec.Containers, corev1.Container{Name: name, Image: DefaultImage})
	return &spec.Containers[len(spec.Containers)-1]
}

func (b blueprint) containerPort(container string, port int32, proto corev1.Protocol, name string) {
	c := b.container(container)
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: proto})
}

func (b blueprint) env(container, name, value string) {
	c := b.container(container)
	c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
}

func (b blueprint) podLabel(k, v string) {
	if b.bp.PodTemplate.ObjectMeta.Labels == nil {
		b.bp.PodTemplate.ObjectMeta.Labels = map[string]string{}
	}
	b.bp.PodTemplate.ObjectMeta.Labels[k] = v
}

func (b blueprint) podAnnotation(k, v string) {
	if b.bp.PodTemplate.ObjectMeta.Annotations == nil {
		b.bp.PodTemplate.ObjectMeta.Annotations = map[string]string{}
	}
	b.bp.PodTemplate.ObjectMeta.Annotations[k] = v
}

// VolumeClaimTemplate returns a ReadWriteOnce PVC template of the given size.
func VolumeClaimTemplate(name, size string) agentsv1beta1.PersistentVolumeClaimTemplate {
	return agentsv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}

// SandboxWrapper builds a Sandbox.
type SandboxWrapper struct {
	agentsv1beta1.Sandbox
}

// MakeSandbox starts a Sandbox with one container.
func MakeSandbox(name, ns string) *SandboxWrapper {
	w := &SandboxWrapper{agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
	w.Spec.PodTemplate.Spec = defaultPodSpec()
	return w
}

func (w *SandboxWrapper) bp() blueprint { return blueprint{&w.Spec.SandboxBlueprint} }

// Obj returns the Sandbox.
func (w *SandboxWrapper) Obj() *agentsv1beta1.Sandbox { return &w.Sandbox }

// Label sets a label of the Sandbox.
func (w *SandboxWrapper) Label(k, v string) *SandboxWrapper {
	metav1.SetMetaDataLabel(&w.ObjectMeta, k, v)
	return w
}

// Annotation sets an annotation of the Sandbox.
func (w *SandboxWrapper) Annotation(k, v string) *SandboxWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// UID sets the Sandbox's UID, as the API server would.
func (w *SandboxWrapper) UID(uid types.UID) *SandboxWrapper { w.ObjectMeta.UID = uid; return w }

// ControlledBy adds a controller reference to owner, of kind gvk.
func (w *SandboxWrapper) ControlledBy(owner metav1.Object, gvk schema.GroupVersionKind) *SandboxWrapper {
	w.OwnerReferences = append(w.OwnerReferences, *metav1.NewControllerRef(owner, gvk))
	return w
}

// Blueprint replaces the Sandbox's blueprint (podTemplate, volumeClaimTemplates, ...).
func (w *SandboxWrapper) Blueprint(bp agentsv1beta1.SandboxBlueprint) *SandboxWrapper {
	w.Spec.SandboxBlueprint = bp
	return w
}

// Image sets the image of the default container.
func (w *SandboxWrapper) Image(image string) *SandboxWrapper {
	w.bp().container(DefaultContainer).Image = image
	return w
}

// ContainerPort adds a port to a container (created if missing).
func (w *SandboxWrapper) ContainerPort(container string, port int32, proto corev1.Protocol, name string) *SandboxWrapper {
	w.bp().containerPort(container, port, proto, name)
	return w
}

// Env adds an environment variable to a container (created if missing).
func (w *SandboxWrapper) Env(container, name, value string) *SandboxWrapper {
	w.bp().env(container, name, value)
	return w
}

// PodLabel sets a label of the podTemplate.
func (w *SandboxWrapper) PodLabel(k, v string) *SandboxWrapper { w.bp().podLabel(k, v); return w }

// PodAnnotation sets an annotation of the podTemplate.
func (w *SandboxWrapper) PodAnnotation(k, v string) *SandboxWrapper {
	w.bp().podAnnotation(k, v)
	return w
}

// Service sets spec.service.
func (w *SandboxWrapper) Service(on bool) *SandboxWrapper { w.Spec.Service = ptr.To(on); return w }

// VolumeClaimTemplate adds a PVC template of the given size.
func (w *SandboxWrapper) VolumeClaimTemplate(name, size string) *SandboxWrapper {
	w.Spec.VolumeClaimTemplates = append(w.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// ShutdownTime sets spec.shutdownTime.
func (w *SandboxWrapper) ShutdownTime(t time.Time) *SandboxWrapper {
	w.Spec.ShutdownTime = &metav1.Time{Time: t}
	return w
}

// ShutdownPolicy sets spec.shutdownPolicy.
func (w *SandboxWrapper) ShutdownPolicy(p agentsv1beta1.ShutdownPolicy) *SandboxWrapper {
	w.Spec.ShutdownPolicy = p
	return w
}

// OperatingMode sets spec.operatingMode.
func (w *SandboxWrapper) OperatingMode(m agentsv1beta1.OperatingMode) *SandboxWrapper {
	w.Spec.OperatingMode = m
	return w
}

// TemplateWrapper builds a SandboxTemplate.
type TemplateWrapper struct {
	extv1beta1.SandboxTemplate
}

// MakeTemplate starts a SandboxTemplate with one container.
func MakeTemplate(name, ns string) *TemplateWrapper {
	w := &TemplateWrapper{extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}}
	w.Spec.PodTemplate.Spec = defaultPodSpec()
	return w
}

func (w *TemplateWrapper) bp() blueprint { return blueprint{&w.Spec.SandboxBlueprint} }

// Obj returns the SandboxTemplate.
func (w *TemplateWrapper) Obj() *extv1beta1.SandboxTemplate { return &w.SandboxTemplate }

// UID sets the template's UID, as the API server would.
func (w *TemplateWrapper) UID(uid types.UID) *TemplateWrapper { w.ObjectMeta.UID = uid; return w }

// Image sets the image of the default container.
func (w *TemplateWrapper) Image(image string) *TemplateWrapper {
	w.bp().container(DefaultContainer).Image = image
	return w
}

// ContainerPort adds a port to a container (created if missing).
func (w *TemplateWrapper) ContainerPort(container string, port int32, proto corev1.Protocol, name string) *TemplateWrapper {
	w.bp().containerPort(container, port, proto, name)
	return w
}

// Env adds an environment variable to a container (created if missing).
func (w *TemplateWrapper) Env(container, name, value string) *TemplateWrapper {
	w.bp().env(container, name, value)
	return w
}

// PodLabel sets a label of the podTemplate.
func (w *TemplateWrapper) PodLabel(k, v string) *TemplateWrapper { w.bp().podLabel(k, v); return w }

// PodAnnotation sets an annotation of the podTemplate.
func (w *TemplateWrapper) PodAnnotation(k, v string) *TemplateWrapper {
	w.bp().podAnnotation(k, v)
	return w
}

// Service sets spec.service.
func (w *TemplateWrapper) Service(on bool) *TemplateWrapper { w.Spec.Service = ptr.To(on); return w }

// VolumeClaimTemplate adds a PVC template of the given size.
func (w *TemplateWrapper) VolumeClaimTemplate(name, size string) *TemplateWrapper {
	w.Spec.VolumeClaimTemplates = append(w.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// EnvVarsInjectionPolicy sets spec.envVarsInjectionPolicy.
func (w *TemplateWrapper) EnvVarsInjectionPolicy(p extv1beta1.EnvVarsInjectionPolicy) *TemplateWrapper {
	w.Spec.EnvVarsInjectionPolicy = p
	return w
}

// VolumeClaimTemplatesPolicy sets spec.volumeClaimTemplatesPolicy.
func (w *TemplateWrapper) VolumeClaimTemplatesPolicy(p extv1beta1.VolumeClaimTemplatesPolicy) *TemplateWrapper {
	w.Spec.VolumeClaimTemplatesPolicy = p
	return w
}

// NetworkPolicyManagement sets spec.networkPolicyManagement.
func (w *TemplateWrapper) NetworkPolicyManagement(m extv1beta1.NetworkPolicyManagement) *TemplateWrapper {
	w.Spec.NetworkPolicyManagement = m
	return w
}

// NetworkPolicy sets spec.networkPolicy.
func (w *TemplateWrapper) NetworkPolicy(np *extv1beta1.NetworkPolicySpec) *TemplateWrapper {
	w.Spec.NetworkPolicy = np
	return w
}

// PoolWrapper builds a SandboxWarmPool.
type PoolWrapper struct {
	extv1beta1.SandboxWarmPool
}

// MakePool starts a SandboxWarmPool of one replica of template.
func MakePool(name, ns, template string) *PoolWrapper {
	return &PoolWrapper{extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas:           ptr.To[int32](1),
			SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: template},
		},
	}}
}

// Obj returns the SandboxWarmPool.
func (w *PoolWrapper) Obj() *extv1beta1.SandboxWarmPool { return &w.SandboxWarmPool }

// Replicas sets spec.replicas.
func (w *PoolWrapper) Replicas(n int32) *PoolWrapper { w.Spec.Replicas = ptr.To(n); return w }

// UID sets the pool's UID, as the API server would.
func (w *PoolWrapper) UID(uid types.UID) *PoolWrapper { w.ObjectMeta.UID = uid; return w }

// UpdateStrategy sets spec.updateStrategy.type.
func (w *PoolWrapper) UpdateStrategy(s extv1beta1.UpdateStrategyType) *PoolWrapper {
	w.Spec.UpdateStrategy.Type = s
	return w
}

// ClaimWrapper builds a SandboxClaim.
type ClaimWrapper struct {
	extv1beta1.SandboxClaim
}

// MakeClaim starts a SandboxClaim on pool.
func MakeClaim(name, ns, pool string) *ClaimWrapper {
	return &ClaimWrapper{extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: pool}},
	}}
}

// Obj returns the SandboxClaim.
func (w *ClaimWrapper) Obj() *extv1beta1.SandboxClaim { return &w.SandboxClaim }

// Annotation sets an annotation of the claim.
func (w *ClaimWrapper) Annotation(k, v string) *ClaimWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// Label sets a label of the claim.
func (w *ClaimWrapper) Label(k, v string) *ClaimWrapper {
	metav1.SetMetaDataLabel(&w.ObjectMeta, k, v)
	return w
}

// UID sets the claim's UID, as the API server would.
func (w *ClaimWrapper) UID(uid types.UID) *ClaimWrapper { w.ObjectMeta.UID = uid; return w }

// Created sets metadata.creationTimestamp, which the API server sets on a real claim.
func (w *ClaimWrapper) Created(at time.Time) *ClaimWrapper {
	w.CreationTimestamp = metav1.NewTime(at)
	return w
}

// StatusSandbox sets status.sandbox.name: the Sandbox the claim reports bound to it.
func (w *ClaimWrapper) StatusSandbox(name string) *ClaimWrapper {
	w.Status.Sandbox.Name = name
	return w
}

// Env adds an environment variable for containerName ("" for every container).
func (w *ClaimWrapper) Env(name, value, containerName string) *ClaimWrapper {
	w.Spec.Env = append(w.Spec.Env, extv1beta1.EnvVar{Name: name, Value: value, ContainerName: containerName})
	return w
}

// VolumeClaimTemplate adds a PVC template of the given size.
func (w *ClaimWrapper) VolumeClaimTemplate(name, size string) *ClaimWrapper {
	w.Spec.VolumeClaimTemplates = append(w.Spec.VolumeClaimTemplates, VolumeClaimTemplate(name, size))
	return w
}

// PodLabel adds a label of spec.additionalPodMetadata.
func (w *ClaimWrapper) PodLabel(k, v string) *ClaimWrapper {
	if w.Spec.AdditionalPodMetadata.Labels == nil {
		w.Spec.AdditionalPodMetadata.Labels = map[string]string{}
	}
	w.Spec.AdditionalPodMetadata.Labels[k] = v
	return w
}

// PodAnnotation adds an annotation of spec.additionalPodMetadata.
func (w *ClaimWrapper) PodAnnotation(k, v string) *ClaimWrapper {
	if w.Spec.AdditionalPodMetadata.Annotations == nil {
		w.Spec.AdditionalPodMetadata.Annotations = map[string]string{}
	}
	w.Spec.AdditionalPodMetadata.Annotations[k] = v
	return w
}

func (w *ClaimWrapper) lifecycle() *extv1beta1.Lifecycle {
	if w.Spec.Lifecycle == nil {
		w.Spec.Lifecycle = &extv1beta1.Lifecycle{}
	}
	return w.Spec.Lifecycle
}

// ShutdownTime sets spec.lifecycle.shutdownTime.
func (w *ClaimWrapper) ShutdownTime(t time.Time) *ClaimWrapper {
	w.lifecycle().ShutdownTime = &metav1.Time{Time: t}
	return w
}

// TTLSecondsAfterFinished sets spec.lifecycle.ttlSecondsAfterFinished.
func (w *ClaimWrapper) TTLSecondsAfterFinished(s int32) *ClaimWrapper {
	w.lifecycle().TTLSecondsAfterFinished = ptr.To(s)
	return w
}

// ShutdownPolicy sets spec.lifecycle.shutdownPolicy.
func (w *ClaimWrapper) ShutdownPolicy(p extv1beta1.ClaimShutdownPolicy) *ClaimWrapper {
	w.lifecycle().ShutdownPolicy = p
	return w
}

// PodWrapper builds a bare Pod.
type PodWrapper struct {
	corev1.Pod
}

// MakePod starts a Pod with one container.
func MakePod(name, ns string) *PodWrapper {
	return &PodWrapper{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: defaultPodSpec()}}
}

// Label sets a label of the Pod.
func (w *PodWrapper) Label(k, v string) *PodWrapper {
	metav1.SetMetaDataLabel(&w.ObjectMeta, k, v)
	return w
}

// Obj returns the Pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }
