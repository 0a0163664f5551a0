package reconcilers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// Objects more than one controller builds or reads: the Sandbox kind (pools create Sandboxes,
// claims create and bind them, and expectations name them), a pool's replicas (its controller
// fills it, a claim waits for it) and the Sandbox a template builds (a pool member, a claim's
// cold start).

// sandboxKind is the kind of a Sandbox, as owner references and expectation items name it.
const sandboxKind = "Sandbox"

// replicas is the number of unbound members pool keeps: spec.replicas, 1 when unset.
func replicas(pool *extv1beta1.SandboxWarmPool) int {
	if pool.Spec.Replicas == nil {
		return 1
	}
	return int(*pool.Spec.Replicas)
}

// sandboxFromTemplate is a Sandbox of template tmpl with blueprint bp (policy.TemplateBlueprint
// for a pool member, policy.ClaimBlueprint for a cold start): the blueprint and the template
// reference.
func sandboxFromTemplate(tmpl *extv1beta1.SandboxTemplate, bp agentsv1beta1.SandboxBlueprint) *agentsv1beta1.Sandbox {
	return &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{agentsv1beta1.LabelSandboxTemplateRefHash: agentsv1beta1.NameHash(tmpl.Name)},
			Annotations: map[string]string{agentsv1beta1.AnnotationSandboxTemplateRef: tmpl.Name},
		},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: bp},
	}
}
