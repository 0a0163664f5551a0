package reconcilers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/reconcilers/indexes"
)

// annotationPropagatedKeys (on a Sandbox's pod) lists the label and annotation keys the
// controller copied from the podTemplate, so that keys removed from the template are removed
// from the pod too, while keys others put on the pod are left alone.
const annotationPropagatedKeys = agentsv1beta1.Domain + "propagated-keys"

// sandboxLabelsOnPod are the Sandbox labels its pod carries too (claim binding, pool
// membership, template reference, creator); the pod follows the Sandbox when they change.
// They are the operator's: the binding guard refuses anyone else's change to a reserved key
// of a Sandbox's metadata. A label the Sandbox's spec also sets (PodIdentityLabels) is taken
// from the spec.
var sandboxLabelsOnPod = []string{
	agentsv1beta1.LabelClaimUID,
	agentsv1beta1.LabelWarmPoolSandbox,
	agentsv1beta1.LabelSandboxTemplateRefHash,
	agentsv1beta1.LabelTemplateUID,
	agentsv1beta1.LabelCreatedBy,
}

// AnnotationSafeToEvict tells the cluster autoscaler whether it may evict a pod to scale a
// node down. The pods of idle warm pool members carry "true", as the public controller has it
// (--enable-warm-pool-eviction, on by default): they hold nothing yet and are replaced. A
// claimed member's pod loses it in the pod write that makes it look bound (report), so that
// the autoscaler leaves the pod of a claim alone.
//
// The pool marks each member it creates with the annotation on the Sandbox's metadata (the
// public controller writes it into the member's podTemplate, which here would change the
// blueprint the member's hash and the binding guard vouch for); the pod carries it while the
// Sandbox is an unbound member so marked (evictionMarked). A template that sets the
// annotation itself decides for its pods, idle or claimed: its members are not marked.
const AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// evictionMarked reports whether sb's pod carries AnnotationSafeToEvict "true" for the pool:
// sb is a pool member the pool marked, bound to no claim, whose template does not say.
func evictionMarked(sb *agentsv1beta1.Sandbox) bool {
	if sb.Annotations[AnnotationSafeToEvict] != "true" || sb.Labels[agentsv1beta1.LabelClaimUID] != "" ||
		policy.ControllerOf(sb, policy.PoolKind) == nil {
		return false
	}
	_, own := sb.Spec.PodTemplate.ObjectMeta.Annotations[AnnotationSafeToEvict]
	return !own
}

// ownedPods lists the pods controlled by sb, from the cache index.
func (r *sandboxReconciler) ownedPods(ctx context.Context, sb *agentsv1beta1.Sandbox) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(sb.Namespace), client.MatchingFields{indexes.PodController: sb.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of sandbox: %w", err)
	}
	out := pods.Items[:0]
	for _, p := range pods.Items {
		if isControlledBy(&p, sb) { // the index matches by name; a namesake's pods may linger
			out = append(out, p)
		}
	}
	return out, nil
}

// podNameFor is the pod's name: the pod-name annotation when set, else the Sandbox's name.
func podNameFor(sb *agentsv1beta1.Sandbox) string {
	if name := sb.Annotations[agentsv1beta1.AnnotationPodName]; name != "" {
		return name
	}
	return sb.Name
}

