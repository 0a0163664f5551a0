package webhooks

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// SandboxDefaulter defaults Sandboxes (the mutating half of the Sandbox webhooks; the binding
// guard is the validating half).
type SandboxDefaulter struct{}

var _ admission.Defaulter[*agentsv1beta1.Sandbox] = SandboxDefaulter{}

// Default applies DefaultSandbox.
func (SandboxDefaulter) Default(_ context.Context, sb *agentsv1beta1.Sandbox) error {
	DefaultSandbox(sb)
	return nil
}
