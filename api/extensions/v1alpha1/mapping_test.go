package v1alpha1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	extv1alpha1 "github.com/sandgate-dev/sandgate/api/extensions/v1alpha1"
	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1alpha1 "github.com/sandgate-dev/sandgate/api/v1alpha1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

func claimUp(t *testing.T, in *extv1alpha1.SandboxClaim) *extv1beta1.SandboxClaim {
	t.Helper()
	out := &extv1beta1.SandboxClaim{}
	if err := in.ConvertTo(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func claimDown(t *testing.T, in *extv1beta1.SandboxClaim) *extv1alpha1.SandboxClaim {
	t.Helper()
	out := &extv1alpha1.SandboxClaim{}
	if err := out.ConvertFrom(in); err != nil {
		t.Fatal(err)
	}
	return out
}

func policy(p extv1alpha1.WarmPoolPolicy) *extv1alpha1.WarmPoolPolicy { return &p }

// A v1alpha1 claim is served from the pool its warmpool names, else from its template's
// shadow pool; a v1alpha1 client reads back what it wrote.
func TestV1alpha1ClaimIsServedFromThePoolItNames(t *testing.T) {
	cases := map[string]struct {
		warmpool *extv1alpha1.WarmPoolPolicy
		wantPool string
	}{
		"a pool by name":        {policy("python-pool"), "python-pool"},
		"default":               {policy(extv1alpha1.WarmPoolPolicyDefault), "shadow-pool-python"},
		"none":                  {policy(extv1alpha1.WarmPoolPolicyNone), "shadow-pool-python"},
		"unset":                 {nil, "shadow-pool-python"},
		"a pool named like one": {policy("shadow-pool-other"), "shadow-pool-other"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			alpha := &extv1alpha1.SandboxClaim{Spec: extv1alpha1.SandboxClaimSpec{
				TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"},
				WarmPool:    tc.warmpool,
			}}
			beta := claimUp(t, alpha)
			if beta.Spec.WarmPoolRef.Name != tc.wantPool {
				t.Errorf("warmPoolRef = %q, want %q", beta.Spec.WarmPoolRef.Name, tc.wantPool)
			}
			back := claimDown(t, beta)
			if diff := cmp.Diff(alpha.Spec, back.Spec); diff != "" {
				t.Errorf("read back through v1alpha1 (-wrote +read):\n%s", diff)
			}
			if len(back.Annotations) != 0 {
				t.Errorf("annotations read back = %v, want none", back.Annotations)
			}
		})
	}
}

// A claim written through v1beta1 reads, through v1alpha1, as the pool it names: a shadow pool
// as its template with warmpool default, any other pool as warmpool <pool> (a claim does not
// record its pool's template).
func TestV1beta1ClaimReadsAsItsPool(t *testing.T) {
	cases := map[string]struct {
		pool string
		want extv1alpha1.SandboxClaimSpec
	}{
		"a pool": {"python-pool", extv1alpha1.SandboxClaimSpec{WarmPool: policy("python-pool")}},
		"a shadow pool": {"shadow-pool-python", extv1alpha1.SandboxClaimSpec{
			TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"}, WarmPool: policy(extv1alpha1.WarmPoolPolicyDefault)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			beta := &extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: tc.pool}}}
			alpha := claimDown(t, beta)
			if diff := cmp.Diff(tc.want, alpha.Spec); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got := claimUp(t, alpha).Spec.WarmPoolRef.Name; got != tc.pool {
				t.Errorf("written back, warmPoolRef = %q, want %q", got, tc.pool)
			}
		})
	}
}

// v1alpha1 has no volumeClaimTemplates on claims: a v1alpha1 client's update keeps them.
func TestV1alpha1UpdateKeepsAClaimsVolumeClaimTemplates(t *testing.T) {
	vcts := []agentsv1beta1.PersistentVolumeClaimTemplate{{
		EmbeddedObjectMetadata: agentsv1beta1.EmbeddedObjectMetadata{Name: "workspace"},
		Spec:                   corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}}
	beta := &extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: "p"}, VolumeClaimTemplates: vcts}}
	alpha := claimDown(t, beta)
	if alpha.Annotations[agentsv1alpha1.AnnotationV1beta1Fields] == "" {
		t.Fatalf("the v1alpha1 claim does not carry its volume claim templates: annotations %v", alpha.Annotations)
	}
	alpha.Spec.Env = append(alpha.Spec.Env, extv1alpha1.EnvVar{Name: "MODE", Value: "x"})
	updated := claimUp(t, alpha)
	if diff := cmp.Diff(vcts, updated.Spec.VolumeClaimTemplates); diff != "" {
		t.Errorf("volumeClaimTemplates after a v1alpha1 update (-want +got):\n%s", diff)
	}
	if len(updated.Annotations) != 0 {
		t.Errorf("v1beta1 annotations = %v, want none", updated.Annotations)
	}
}

