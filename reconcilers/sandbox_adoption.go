package reconcilers

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// What a child that a Sandbox did not create must be before the Sandbox runs it (see
// claimable): what the Sandbox would build, field for field, with nothing added. The API server
// fills defaults into what it stores (a container's terminationMessagePath, a Service's
// clusterIPs), so a stored spec is compared as a derivative of the wanted one: every field the
// wanted spec sets must be equal, and what it leaves unset may be defaulted. That alone would
// let a child add what the Sandbox never asked for (another container, a hostPath volume, a
// privileged security context), so the lists must be as long and the fields that widen what a
// pod may do must be equal, set or not.

// podSpecMatches reports whether have is want as the API server stores it.
func podSpecMatches(want, have *corev1.PodSpec) bool {
	have = withoutInjectedTokenVolume(want, have)
	if len(want.Containers) != len(have.Containers) || len(want.InitContainers) != len(have.InitContainers) ||
		len(want.Volumes) != len(have.Volumes) || len(have.EphemeralContainers) != 0 {
		return false
	}
	for i := range want.Containers {
		if !containerMatches(&want.Containers[i], &have.Containers[i]) {
			return false
		}
	}
	for i := range want.InitContainers {
		if !containerMatches(&want.InitContainers[i], &have.InitContainers[i]) {
			return false
		}
	}
	for i := range want.Volumes {
		if !equality.Semantic.DeepEqual(want.Volumes[i].HostPath, have.Volumes[i].HostPath) {
			return false
		}
	}
	sa := func(s *corev1.PodSpec) string {
		if s.ServiceAccountName == "" {
			return "default"
		}
		return s.ServiceAccountName
	}
	return want.HostNetwork == have.HostNetwork && want.HostPID == have.HostPID && want.HostIPC == have.HostIPC &&
		sa(want) == sa(have) &&
		equality.Semantic.DeepEqual(orZero(want.SecurityContext), orZero(have.SecurityContext)) &&
		equality.Semantic.DeepEqual(want.RuntimeClassName, have.RuntimeClassName) &&
		equality.Semantic.DeepEqual(want.AutomountServiceAccountToken, have.AutomountServiceAccountToken) &&
		equality.Semantic.DeepDerivative(*want, *have)
}

func containerMatches(want, have *corev1.Container) bool {
	return len(want.Env) == len(have.Env) && len(want.EnvFrom) == len(have.EnvFrom) &&
		len(want.VolumeMounts) == len(have.VolumeMounts) && len(want.Command) == len(have.Command) &&
		len(want.Args) == len(have.Args) &&
		equality.Semantic.DeepEqual(orZero(want.SecurityContext), orZero(have.SecurityContext))
}

// orZero is *p, or the zero value for nil: the API server stores a pod's unset security
// context as an empty one, which grants nothing more.
func orZero[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// withoutInjectedTokenVolume leaves out of have the service account token volume (and its
// mounts) that the ServiceAccount admission plugin adds to every pod that does not opt out,
// when want does not name it.
func withoutInjectedTokenVolume(want, have *corev1.PodSpec) *corev1.PodSpec {
	injected := func(name string) bool {
		if !strings.HasPrefix(name, "kube-api-access-") {
			return false
		}
		for _, v := range want.Volumes {
			if v.Name == name {
				return false
			}
		}
		return true
	}
	out := have.DeepCopy()
	out.Volumes = out.Volumes[:0]
	for _, v := range have.Volumes {
		if !injected(v.Name) {
			out.Volumes = append(out.Volumes, v)
		}
	}
	for _, list := range [][]corev1.Container{out.Containers, out.InitContainers} {
		for i := range list {
			mounts := list[i].VolumeMounts[:0]
			for _, m := range list[i].VolumeMounts {
				if !injected(m.Name) {
					mounts = append(mounts, m)
				}
			}
			list[i].VolumeMounts = mounts
		}
	}
	return out
}

// pvcSpecMatches reports whether have is want as stored: same size, class and modes, and no
// data source the Sandbox did not ask for (a PVC populated from someone's snapshot is theirs).
func pvcSpecMatches(want, have *corev1.PersistentVolumeClaimSpec) bool {
	return equality.Semantic.DeepEqual(want.DataSource, have.DataSource) &&
		equality.Semantic.DeepEqual(want.DataSourceRef, have.DataSourceRef) &&
		equality.Semantic.DeepDerivative(*want, *have)
}

// serviceSpecMatches reports whether have is the headless Service want describes, reachable
// from nowhere else.
func serviceSpecMatches(want, have *corev1.ServiceSpec) bool {
	return have.ClusterIP == corev1.ClusterIPNone && len(have.ExternalIPs) == 0 &&
		(have.Type == "" || have.Type == corev1.ServiceTypeClusterIP) && len(want.Ports) == len(have.Ports) &&
		equality.Semantic.DeepDerivative(*want, *have)
}
