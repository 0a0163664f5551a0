package webhooks

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

// startClaimAdmission starts the span of a new claim's admission, a child of the client's
// span when the claim carries its trace context. Its name may still be to be generated.
func startClaimAdmission(ctx context.Context, t *tracing.Tracer, ns string, c *extv1beta1.SandboxClaim) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, tracing.NoSpan
	}
	name := c.Name
	if name == "" {
		name = c.GenerateName + "*"
	}
	return t.Start(ctx, c.Annotations, tracing.SpanClaimAdmission,
		attribute.String("k8s.namespace.name", ns), attribute.String("sandboxclaim.name", name),
		attribute.String("sandboxwarmpool.name", c.Spec.WarmPoolRef.Name))
}

// startBindAdmission starts the span of the guard's admission of a write that binds a
// Sandbox to a claim (the claim-uid label appears), a child of the claim controller's bind
// span whose context the write carries; other writes get no span.
func startBindAdmission(ctx context.Context, t *tracing.Tracer, oldSB, newSB *agentsv1beta1.Sandbox) (context.Context, trace.Span) {
	if !t.Enabled() || newSB.Labels[agentsv1beta1.LabelClaimUID] == "" || oldSB.Labels[agentsv1beta1.LabelClaimUID] != "" ||
		newSB.Annotations[tracing.Annotation] == "" {
		return ctx, tracing.NoSpan
	}
	op := "bind"
	if oldSB.UID == "" {
		op = "create"
	}
	return t.Start(ctx, newSB.Annotations, tracing.SpanSandboxAdmission,
		attribute.String("k8s.namespace.name", newSB.Namespace), attribute.String("sandbox.name", newSB.Name),
		attribute.String("sandbox.operation", op))
}
