package policy_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// errorPaths lists an error list as "type field" strings, for comparing with cmp.
func errorPaths(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s %s", e.Type, e.Field))
	}
	return out
}

func TestValidateVolumeClaimTemplates(t *testing.T) {
	vct := func(name string, labels, annotations map[string]string) agentsv1beta1.PersistentVolumeClaimTemplate {
		return agentsv1beta1.PersistentVolumeClaimTemplate{EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{
			Name: name, Labels: labels, Annotations: annotations}}
	}
	many := make([]agentsv1beta1.PersistentVolumeClaimTemplate, policy.MaxVolumeClaimTemplates+1)
	for i := range many {
		many[i] = vct(fmt.Sprintf("v%d", i), nil, nil)
	}
	tests := map[string]struct {
		vcts []agentsv1beta1.PersistentVolumeClaimTemplate
		want []string
	}{
		"plain names and user keys pass": {
			vcts: []agentsv1beta1.PersistentVolumeClaimTemplate{vct("data", map[string]string{"team": "ml"}, map[string]string{"note": "x"})},
		},
		"the adoptable label is the operator's": {
			vcts: []agentsv1beta1.PersistentVolumeClaimTemplate{vct("data", map[string]string{agentsv1beta1.LabelAdoptable: "true"}, nil)},
			want: []string{"Forbidden spec.volumeClaimTemplates[0].metadata.labels[agents.x-k8s.io/adoptable]"},
		},
		"sandgate's identity labels are the operator's": {
			vcts: []agentsv1beta1.PersistentVolumeClaimTemplate{vct("data", map[string]string{agentsv1beta1.LabelSandboxUID: "u"}, nil)},
			want: []string{"Forbidden spec.volumeClaimTemplates[0].metadata.labels[sandgate.dev/sandbox-uid]"},
		},
		"reserved annotations too": {
			vcts: []agentsv1beta1.PersistentVolumeClaimTemplate{vct("data", nil, map[string]string{"kubernetes.io/x": "y"})},
			want: []string{"Forbidden spec.volumeClaimTemplates[0].metadata.annotations[kubernetes.io/x]"},
		},
		"duplicate and missing names": {
			vcts: []agentsv1beta1.PersistentVolumeClaimTemplate{vct("a", nil, nil), vct("a", nil, nil), vct("", nil, nil)},
			want: []string{"Duplicate value spec.volumeClaimTemplates[1].metadata.name", "Required value spec.volumeClaimTemplates[2].metadata.name"},
		},
		"too many": {
			vcts: many,
			want: []string{"Too many spec.volumeClaimTemplates"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := errorPaths(policy.ValidateVolumeClaimTemplates(tc.vcts, field.NewPath("spec", "volumeClaimTemplates")))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateClaimListsBoundsEnv(t *testing.T) {
	claim := builders.MakeClaim("c", "ns", "pool").Obj()
	for i := range policy.MaxClaimEnv {
		claim.Spec.Env = append(claim.Spec.Env, extv1beta1.EnvVar{Name: fmt.Sprintf("V%d", i)})
	}
	if errs := policy.ValidateClaimLists(claim); len(errs) != 0 {
		t.Fatalf("a claim at the limit was refused: %v", errs)
	}
	claim.Spec.Env = append(claim.Spec.Env, extv1beta1.EnvVar{Name: "ONE_MORE"})
	if diff := cmp.Diff([]string{"Too many spec.env"}, errorPaths(policy.ValidateClaimLists(claim))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestClaimMayNotSetContainerRuntimeAnnotations(t *testing.T) {
	path := field.NewPath("spec", "additionalPodMetadata")
	md := &agentsv1beta1.PodMetadata{Annotations: map[string]string{
		"io.kubernetes.cri-o.userns-mode":                   "host",
		"io.katacontainers.config.hypervisor.kernel_params": "x",
		"dev.gvisor.spec.mount.data.share":                  "shared",
		"io.containerd.runc.v2.options":                     "x",
		"team.example.com/owner":                            "ml",
	}}
	want := []string{
		"Forbidden spec.additionalPodMetadata.annotations[dev.gvisor.spec.mount.data.share]",
		"Forbidden spec.additionalPodMetadata.annotations[io.containerd.runc.v2.options]",
		"Forbidden spec.additionalPodMetadata.annotations[io.katacontainers.config.hypervisor.kernel_params]",
		"Forbidden spec.additionalPodMetadata.annotations[io.kubernetes.cri-o.userns-mode]",
	}
	if diff := cmp.Diff(want, errorPaths(policy.ValidateClaimPodMetadata(md, path))); diff != "" {
		t.Errorf("default prefixes (-want +got):\n%s", diff)
	}

	policy.SetRuntimeAnnotationPrefixes([]string{"team.example.com/"})
	t.Cleanup(func() { policy.SetRuntimeAnnotationPrefixes(nil) })
	want = []string{"Forbidden spec.additionalPodMetadata.annotations[team.example.com/owner]"}
	if diff := cmp.Diff(want, errorPaths(policy.ValidateClaimPodMetadata(md, path))); diff != "" {
		t.Errorf("configured prefixes (-want +got):\n%s", diff)
	}
}

// A claim's env is injected in time linear in its length: a long env under the limit must not
// make the fail-closed webhook slow. The check counts nothing and times nothing: it asks
// that the result is right at the limit, and the benchmark below shows the cost.
func TestEnvInjectionAtTheLimit(t *testing.T) {
	tmpl := builders.MakeTemplate("t", "ns").EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionOverrides).Env("", "V0", "template").Obj()
	claim := builders.MakeClaim("c", "ns", "pool").Obj()
	for i := range policy.MaxClaimEnv {
		claim.Spec.Env = append(claim.Spec.Env, extv1beta1.EnvVar{Name: fmt.Sprintf("V%d", i%(policy.MaxClaimEnv/2)), Value: fmt.Sprint(i)})
	}
	bp, errs := policy.ClaimBlueprint(tmpl, claim)
	if len(errs) != 0 {
		t.Fatalf("ClaimBlueprint: %v", errs)
	}
	env := bp.PodTemplate.Spec.Containers[0].Env
	if len(env) != policy.MaxClaimEnv/2 {
		t.Fatalf("got %d variables, want %d (each name once, later entries override)", len(env), policy.MaxClaimEnv/2)
	}
	if env[0].Name != "V0" || env[0].Value != fmt.Sprint(policy.MaxClaimEnv/2) {
		t.Errorf("V0 = %q, want the last entry's value %d", env[0].Value, policy.MaxClaimEnv/2)
	}
}

func BenchmarkClaimBlueprintEnv(b *testing.B) {
	tmpl := builders.MakeTemplate("t", "ns").EnvVarsInjectionPolicy(extv1beta1.EnvVarsInjectionAllowed).Obj()
	for _, n := range []int{100, 1000, 10000} {
		claim := builders.MakeClaim("c", "ns", "pool").Obj()
		for i := range n {
			claim.Spec.Env = append(claim.Spec.Env, extv1beta1.EnvVar{Name: fmt.Sprintf("V%d", i)})
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				policy.ClaimBlueprint(tmpl, claim)
			}
		})
	}
}
