package v1beta1

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func baseBlueprint() *SandboxBlueprint {
	return &SandboxBlueprint{
		PodTemplate: PodTemplate{
			ObjectMeta: PodMetadata{
				Labels:      map[string]string{"app": "agent", "team": "ml", "tier": "sandbox"},
				Annotations: map[string]string{"note": "x"},
			},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:  "agent",
					Image: "python:3.12",
					Env:   []corev1.EnvVar{{Name: "MODE", Value: "test"}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
					},
				}},
			},
		},
		VolumeClaimTemplates: []PersistentVolumeClaimTemplate{{
			EmbeddedObjectMetadata: EmbeddedObjectMetadata{Name: "workspace"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			},
		}},
		Service: ptr.To(true),
	}
}

// The hash is persisted in labels and annotations of live objects: if it changed between
// releases, every pool member would look stale and every stamped claim would stop matching.
func TestBlueprintHashIsPinned(t *testing.T) {
	const want = "9392ea0327b3217e91b1a7c1d983b063"
	if got := BlueprintHash(baseBlueprint()); got != want {
		t.Fatalf("BlueprintHash changed: got %q, want %q; an upgrade would mark every member stale", got, want)
	}
}

func TestBlueprintHashIgnoresMapOrder(t *testing.T) {
	want := BlueprintHash(baseBlueprint())
	for i := 0; i < 50; i++ {
		bp := baseBlueprint()
		// Rebuild the maps so Go's randomized iteration order differs from run to run.
		labels := map[string]string{}
		for _, k := range []string{"tier", "team", "app"} {
			labels[k] = bp.PodTemplate.ObjectMeta.Labels[k]
		}
		bp.PodTemplate.ObjectMeta.Labels = labels
		if got := BlueprintHash(bp); got != want {
			t.Fatalf("iteration %d: got %q, want %q", i, got, want)
		}
	}
}

func TestBlueprintHashChangesWithEveryField(t *testing.T) {
	base := BlueprintHash(baseBlueprint())
	cases := map[string]func(*SandboxBlueprint){
		"image":     func(b *SandboxBlueprint) { b.PodTemplate.Spec.Containers[0].Image = "python:3.13" },
		"env value": func(b *SandboxBlueprint) { b.PodTemplate.Spec.Containers[0].Env[0].Value = "prod" },
		"resources": func(b *SandboxBlueprint) {
			b.PodTemplate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		},
		"pod label":      func(b *SandboxBlueprint) { b.PodTemplate.ObjectMeta.Labels["app"] = "other" },
		"pod annotation": func(b *SandboxBlueprint) { b.PodTemplate.ObjectMeta.Annotations["note"] = "y" },
		"added container": func(b *SandboxBlueprint) {
			b.PodTemplate.Spec.Containers = append(b.PodTemplate.Spec.Containers, corev1.Container{Name: "side"})
		},
		"pod spec field":       func(b *SandboxBlueprint) { b.PodTemplate.Spec.RuntimeClassName = ptr.To("gvisor") },
		"volume claim name":    func(b *SandboxBlueprint) { b.VolumeClaimTemplates[0].Name = "data" },
		"volume claim removed": func(b *SandboxBlueprint) { b.VolumeClaimTemplates = nil },
		"service false":        func(b *SandboxBlueprint) { b.Service = ptr.To(false) },
		"service unset":        func(b *SandboxBlueprint) { b.Service = nil },
	}
	seen := map[string]string{base: "base"}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			bp := baseBlueprint()
			mutate(bp)
			got := BlueprintHash(bp)
			if got == base {
				t.Fatalf("hash did not change")
			}
			if other, dup := seen[got]; dup {
				t.Fatalf("hash %q equals the hash of case %q", got, other)
			}
			seen[got] = name
		})
	}
}

func TestBlueprintHashIsALabelValue(t *testing.T) {
	got := BlueprintHash(baseBlueprint())
	if len(got) != 32 {
		t.Fatalf("len(%q) = %d, want 32 (128 bits)", got, len(got))
	}
	for _, r := range got {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			t.Fatalf("%q is not lowercase hex", got)
		}
	}
}

func TestNameHash(t *testing.T) {
	// FNV-1a 32 of the empty string is the offset basis; "a" is a published test vector.
	cases := map[string]string{"": "811c9dc5", "a": "e40c292c", "foobar": "bf9cf968"}
	for in, want := range cases {
		if got := NameHash(in); got != want {
			t.Errorf("NameHash(%q) = %q, want %q", in, got, want)
		}
	}
	if NameHash("pool-a") == NameHash("pool-b") {
		t.Errorf("different names share a hash")
	}
}

func TestIsReservedKey(t *testing.T) {
	cases := map[string]bool{
		"agents.x-k8s.io/claim-uid":           true,
		"extensions.agents.x-k8s.io/anything": true,
		"sub.agents.x-k8s.io/x":               true,
		"app":                                 false,
		"example.com/agents.x-k8s.io":         false,
		"notagents.x-k8s.io/x":                false,
		"agents.x-k8s.io.example.com/x":       false,
		"kubernetes.io/hostname":              false,
	}
	for key, want := range cases {
		if got := IsReservedKey(key); got != want {
			t.Errorf("IsReservedKey(%q) = %v, want %v", key, got, want)
		}
	}
}