// ensurePod makes the pod match the operating mode: created (or adopted) and its metadata
// propagated when Running, deleted when Suspended. It returns the Sandbox's own pod, or the
// pod of its name someone else controls while Suspended (nothing to delete that is ours), and
// whether it created the pod just now.
//
// A Sandbox runs only a pod it built: a pod of its name that it does not control is adopted
// only when claimable says so; otherwise the Sandbox builds its own under a generated name,
// records it in the pod-name annotation and says so in a Warning event.
//
// pod is what lookupPod found. A lost pod (loss, see sandbox_podloss.go) that failed by
// eviction is deleted, so that its replacement can take the name.
func (r *sandboxReconciler) ensurePod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod, loss *podLoss, pvcs map[string]string, requeue *ctrl.Result) (*corev1.Pod, bool, error) {
	squatted := false
	if pod != nil && !isControlledBy(pod, sb) {
		want := desiredPod(sb, pvcs)
		switch {
		case claimable(sb, pod, func() bool { return podSpecMatches(&want.Spec, &pod.Spec) }):
			if err := r.adopt(ctx, sb, pod); err != nil {
				return nil, false, err
			}
		case sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended:
			return pod, false, nil // nothing to delete that is ours; status says PodNotOwned
		default:
			squatted = true
		}
	}

	if sb.Spec.OperatingMode == agentsv1beta1.OperatingModeSuspended ||
		(loss != nil && pod != nil && !squatted && loss.is(pod) && disrupted(pod)) {
		if pod != nil && pod.DeletionTimestamp.IsZero() {
			if err := r.deletePod(ctx, sb, pod); err != nil {
				return pod, false, err
			}
		}
		return pod, false, nil
	}

	if pod == nil || squatted {
		created, err := r.createPod(ctx, sb, pvcs, squatted)
		if err == nil {
			if squatted {
				r.nameTaken(sb, "Pod", pod.Name, created.Name)
			}
			err = r.recordPodName(ctx, sb, created)
		}
		return created, err == nil, err
	}
	if err := r.recordPodName(ctx, sb, pod); err != nil {
		return pod, false, err
	}
	if p := podMetadataPatch(sb, pod); pod.DeletionTimestamp.IsZero() && !p.empty() {
		if wait := r.bookkeepingWait(); wait > 0 {
			// Claims are arriving: the pod takes on its new metadata once they pause.
			*requeue = requeueWithin(*requeue, wait)
			return pod, false, nil
		}
		outcome, _, err := r.podViews.syncPodMetadata(ctx, r.Client, sb, pod)
		if err != nil {
			return pod, false, fmt.Errorf("patching pod metadata: %w", err)
		}
		if outcome == podMetadataStaleView {
			// The pod was written from a later Sandbox than this cache shows (the claim's
			// route write after its bind): its watch brings the later one.
			r.Metrics.podMetadataStaleView(sandboxControllerName)
			*requeue = requeueWithin(*requeue, retryAfterCacheCatchesUp)
		}
	}
	return pod, false, nil
}

// lookupPod returns the pod the Sandbox controls, or else the pod holding its pod name
// (someone else's, or an orphan), or nil.
func (r *sandboxReconciler) lookupPod(ctx context.Context, sb *agentsv1beta1.Sandbox, owned []corev1.Pod) (*corev1.Pod, error) {
	if len(owned) == 1 {
		return &owned[0], nil
	}
	pod := &corev1.Pod{}
	found, err := r.get(ctx, sb.Namespace, podNameFor(sb), pod)
	if err != nil || !found {
		return nil, err
	}
	return pod, nil
}

// deletePod deletes the Sandbox's pod and remembers that the controller did: its going is
// no loss.
func (r *sandboxReconciler) deletePod(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	r.pods.update(client.ObjectKeyFromObject(sb), func(m *podMemory) { m.deleted = pod.UID })
	return r.deleteOwned(ctx, pod)
}

// nameTaken reports that an object the Sandbox did not build holds the name of one of its
// children, so the child was built under another name.
func (r *sandboxReconciler) nameTaken(sb *agentsv1beta1.Sandbox, kind, taken, built string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, eventChildNameTaken, "Create",
			"%s %s exists and was not built for this Sandbox; built %s %s instead", kind, taken, kind, built)
	}
}

// bookkeepingWait is how long writes that can wait should wait for claims to pause; 0 to
// write now.
func (r *sandboxReconciler) bookkeepingWait() time.Duration {
	quiet, ok := r.activity.quietFor(r.Clock.Now())
	if !ok || quiet >= r.BookkeepingDelay {
		return 0
	}
	return r.BookkeepingDelay - quiet
}