// A saved template and warmpool are shown only while they still name the claim's pool.
func TestV1alpha1ClaimFieldsYieldToANewPool(t *testing.T) {
	alpha := &extv1alpha1.SandboxClaim{Spec: extv1alpha1.SandboxClaimSpec{
		TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"}, WarmPool: policy("python-pool")}}
	beta := claimUp(t, alpha)
	beta.Spec.WarmPoolRef.Name = "go-pool"
	got := claimDown(t, beta)
	if diff := cmp.Diff(extv1alpha1.SandboxClaimSpec{WarmPool: policy("go-pool")}, got.Spec); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTemplateVolumeClaimTemplatesPolicySurvivesV1alpha1(t *testing.T) {
	beta := &extv1beta1.SandboxTemplate{Spec: extv1beta1.SandboxTemplateSpec{VolumeClaimTemplatesPolicy: extv1beta1.VolumeClaimTemplatesOverrides}}
	alpha := &extv1alpha1.SandboxTemplate{}
	if err := alpha.ConvertFrom(beta); err != nil {
		t.Fatal(err)
	}
	alpha.Spec.EnvVarsInjectionPolicy = extv1alpha1.EnvVarsInjectionAllowed
	alpha.Spec.PodTemplate = agentsv1alpha1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i"}}}}
	back := &extv1beta1.SandboxTemplate{}
	if err := alpha.ConvertTo(back); err != nil {
		t.Fatal(err)
	}
	if back.Spec.VolumeClaimTemplatesPolicy != extv1beta1.VolumeClaimTemplatesOverrides || back.Spec.EnvVarsInjectionPolicy != extv1beta1.EnvVarsInjectionAllowed {
		t.Errorf("after a v1alpha1 update: volumeClaimTemplatesPolicy %q, envVarsInjectionPolicy %q; want Overrides, Allowed",
			back.Spec.VolumeClaimTemplatesPolicy, back.Spec.EnvVarsInjectionPolicy)
	}
}

func TestPoolReplicasAndUpdateStrategy(t *testing.T) {
	beta := &extv1beta1.SandboxWarmPool{Spec: extv1beta1.SandboxWarmPoolSpec{SandboxTemplateRef: extv1beta1.SandboxTemplateRef{Name: "t"}}}
	alpha := &extv1alpha1.SandboxWarmPool{}
	if err := alpha.ConvertFrom(beta); err != nil {
		t.Fatal(err)
	}
	if alpha.Spec.Replicas != 1 || alpha.Spec.UpdateStrategy != nil {
		t.Errorf("unset replicas and strategy read as %d, %v; want 1 (the default) and none", alpha.Spec.Replicas, alpha.Spec.UpdateStrategy)
	}
	alpha.Spec.Replicas = 3
	back := &extv1beta1.SandboxWarmPool{}
	if err := alpha.ConvertTo(back); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(back.Spec.Replicas, -1) != 3 {
		t.Errorf("replicas written through v1alpha1 = %v, want 3", ptr.Deref(back.Spec.Replicas, -1))
	}
}

// Claims the public project's webhook stored from v1alpha1 keep their template when read
// through sandgate's v1alpha1.
func TestClaimsStoredByThePublicProjectReadBackAsWritten(t *testing.T) {
	state := `{"metadata":{"name":"c"},"spec":{"sandboxTemplateRef":{"name":"python"},"warmpool":"none"}}`
	beta := &extv1beta1.SandboxClaim{Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.WarmPoolRef{Name: "shadow-pool-python"}}}
	beta.Annotations = map[string]string{extv1alpha1.UpstreamClaimStateAnnotation: state, "keep": "me"}
	alpha := claimDown(t, beta)
	want := extv1alpha1.SandboxClaimSpec{TemplateRef: extv1alpha1.SandboxTemplateRef{Name: "python"}, WarmPool: policy(extv1alpha1.WarmPoolPolicyNone)}
	if diff := cmp.Diff(want, alpha.Spec); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"keep": "me"}, alpha.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	// Pointing elsewhere, the saved state no longer holds.
	beta.Spec.WarmPoolRef.Name = "other"
	if got := claimDown(t, beta); got.Spec.TemplateRef.Name != "" || string(*got.Spec.WarmPool) != "other" {
		t.Errorf("stale state used: %+v", got.Spec)
	}
}
