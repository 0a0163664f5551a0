package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// Storage a real cluster has: a default StorageClass and volumes for PVCs to bind to, so that
// Sandboxes with volumeClaimTemplates get Bound PVCs and Running pods, and namespaces holding
// PVCs finish deleting (kube-controller-manager runs the PV binder and the PVC and PV
// protection controllers).
const (
	// DefaultStorageClass is the cluster's default StorageClass: no provisioner, immediate
	// binding to the pre-created PersistentVolumes. A PVC that names no class gets it.
	DefaultStorageClass = "standard"
	// DefaultPersistentVolumes is how many PersistentVolumes a cluster has when
	// Options.PersistentVolumes is 0: how many PVCs can be Bound at once.
	DefaultPersistentVolumes = 32
	// PersistentVolumeCapacity is the size of each PersistentVolume: PVCs asking for more
	// stay Pending.
	PersistentVolumeCapacity = "100Gi"
	// persistentVolumePrefix names the volumes local-pv-0 ... local-pv-<N-1>.
	persistentVolumePrefix = "local-pv-"
	// localVolumeLabel marks the volumes the cluster recycles.
	localVolumeLabel = "sandgate.dev/local-volume"
)

// kubeControllers are the kube-controller-manager controllers a cluster runs: garbage
// collection and namespace deletion, and what storage needs (binding PVCs to PVs, and the
// protection finalizers' removal once no pod uses a PVC and no PVC a PV).
var kubeControllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
}

// createStorage creates the default StorageClass and n hostPath PersistentVolumes (kwok's
// pods never touch them; the paths are under the cluster directory), keeping any that exist.
func (c *Cluster) createStorage(ctx context.Context, cs kubernetes.Interface, n int) error {
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultStorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", class.Name, err)
	}
	for i := range n {
		name := fmt.Sprintf("%s%d", persistentVolumePrefix, i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{localVolumeLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(PersistentVolumeCapacity)},
				AccessModes: []corev1.PersistentVolumeAccessMode{
					corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany,
				},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              DefaultStorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join(c.Dir, "volumes", name),
					Type: ptr.To(corev1.HostPathDirectoryOrCreate),
				}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}

// recycleVolumes makes the cluster's Released PersistentVolumes Available again (it clears
// their claimRef, as an administrator would) until stop is called, so that a few volumes
// serve any number of PVCs over time, as a dynamic provisioner's would. It returns once its
// watch has synced; stop ends the watch and waits for it.
func recycleVolumes(startCtx context.Context, cs kubernetes.Interface, logf func(string, ...any)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = localVolumeLabel + "=true" }))
	informer := factory.Core().V1().PersistentVolumes().Informer()
	recycle := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Status.Phase != corev1.VolumeReleased {
			return
		}
		// The precondition keeps a stale event from unbinding a volume bound again since.
		patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"claimRef":null}}`, pv.ResourceVersion)
		_, err := cs.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			logf("recycling PersistentVolume %s: %v", pv.Name, err)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    recycle,
		UpdateFunc: func(_, obj any) { recycle(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("watch PersistentVolumes: %w", err)
	}
	factory.Start(ctx.Done())
	stop = func() {
		cancel()
		factory.Shutdown()
	}
	if !cache.WaitForCacheSync(startCtx.Done(), informer.HasSynced) {
		stop()
		return nil, fmt.Errorf("watch PersistentVolumes: %w", startCtx.Err())
	}
	return stop, nil
}