// recordPodName writes the name of the Sandbox's pod into its agents.x-k8s.io/pod-name
// annotation, where clients of the public API look for it. The operator sets it when it
// creates a Sandbox, so this writes only for Sandboxes others created.
func (r *sandboxReconciler) recordPodName(ctx context.Context, sb *agentsv1beta1.Sandbox, pod *corev1.Pod) error {
	if sb.Annotations[agentsv1beta1.AnnotationPodName] == pod.Name {
		return nil
	}
	p := &metadataPatch{}
	p.setAnnotation(agentsv1beta1.AnnotationPodName, &pod.Name)
	// A bare copy takes the API server's answer: sb holds the status being worked out.
	target := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name}}
	if err := patchMetadata(ctx, r.Client, target, p); err != nil {
		return fmt.Errorf("recording the pod name: %w", err)
	}
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[agentsv1beta1.AnnotationPodName] = pod.Name
	return nil
}

func (r *sandboxReconciler) createPod(ctx context.Context, sb *agentsv1beta1.Sandbox, pvcs map[string]string, generateName bool) (*corev1.Pod, error) {
	pod := desiredPod(sb, pvcs)
	if generateName {
		pod.GenerateName, pod.Name = sb.Name+"-", ""
	}
	if err := ctrl.SetControllerReference(sb, pod, r.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("setting owner of pod: %w", err)
	}
	if rv := sb.ResourceVersion; rv != "" {
		// Its metadata is from this view of the Sandbox (podmetadata.go).
		pod.Annotations[annotationPodMetadataFrom] = rv
	}
	if err := r.create(ctx, pod); err != nil {
		return nil, fmt.Errorf("%w: %w", errPodCreate, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("created pod", "pod", klog.KObj(pod))
	return pod, nil
}

// desiredPod is the pod a Sandbox runs: its podTemplate with the PVC volumes merged in by
// name (pvcs maps a volume claim template's name to its PVC's name) and the metadata
// podMetadataPatch maintains afterwards.
func desiredPod(sb *agentsv1beta1.Sandbox, pvcs map[string]string) *corev1.Pod {
	labels, annotations, keys := desiredPodMetadata(sb)
	if keys != "" {
		annotations[annotationPropagatedKeys] = keys
	}
	spec := sb.Spec.PodTemplate.Spec.DeepCopy()
	for _, vct := range sb.Spec.VolumeClaimTemplates {
		claimName := pvcs[vct.Name]
		if claimName == "" {
			claimName = pvcName(vct.Name, sb.Name)
		}
		vol := corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
		}}
		if i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vct.Name }); i >= 0 {
			spec.Volumes[i] = vol
		} else {
			spec.Volumes = append(spec.Volumes, vol)
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        podNameFor(sb),
			Namespace:   sb.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: *spec,
	}
}

// propagatedKeys records which pod labels and annotations came from the podTemplate.
type propagatedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// desiredPodMetadata is what the pod's metadata must hold: the podTemplate's labels and
// annotations without reserved keys, the pool's eviction mark (evictionMarked), the identity
// labels (the Sandbox's UID, which its Service selects on; the template's,
// from the spec the operator built), the public name hash, and the Sandbox labels pods carry.
// keys is the encoded propagatedKeys of the template's part and the mark; "" when there are
// none, and then the pod carries no record.
func desiredPodMetadata(sb *agentsv1beta1.Sandbox) (labels, annotations map[string]string, keys string) {
	var pk propagatedKeys
	labels = policy.PodMetadataFromTemplate(sb.Spec.PodTemplate.ObjectMeta.Labels)
	annotations = policy.PodMetadataFromTemplate(sb.Spec.PodTemplate.ObjectMeta.Annotations)
	if evictionMarked(sb) {
		// Recorded with the template's keys, so that the pod loses it with the mark.
		annotations[AnnotationSafeToEvict] = "true"
	}
	pk.Labels = slices.Sorted(maps.Keys(labels))
	pk.Annotations = slices.Sorted(maps.Keys(annotations))
	for _, k := range sandboxLabelsOnPod {
		if v, ok := sb.Labels[k]; ok {
			labels[k] = v
		}
	}
	for _, k := range policy.PodIdentityLabels {
		if v, ok := sb.Spec.PodTemplate.ObjectMeta.Labels[k]; ok {
			labels[k] = v
		}
	}
	labels[agentsv1beta1.LabelSandboxNameHash] = agentsv1beta1.NameHash(sb.Name)
	labels[agentsv1beta1.LabelSandboxUID] = string(sb.UID)
	if len(pk.Labels) == 0 && len(pk.Annotations) == 0 {
		// Nothing propagated: the record is left off the pod (every pod of a template without
		// metadata would otherwise carry, store and send "{}").
		return labels, annotations, ""
	}
	data, _ := json.Marshal(pk) // a struct of string slices always encodes
	return labels, annotations, string(data)
}

