//go:build integration

package certmanager_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sandgate-dev/sandgate/test/env/controlplane"
)

// localPod is a container of an installed Deployment, run as a process on this host the way
// the kubelet would run it in a pod: the same command line with the pod's environment
// expanded, its Secret volumes projected into local directories instead of mountPaths, and
// its container ports on free loopback ports instead of the pod's IP.
type localPod struct {
	// Args is the container's command (after the binary) and args, rewritten as described.
	Args []string
	// Ports maps each container port name to the loopback port that stands in for it.
	Ports map[string]int
	// Secrets maps each Secret mounted as a volume to the local directory standing in for the
	// mount; the caller keeps it in sync (projectSecret).
	Secrets map[string]string
}

// podOf maps container name of d onto this host, with volumes under dir.
func podOf(t *testing.T, d *appsv1.Deployment, name, dir string) *localPod {
	t.Helper()
	spec := &d.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("Deployment %s has no container %s", d.Name, name)
	}
	pod := &localPod{Ports: map[string]int{}, Secrets: map[string]string{}}

	// $(VAR) references, from the downward API fields the pod gets.
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			vars[e.Name] = d.Namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.serviceAccountName":
			vars[e.Name] = spec.ServiceAccountName
		default:
			t.Fatalf("container %s: env %s comes from %+v, which this test cannot provide", c.Name, e.Name, e.ValueFrom)
		}
	}
	expand := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "$("+k+")", v)
		}
		return s
	}

	mounts := map[string]string{} // mountPath → local dir
	for _, m := range c.VolumeMounts {
		var secret string
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
		if secret == "" {
			t.Fatalf("container %s mounts volume %s, which is not a Secret volume this test can project", c.Name, m.Name)
		}
		local := filepath.Join(dir, m.Name)
		mounts[m.MountPath] = local
		pod.Secrets[secret] = local
	}

	local := map[int32]int{} // container port → loopback port
	for _, p := range c.Ports {
		local[p.ContainerPort] = freePort(t)
		pod.Ports[p.Name] = local[p.ContainerPort]
	}

	var args []string
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	for _, a := range append(args, c.Args...) {
		a = expand(a)
		name, value, ok := strings.Cut(a, "=")
		if ok {
			for path, dir := range mounts {
				if value == path || strings.HasPrefix(value, path+"/") {
					value = dir + strings.TrimPrefix(value, path)
				}
			}
			if port, err := strconv.Atoi(strings.TrimPrefix(value, ":")); err == nil && local[int32(port)] != 0 {
				switch {
				case strings.HasPrefix(value, ":"): // a bind address on all interfaces
					value = "127.0.0.1:" + strconv.Itoa(local[int32(port)])
				case name == "--webhook-port":
					value = strconv.Itoa(local[int32(port)])
				}
			}
			a = name + "=" + value
		}
		pod.Args = append(pod.Args, a)
	}
	// The pod's webhook server listens on all of the pod's interfaces: here, loopback only.
	pod.Args = append(pod.Args, "--webhook-host=127.0.0.1")
	return pod
}

// freePort reserves a TCP port on 127.0.0.1 (controlplane.ReservePort) for a child to listen on.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := controlplane.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
