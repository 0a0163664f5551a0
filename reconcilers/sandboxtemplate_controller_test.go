package reconcilers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
)

// template is template "tmpl", with the UID the API server gave it.
func template(mutate ...func(*builders.TemplateWrapper)) *extv1beta1.SandboxTemplate {
	w := builders.MakeTemplate("tmpl", "ns").UID("tmpl-uid")
	for _, m := range mutate {
		m(w)
	}
	return w.Obj()
}

func TestDesiredNetworkPolicy(t *testing.T) {
	port := intstr.FromInt32(443)
	own := &extv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
	}}}
	defaultIngress, defaultEgress := secureDefaultRules()
	tests := map[string]struct {
		tmpl        *extv1beta1.SandboxTemplate
		wantIngress []networkingv1.NetworkPolicyIngressRule
		wantEgress  []networkingv1.NetworkPolicyEgressRule
	}{
		"no rules: the secure default": {
			tmpl: template(), wantIngress: defaultIngress, wantEgress: defaultEgress,
		},
		"the template's rules, even empty ones (deny all ingress)": {
			tmpl:       template(func(w *builders.TemplateWrapper) { w.NetworkPolicy(own) }),
			wantEgress: own.Egress,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			np := desiredNetworkPolicy(tc.tmpl)
			if np.Name != "tmpl-network-policy" || np.Namespace != "ns" {
				t.Errorf("policy is %s/%s", np.Namespace, np.Name)
			}
			// The template's UID, not the 32-bit hash of its name: a colliding name selects nothing of it.
			wantSelector := map[string]string{agentsv1beta1.LabelTemplateUID: "tmpl-uid"}
			if diff := cmp.Diff(wantSelector, np.Spec.PodSelector.MatchLabels); diff != "" {
				t.Errorf("pod selector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes); diff != "" {
				t.Errorf("policy types (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantIngress, np.Spec.Ingress); diff != "" {
				t.Errorf("ingress (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEgress, np.Spec.Egress); diff != "" {
				t.Errorf("egress (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSameNetworkPolicySpec(t *testing.T) {
	port := intstr.FromInt32(443)
	want := desiredNetworkPolicy(template(func(w *builders.TemplateWrapper) {
		w.NetworkPolicy(&extv1beta1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}}})
	})).Spec
	tests := map[string]struct {
		mutate   func(*networkingv1.NetworkPolicySpec)
		wantSame bool
	}{
		"as written":                       {mutate: func(*networkingv1.NetworkPolicySpec) {}, wantSame: true},
		"as read back, protocol defaulted": {mutate: func(s *networkingv1.NetworkPolicySpec) { s.Egress[0].Ports[0].Protocol = ptr.To(corev1.ProtocolTCP) }, wantSame: true},
		"a rule removed":                   {mutate: func(s *networkingv1.NetworkPolicySpec) { s.Egress = nil }},
		"a selector label added":           {mutate: func(s *networkingv1.NetworkPolicySpec) { s.PodSelector.MatchLabels["x"] = "y" }},
		"a selector expression added": {mutate: func(s *networkingv1.NetworkPolicySpec) {
			s.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}
		}},
		"a policy type dropped": {mutate: func(s *networkingv1.NetworkPolicySpec) { s.PolicyTypes = s.PolicyTypes[:1] }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			have := want.DeepCopy()
			tc.mutate(have)
			if got := sameNetworkPolicySpec(have, &want); got != tc.wantSame {
				t.Errorf("same = %v, want %v", got, tc.wantSame)
			}
		})
	}
}

func TestNetworkPolicySpecPatch(t *testing.T) {
	have := &networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"extra": "x", "keep": "old"}}}
	want := &networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"keep": "new"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}
	got := networkPolicySpecPatch(have, want)
	wantPatch := map[string]any{
		"podSelector": map[string]any{"matchLabels": map[string]any{"extra": nil, "keep": "new"}, "matchExpressions": nil},
		"policyTypes": want.PolicyTypes,
		"ingress":     []networkingv1.NetworkPolicyIngressRule{},
		"egress":      []networkingv1.NetworkPolicyEgressRule{},
	}
	if diff := cmp.Diff(wantPatch, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}