// podMetadataPatch is the patch that brings pod's labels and annotations to what sb wants,
// touching only keys the controller manages; empty when nothing differs.
func podMetadataPatch(sb *agentsv1beta1.Sandbox, pod *corev1.Pod) *metadataPatch {
	labels, annotations, keys := desiredPodMetadata(sb)
	var previous propagatedKeys
	if raw := pod.Annotations[annotationPropagatedKeys]; raw != "" {
		// An unreadable record (edited by hand) only means stale keys are not removed.
		_ = json.Unmarshal([]byte(raw), &previous)
	}
	p := &metadataPatch{}
	for k, v := range labels {
		if cur, ok := pod.Labels[k]; !ok || cur != v {
			p.setLabel(k, &v)
		}
	}
	for _, k := range append(previous.Labels, sandboxLabelsOnPod...) {
		if _, want := labels[k]; !want {
			if _, has := pod.Labels[k]; has {
				p.setLabel(k, nil)
			}
		}
	}
	for k, v := range annotations {
		if cur, ok := pod.Annotations[k]; !ok || cur != v {
			p.setAnnotation(k, &v)
		}
	}
	for _, k := range previous.Annotations {
		if _, want := annotations[k]; !want {
			if _, has := pod.Annotations[k]; has {
				p.setAnnotation(k, nil)
			}
		}
	}
	if cur, has := pod.Annotations[annotationPropagatedKeys]; keys == "" && has {
		p.setAnnotation(annotationPropagatedKeys, nil)
	} else if keys != "" && cur != keys {
		p.setAnnotation(annotationPropagatedKeys, &keys)
	}
	return p
}

// ensureService creates, updates or deletes the headless Service as spec.service says and
// returns the Service the Sandbox has afterwards (nil when none). The Service is named after
// the Sandbox; when an object the Sandbox did not build holds that name, the Sandbox builds
// its Service under a generated name (status.service and serviceFQDN say which) and says so
// in a Warning event.
func (r *sandboxReconciler) ensureService(ctx context.Context, sb *agentsv1beta1.Sandbox) (*corev1.Service, error) {
	svc, foreign, err := r.ownService(ctx, sb)
	if err != nil {
		return nil, err
	}
	switch {
	case sb.Spec.Service == nil: // keep what exists, never create
		if svc != nil && svc.DeletionTimestamp.IsZero() {
			return svc, nil
		}
		return nil, nil
	case !*sb.Spec.Service:
		if svc != nil && svc.DeletionTimestamp.IsZero() {
			if err := r.deleteOwned(ctx, svc); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}

	want := desiredService(sb)
	if svc == nil && foreign != nil {
		if claimable(sb, foreign, func() bool { return serviceSpecMatches(&want.Spec, &foreign.Spec) }) {
			if err := r.adopt(ctx, sb, foreign); err != nil {
				return nil, err
			}
			svc = foreign
		}
	}
	if svc == nil {
		if foreign != nil {
			want.GenerateName, want.Name = sb.Name+"-", ""
		}
		if err := ctrl.SetControllerReference(sb, want, r.Client.Scheme()); err != nil {
			return nil, fmt.Errorf("setting owner of service: %w", err)
		}
		if err := r.create(ctx, want); err != nil {
			return nil, fmt.Errorf("creating service: %w", err)
		}
		if foreign != nil {
			r.nameTaken(sb, "Service", foreign.Name, want.Name)
		}
		return want, nil
	}
	if !svc.DeletionTimestamp.IsZero() {
		return nil, nil // recreated once it is gone
	}
	if !sameServiceSpec(svc, want) {
		body := map[string]any{"spec": map[string]any{"selector": want.Spec.Selector, "ports": want.Spec.Ports}}
		if err := mergePatch(ctx, r.Client, svc, body); err != nil {
			return nil, fmt.Errorf("patching service: %w", err)
		}
	}
	return svc, nil
}

// ownService finds the Service the Sandbox controls: the one named after it, or the one its
// status names (built under a generated name). foreign is the object of the Sandbox's name
// when the Sandbox does not control it.
func (r *sandboxReconciler) ownService(ctx context.Context, sb *agentsv1beta1.Sandbox) (own, foreign *corev1.Service, err error) {
	svc := &corev1.Service{}
	found, err := r.get(ctx, sb.Namespace, sb.Name, svc)
	switch {
	case err != nil:
		return nil, nil, err
	case found && isControlledBy(svc, sb):
		return svc, nil, nil
	case found:
		foreign = svc
	}
	if name := sb.Status.Service; name != "" && name != sb.Name {
		generated := &corev1.Service{}
		found, err := r.get(ctx, sb.Namespace, name, generated)
		if err != nil {
			return nil, nil, err
		}
		if found && isControlledBy(generated, sb) {
			return generated, foreign, nil
		}
	}
	return nil, foreign, nil
}

// desiredService is the headless Service of a Sandbox: selects its pod by the Sandbox's UID
// (and the public name hash, which alone could select a colliding name's pod) and exposes the
// ports its containers (and restartable init containers) declare.
func desiredService(sb *agentsv1beta1.Sandbox) *corev1.Service {
	selector := podSelector(sb)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      sb.Name,
			Namespace: sb.Namespace,
			Labels:    maps.Clone(selector),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selector,
			Ports:     servicePorts(&sb.Spec.PodTemplate.Spec),
		},
	}
}

