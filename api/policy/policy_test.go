package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/test/builders"
)

func summary(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Type.String()+" "+e.Field)
	}
	return out
}

func TestTemplateBlueprint(t *testing.T) {
	tests := map[string]struct {
		tmpl          *extv1beta1.SandboxTemplate
		wantDNSPolicy corev1.DNSPolicy
		wantDNSConfig *corev1.PodDNSConfig
		wantAutomount *bool
	}{
		"secure default: public DNS, no token": {
			tmpl:          builders.MakeTemplate("t", "ns").Obj(),
			wantDNSPolicy: corev1.DNSNone,
			wantDNSConfig: &corev1.PodDNSConfig{Nameservers: policy.PublicNameservers},
			wantAutomount: ptr.To(false),
		},
		"secure default keeps what the template sets": {
			tmpl: func() *extv1beta1.SandboxTemplate {
				t := builders.MakeTemplate("t", "ns").Obj()
				t.Spec.PodTemplate.Spec.DNSPolicy = corev1.DNSClusterFirst
				t.Spec.PodTemplate.Spec.AutomountServiceAccountToken = ptr.To(true)
				return t
			}(),
			wantDNSPolicy: corev1.DNSClusterFirst,
			wantAutomount: ptr.To(true),
		},
		"the template's own rules: pod spec untouched": {
			tmpl: builders.MakeTemplate("t", "ns").NetworkPolicy(&extv1beta1.NetworkPolicySpec{}).Obj(),
		},
		"unmanaged: pod spec untouched": {
			tmpl: builders.MakeTemplate("t", "ns").NetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged).Obj(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.tmpl.DeepCopy()
			bp := policy.TemplateBlueprint(tc.tmpl)
			spec := bp.PodTemplate.Spec
			if spec.DNSPolicy != tc.wantDNSPolicy {
				t.Errorf("dnsPolicy = %q, want %q", spec.DNSPolicy, tc.wantDNSPolicy)
			}
			if diff := cmp.Diff(tc.wantDNSConfig, spec.DNSConfig); diff != "" {
				t.Errorf("dnsConfig (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAutomount, spec.AutomountServiceAccountToken); diff != "" {
				t.Errorf("automountServiceAccountToken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.tmpl); diff != "" {
				t.Errorf("the template itself was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// What the operator builds hashes to the template's hash, and anything else does not: the
// binding guard's content check rests on this.
func TestTemplateHashIsTheHashOfWhatIsBuilt(t *testing.T) {
	tmpl := builders.MakeTemplate("t", "ns").Obj()
	member := &agentsv1beta1.Sandbox{Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: policy.TemplateBlueprint(tmpl)}}
	if got, want := policy.SandboxHash(member), policy.TemplateHash(tmpl); got != want {
		t.Fatalf("SandboxHash of a member = %s, TemplateHash = %s", got, want)
	}
	edited := member.DeepCopy()
	edited.Spec.PodTemplate.Spec.Containers[0].Image = "attacker.example/evil:1"
	if policy.SandboxHash(edited) == policy.TemplateHash(tmpl) {
		t.Error("a member with another image hashes like the template")
	}
	// The network policy decides the pod's DNS and token: two templates with the same
	// blueprint but different network policies are different versions.
	unmanaged := builders.MakeTemplate("t", "ns").NetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged).Obj()
	if policy.TemplateHash(unmanaged) == policy.TemplateHash(tmpl) {
		t.Error("templates building different pods hash alike")
	}
}

// The one table of the claim injection rules: admission (422) and the claim controller
// (Ready=False) both apply policy.ClaimBlueprint, so a claim one accepts the other accepts.
func TestClaimBlueprint(t *testing.T) {
	tmpl := func(env extv1beta1.EnvVarsInjectionPolicy, vct extv1beta1.VolumeClaimTemplatesPolicy) *extv1beta1.SandboxTemplate {
		t := builders.MakeTemplate("t", "ns").Env("main", "SET", "x").VolumeClaimTemplate("data", "1Gi").PodLabel("team", "a").Obj()
		t.Spec.EnvVarsInjectionPolicy = env
		t.Spec.VolumeClaimTemplatesPolicy = vct
		t.Spec.PodTemplate.Spec.Containers = append(t.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
		t.Spec.PodTemplate.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
		return t
	}
	claim := func() *builders.ClaimWrapper { return builders.MakeClaim("c", "ns", "p") }
	envOf := func(bp agentsv1beta1.SandboxBlueprint) map[string][]corev1.EnvVar {
		out := map[string][]corev1.EnvVar{}
		for _, list := range [][]corev1.Container{bp.PodTemplate.Spec.InitContainers, bp.PodTemplate.Spec.Containers} {
			for _, c := range list {
				out[c.Name] = c.Env
			}
		}
		return out
	}
	set := corev1.EnvVar{Name: "SET", Value: "x"}
	tests := map[string]struct {
		claim   *extv1beta1.SandboxClaim
		tmpl    *extv1beta1.SandboxTemplate
		want    []string
		wantEnv map[string][]corev1.EnvVar
	}{
		"nothing injected": {claim: claim().Obj(), tmpl: tmpl("", ""),
			wantEnv: map[string][]corev1.EnvVar{"main": {set}, "side": nil, "init": nil}},
		"env disallowed by default": {claim: claim().Env("A", "1", "").Obj(), tmpl: tmpl("", ""), want: []string{"Forbidden spec.env"}},
		"env disallowed": {claim: claim().Env("A", "1", "").Obj(), tmpl: tmpl(extv1beta1.EnvVarsInjectionDisallowed, ""),
			want: []string{"Forbidden spec.env"}},
		"env without a container goes into every container, not the init containers": {
			claim: claim().Env("A", "1", "").Obj(), tmpl: tmpl(extv1beta1.EnvVarsInjectionAllowed, ""),
			wantEnv: map[string][]corev1.EnvVar{"main": {set, {Name: "A", Value: "1"}}, "side": {{Name: "A", Value: "1"}}, "init": nil}},
		"env for a named container or init container": {
			claim: claim().Env("A", "1", "side").Env("B", "2", "init").Obj(), tmpl: tmpl(extv1beta1.EnvVarsInjectionAllowed, ""),
			wantEnv: map[string][]corev1.EnvVar{"main": {set}, "side": {{Name: "A", Value: "1"}}, "init": {{Name: "B", Value: "2"}}}},
		"env for a container the template lacks": {claim: claim().Env("A", "1", "sidecar").Obj(),
			tmpl: tmpl(extv1beta1.EnvVarsInjectionOverrides, ""), want: []string{"Not found spec.env[0].containerName"}},
		"override needs Overrides": {claim: claim().Env("SET", "1", "").Obj(),
			tmpl: tmpl(extv1beta1.EnvVarsInjectionAllowed, ""), want: []string{"Forbidden spec.env[0].name"}},
		"override allowed": {claim: claim().Env("SET", "1", "main").Obj(), tmpl: tmpl(extv1beta1.EnvVarsInjectionOverrides, ""),
			wantEnv: map[string][]corev1.EnvVar{"main": {{Name: "SET", Value: "1"}}, "side": nil, "init": nil}},
		"a variable of another container is an addition": {claim: claim().Env("SET", "1", "init").Obj(),
			tmpl:    tmpl(extv1beta1.EnvVarsInjectionAllowed, ""),
			wantEnv: map[string][]corev1.EnvVar{"main": {set}, "side": nil, "init": {{Name: "SET", Value: "1"}}}},
		"Allowed does not inject where envFrom could be overridden unseen": {
			claim: claim().Env("A", "1", "main").Obj(),
			tmpl: func() *extv1beta1.SandboxTemplate {
				t := tmpl(extv1beta1.EnvVarsInjectionAllowed, "")
				t.Spec.PodTemplate.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}
				return t
			}(),
			want: []string{"Forbidden spec.env[0].name"}},
		"volume claim templates disallowed by default": {claim: claim().VolumeClaimTemplate("scratch", "1Gi").Obj(),
			tmpl: tmpl("", ""), want: []string{"Forbidden spec.volumeClaimTemplates"}},
		"volume claim template added": {claim: claim().VolumeClaimTemplate("scratch", "1Gi").Obj(),
			tmpl: tmpl("", extv1beta1.VolumeClaimTemplatesAllowed)},
		"volume claim template replaced needs Overrides": {claim: claim().VolumeClaimTemplate("data", "5Gi").Obj(),
			tmpl: tmpl("", extv1beta1.VolumeClaimTemplatesAllowed), want: []string{"Forbidden spec.volumeClaimTemplates[0].metadata.name"}},
		"volume claim template replaced": {claim: claim().VolumeClaimTemplate("data", "5Gi").Obj(),
			tmpl: tmpl("", extv1beta1.VolumeClaimTemplatesOverrides)},
		"pod metadata added": {claim: claim().PodLabel("user", "u1").PodLabel("team", "a").Obj(), tmpl: tmpl("", "")},
		"pod metadata may not change the template's": {claim: claim().PodLabel("team", "b").Obj(), tmpl: tmpl("", ""),
			want: []string{"Invalid value spec.additionalPodMetadata.labels[team]"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			bp, errs := policy.ClaimBlueprint(tc.tmpl, tc.claim)
			if diff := cmp.Diff(tc.want, summary(errs)); diff != "" {
				t.Fatalf("ClaimBlueprint errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, summary(policy.ValidateClaimAgainstTemplate(tc.claim, tc.tmpl))); diff != "" {
				t.Errorf("ValidateClaimAgainstTemplate (-want +got):\n%s", diff)
			}
			if tc.wantEnv != nil {
				if diff := cmp.Diff(tc.wantEnv, envOf(bp)); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
			}
			if len(tc.want) == 0 {
				for k, v := range tc.claim.Spec.AdditionalPodMetadata.Labels {
					if bp.PodTemplate.ObjectMeta.Labels[k] != v {
						t.Errorf("pod label %s = %q, want %q", k, bp.PodTemplate.ObjectMeta.Labels[k], v)
					}
				}
				if n := len(tc.claim.Spec.VolumeClaimTemplates); n > 0 && len(bp.VolumeClaimTemplates) == 0 {
					t.Error("volume claim templates not added")
				}
			}
		})
	}
}

func TestReservedKeys(t *testing.T) {
	for key, want := range map[string][2]bool{ // {template, claim}
		"agents.x-k8s.io/claim-uid":                              {true, true},
		"extensions.agents.x-k8s.io/anything":                    {true, true},
		"sub.agents.x-k8s.io/x":                                  {true, true},
		"kubernetes.io/egress-bandwidth":                         {true, true},
		"k8s.io/x":                                               {true, true},
		"container.apparmor.security.beta.kubernetes.io/main":    {false, true},
		"seccomp.security.alpha.kubernetes.io/pod":               {false, true},
		"node.k8s.io/x":                                          {false, true},
		"app.kubernetes.io/name":                                 {false, true},
		"kubectl.kubernetes.io/default-container":                {false, true},
		"cluster-autoscaler.kubernetes.io/safe-to-evict":         {false, false},
		"cluster-autoscaler.kubernetes.io/safe-to-evict-volumes": {false, true},
		"example.com/agents.x-k8s.io":                            {false, false},
		"notkubernetes.io/x":                                     {false, false},
		"app":                                                    {false, false},
		"notagents.x-k8s.io/x":                                   {false, false},
	} {
		if got := policy.IsReservedTemplateKey(key); got != want[0] {
			t.Errorf("IsReservedTemplateKey(%q) = %v, want %v", key, got, want[0])
		}
		if got := policy.IsReservedClaimKey(key); got != want[1] {
			t.Errorf("IsReservedClaimKey(%q) = %v, want %v", key, got, want[1])
		}
	}
	got := policy.PodMetadataFromTemplate(map[string]string{"app": "a", "agents.x-k8s.io/x": "y", "kubernetes.io/z": "z", "app.kubernetes.io/name": "n"})
	if diff := cmp.Diff(map[string]string{"app": "a", "app.kubernetes.io/name": "n"}, got); diff != "" {
		t.Errorf("PodMetadataFromTemplate (-want +got):\n%s", diff)
	}
}

// Only a controller reference of the right group and kind counts, whatever its name or UID.
func TestControllerOf(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "c", UID: "u1", Controller: ptr.To(controller)}
	}
	for name, tc := range map[string]struct {
		refs []metav1.OwnerReference
		want bool
	}{
		"the claim's":                         {refs: []metav1.OwnerReference{ref("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", true)}, want: true},
		"another version of the group":        {refs: []metav1.OwnerReference{ref("extensions.agents.x-k8s.io/v1alpha1", "SandboxClaim", true)}, want: true},
		"a made-up kind with the claim's UID": {refs: []metav1.OwnerReference{ref("example.com/v1", "SandboxClaim", true)}},
		"another kind of the group":           {refs: []metav1.OwnerReference{ref("extensions.agents.x-k8s.io/v1beta1", "Thing", true)}},
		"not the controller":                  {refs: []metav1.OwnerReference{ref("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim", false)}},
	} {
		obj := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.refs}}
		if got := policy.IsControlledBy(obj, policy.ClaimKind, "u1"); got != tc.want {
			t.Errorf("%s: IsControlledBy = %v, want %v", name, got, tc.want)
		}
	}
}
