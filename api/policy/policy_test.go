package policy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	"github.com/sandgate-dev/sandgate/api/policy"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/testing/policycases"
)

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
		// The public controller's ApplySandboxSecureDefaults turns the token off for every
		// template; only DNS depends on the network policy.
		"the template's own rules: cluster DNS, no token": {
			tmpl:          builders.MakeTemplate("t", "ns").NetworkPolicy(&extv1beta1.NetworkPolicySpec{}).Obj(),
			wantAutomount: ptr.To(false),
		},
		"unmanaged: cluster DNS, no token": {
			tmpl:          builders.MakeTemplate("t", "ns").NetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged).Obj(),
			wantAutomount: ptr.To(false),
		},
		"unmanaged keeps a token the template asks for": {
			tmpl: func() *extv1beta1.SandboxTemplate {
				t := builders.MakeTemplate("t", "ns").NetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged).Obj()
				t.Spec.PodTemplate.Spec.AutomountServiceAccountToken = ptr.To(true)
				return t
			}(),
			wantAutomount: ptr.To(true),
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
	// The network policy decides the pod's DNS: two templates with the same blueprint but
	// different network policies are different versions.
	unmanaged := builders.MakeTemplate("t", "ns").NetworkPolicyManagement(extv1beta1.NetworkPolicyUnmanaged).Obj()
	if policy.TemplateHash(unmanaged) == policy.TemplateHash(tmpl) {
		t.Error("templates building different pods hash alike")
	}
}

// The claim injection rule, from the one table admission's and the claim controller's tests
// iterate too (internal/testing/policycases): the problems it reports, and the blueprint it builds when
// there are none.
func TestClaimBlueprint(t *testing.T) {
	envOf := func(bp agentsv1beta1.SandboxBlueprint) map[string][]corev1.EnvVar {
		out := map[string][]corev1.EnvVar{}
		for _, list := range [][]corev1.Container{bp.PodTemplate.Spec.InitContainers, bp.PodTemplate.Spec.Containers} {
			for _, c := range list {
				out[c.Name] = c.Env
			}
		}
		return out
	}
	for name, tc := range policycases.Cases() {
		t.Run(name, func(t *testing.T) {
			tmplBefore, claimBefore := tc.Template.DeepCopy(), tc.Claim.DeepCopy()
			bp, errs := policy.ClaimBlueprint(tc.Template, tc.Claim)
			if diff := cmp.Diff(tc.WantErrors, policycases.Errors(errs)); diff != "" {
				t.Fatalf("ClaimBlueprint errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.WantErrors, policycases.Errors(policy.ValidateClaimAgainstTemplate(tc.Claim, tc.Template))); diff != "" {
				t.Errorf("ValidateClaimAgainstTemplate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tmplBefore, tc.Template); diff != "" {
				t.Errorf("the template was changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(claimBefore, tc.Claim); diff != "" {
				t.Errorf("the claim was changed (-before +after):\n%s", diff)
			}
			if len(tc.WantErrors) > 0 {
				return
			}
			if tc.WantEnv != nil {
				if diff := cmp.Diff(tc.WantEnv, envOf(bp)); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
			}
			// The template's blueprint with the claim's additions, and nothing else.
			want := policy.TemplateBlueprint(tc.Template)
			for _, list := range [][]corev1.Container{want.PodTemplate.Spec.InitContainers, want.PodTemplate.Spec.Containers} {
				for i := range list {
					if env, ok := tc.WantEnv[list[i].Name]; ok {
						list[i].Env = env
					}
				}
			}
			md := &want.PodTemplate.ObjectMeta
			md.Labels = merged(md.Labels, tc.Claim.Spec.AdditionalPodMetadata.Labels)
			md.Annotations = merged(md.Annotations, tc.Claim.Spec.AdditionalPodMetadata.Annotations)
			for _, vct := range tc.Claim.Spec.VolumeClaimTemplates {
				if i := slices.IndexFunc(want.VolumeClaimTemplates, func(v agentsv1beta1.PersistentVolumeClaimTemplate) bool { return v.Name == vct.Name }); i >= 0 {
					want.VolumeClaimTemplates[i] = vct
				} else {
					want.VolumeClaimTemplates = append(want.VolumeClaimTemplates, vct)
				}
			}
			if diff := cmp.Diff(want, bp); diff != "" {
				t.Errorf("blueprint is not the template's with the claim's additions (-want +got):\n%s", diff)
			}
		})
	}
}

// merged is base with add's keys, nil when both are empty.
func merged(base, add map[string]string) map[string]string {
	if len(base)+len(add) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
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