// podSelector selects the Sandbox's pod: by its UID, which no other Sandbox's pod carries,
// and by the public name hash clients know.
func podSelector(sb *agentsv1beta1.Sandbox) map[string]string {
	return map[string]string{
		agentsv1beta1.LabelSandboxNameHash: agentsv1beta1.NameHash(sb.Name),
		agentsv1beta1.LabelSandboxUID:      string(sb.UID),
	}
}

// servicePorts derives Service ports from container ports, deduplicated by (port, protocol)
// and named by the container port's name, or p-<port>-<protocol> when it has none (or its
// name is taken).
func servicePorts(spec *corev1.PodSpec) []corev1.ServicePort {
	var containers []corev1.Container
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	containers = append(containers, spec.Containers...)

	type key struct {
		port  int32
		proto corev1.Protocol
	}
	seen := map[key]bool{}
	names := map[string]bool{}
	var ports []corev1.ServicePort
	for _, c := range containers {
		for _, cp := range c.Ports {
			proto := cp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			k := key{cp.ContainerPort, proto}
			if seen[k] {
				continue
			}
			seen[k] = true
			name := cp.Name
			if name == "" || names[name] {
				name = fmt.Sprintf("p-%d-%s", cp.ContainerPort, strings.ToLower(string(proto)))
			}
			names[name] = true
			ports = append(ports, corev1.ServicePort{
				Name:       name,
				Protocol:   proto,
				Port:       cp.ContainerPort,
				TargetPort: intstr.FromInt32(cp.ContainerPort),
			})
		}
	}
	return ports
}

// sameServiceSpec compares the fields the controller owns, ignoring what the API server
// defaults.
func sameServiceSpec(have, want *corev1.Service) bool {
	if !maps.Equal(have.Spec.Selector, want.Spec.Selector) || len(have.Spec.Ports) != len(want.Spec.Ports) {
		return false
	}
	for i, w := range want.Spec.Ports {
		h := have.Spec.Ports[i]
		if h.Name != w.Name || h.Protocol != w.Protocol || h.Port != w.Port || h.TargetPort != w.TargetPort {
			return false
		}
	}
	return true
}

// ensurePVCs creates (or adopts) the PVC of every volumeClaimTemplate and returns their
// names by template name. A PVC is named <template>-<sandbox>; when an object the Sandbox did
// not build holds that name, the Sandbox builds its PVC under a generated name and says so in a
// Warning event. PVCs are never deleted here: they outlive suspension and expiry, and go with
// the Sandbox.
func (r *sandboxReconciler) ensurePVCs(ctx context.Context, sb *agentsv1beta1.Sandbox) (map[string]string, error) {
	names := make(map[string]string, len(sb.Spec.VolumeClaimTemplates))
	for i := range sb.Spec.VolumeClaimTemplates {
		vct := &sb.Spec.VolumeClaimTemplates[i]
		name, err := r.ensurePVC(ctx, sb, vct)
		if err != nil {
			return nil, err
		}
		names[vct.Name] = name
	}
	return names, nil
}

func (r *sandboxReconciler) ensurePVC(ctx context.Context, sb *agentsv1beta1.Sandbox, vct *agentsv1beta1.PersistentVolumeClaimTemplate) (string, error) {
	name := pvcName(vct.Name, sb.Name)
	want := desiredPVC(sb, vct)
	pvc := &corev1.PersistentVolumeClaim{}
	found, err := r.get(ctx, sb.Namespace, name, pvc)
	if err != nil || (found && isControlledBy(pvc, sb)) {
		return name, err
	}
	if found {
		ok := claimable(sb, pvc, func() bool { return pvcSpecMatches(&want.Spec, &pvc.Spec) })
		if ok {
			var err error
			if ok, err = r.unmountedByOthers(ctx, sb, pvc.Name); err != nil {
				return "", err
			}
		}
		if ok {
			return name, r.adopt(ctx, sb, pvc)
		}
		// Someone else's PVC holds the name: the Sandbox's own has a generated one.
		var list corev1.PersistentVolumeClaimList
		if err := r.Client.List(ctx, &list, client.InNamespace(sb.Namespace), client.MatchingLabels{
			agentsv1beta1.LabelSandboxUID: string(sb.UID), labelVolumeClaimTemplate: vct.Name}); err != nil {
			return "", fmt.Errorf("listing persistentvolumeclaims of sandbox: %w", err)
		}
		for i := range list.Items {
			if isControlledBy(&list.Items[i], sb) {
				return list.Items[i].Name, nil
			}
		}
		want.GenerateName, want.Name = name+"-", ""
	}
	if err := ctrl.SetControllerReference(sb, want, r.Client.Scheme()); err != nil {
		return "", fmt.Errorf("setting owner of persistentvolumeclaim: %w", err)
	}
	if err := r.create(ctx, want); err != nil {
		return "", fmt.Errorf("creating persistentvolumeclaim %s: %w", name, err)
	}
	if found {
		r.nameTaken(sb, "PersistentVolumeClaim", name, want.Name)
	}
	return want.Name, nil
}

// labelVolumeClaimTemplate (PVC) names the volume claim template a PVC was built from, so a
// PVC built under a generated name is found again.
const labelVolumeClaimTemplate = agentsv1beta1.SandgateDomain + "volume-claim-template"

// desiredPVC is the PVC of a volume claim template: its metadata without reserved keys, the
// identity labels, and its spec.
func desiredPVC(sb *agentsv1beta1.Sandbox, vct *agentsv1beta1.PersistentVolumeClaimTemplate) *corev1.PersistentVolumeClaim {
	labels := policy.PVCMetadataFromTemplate(vct.Labels)
	maps.Copy(labels, podSelector(sb))
	labels[labelVolumeClaimTemplate] = vct.Name
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvcName(vct.Name, sb.Name), Namespace: sb.Namespace, Labels: labels,
			Annotations: policy.PVCMetadataFromTemplate(vct.Annotations)},
		Spec: *vct.Spec.DeepCopy(),
	}
}

func pvcName(vct, sandbox string) string { return vct + "-" + sandbox }

// claimable reports whether a child the Sandbox does not control may be adopted: it has no
// controller, it carries the Sandbox's own UID stamp (built for this Sandbox, then orphaned)
// or the public adoptable label (an explicit hand-over, say from the public controller), and
// its spec is what the Sandbox would build (matches). Nothing else is run: not a child that
// merely has the Sandbox's name or name hash.
func claimable(sb *agentsv1beta1.Sandbox, obj client.Object, matches func() bool) bool {
	if metav1.GetControllerOf(obj) != nil {
		return false
	}
	l := obj.GetLabels()
	stamped := l[agentsv1beta1.LabelSandboxUID] == string(sb.UID)
	return (stamped || l[agentsv1beta1.LabelAdoptable] == "true") && matches()
}

// unmountedByOthers reports whether no pod but the Sandbox's own mounts the PVC: a volume
// another pod still writes is never handed to a Sandbox.
func (r *sandboxReconciler) unmountedByOthers(ctx context.Context, sb *agentsv1beta1.Sandbox, pvc string) (bool, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(sb.Namespace)); err != nil {
		return false, fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if isControlledBy(p, sb) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc {
				return false, nil
			}
		}
	}
	return true, nil
}

// adopt makes sb the controller of obj. The patch is conditional on obj's resourceVersion:
// if someone else changed the owners meanwhile, adoption fails and is reconsidered.
func (r *sandboxReconciler) adopt(ctx context.Context, sb *agentsv1beta1.Sandbox, obj client.Object) error {
	owners := slices.Clone(obj.GetOwnerReferences())
	owners = append(owners, *metav1.NewControllerRef(sb, agentsv1beta1.GroupVersion.WithKind("Sandbox")))
	p := &metadataPatch{OwnerReferences: owners, ResourceVersion: obj.GetResourceVersion()}
	if err := patchMetadata(ctx, r.Client, obj, p); err != nil {
		return fmt.Errorf("adopting %s: %w", obj.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("adopted child", "child", klog.KObj(obj))
	return nil
}

// get reads from the cache; found is false when the object does not exist.
func (r *sandboxReconciler) get(ctx context.Context, ns, name string, obj client.Object) (bool, error) {
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) && r.uncachedChildren != nil {
		// The cache holds only tracked Pods and Services (Config.ScopedChildCaches): one
		// that does not carry the tracking label may still hold the name.
		switch obj.(type) {
		case *corev1.Pod, *corev1.Service:
			err = r.uncachedChildren.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		}
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return true, nil
}

// create creates a child (controlled by its Sandbox), telling the watch that the create
// event it will see is this one. A child this process created whose create event has not
// arrived yet is not sent again: create returns nil, as the child exists.
func (r *sandboxReconciler) create(ctx context.Context, obj client.Object) error {
	owner, ok := sandboxRequest(obj)
	if !ok || obj.GetName() == "" {
		// A generated name is known only once created: nothing to tell the watch in advance
		// (its create event brings the Sandbox back like any other).
		return r.Client.Create(ctx, obj)
	}
	if r.expected.inFlight(owner.NamespacedName, createOf(obj)) {
		// An earlier reconcile created it and the cache does not show it yet: the Sandbox was
		// woken meanwhile (a requeue, a label the binding wrote). A second create would be
		// answered 409 AlreadyExists.
		r.Metrics.createInFlight(kindOf(obj))
		return nil
	}
	if r.expected.hasLapsed(owner.NamespacedName) && r.APIReader != nil {
		// The cache is far behind this Sandbox's writes: the child may exist all the same. A
		// read tells, where a create would be answered 409.
		existing := obj.DeepCopyObject().(client.Object)
		switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), existing); {
		case err == nil:
			return apierrors.NewAlreadyExists(schema.GroupResource{Resource: strings.ToLower(kindOf(obj)) + "s"}, obj.GetName())
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading %s %s before creating it: %w", kindOf(obj), obj.GetName(), err)
		}
	}
	r.expected.expect(owner.NamespacedName, createOf(obj))
	err := r.Client.Create(ctx, obj)
	if err != nil {
		r.expected.observe(owner.NamespacedName, createOf(obj))
	}
	return err
}

// deleteOwned deletes a child the cache shows, on the condition that it is still the same
// object (a namesake created meanwhile survives).
func (r *sandboxReconciler) deleteOwned(ctx context.Context, obj client.Object) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	uid := obj.GetUID()
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", obj.GetName(), err)
	}
	return nil
}

func isControlledBy(obj client.Object, sb *agentsv1beta1.Sandbox) bool {
	return policy.IsControlledBy(obj, policy.SandboxKind, sb.UID)
}
