package reconcilers

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	extv1beta1 "github.com/sandgate-dev/sandgate/api/extensions/v1beta1"
	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

// The claim controller's spans (internal/tracing): each bind attempt, and the claim's way
// from the controller's first sight to the status write that reports it Ready, children of
// the client's span when the claim carries its trace context. With tracing off (a nil
// Tracer) these return at once.

// startBind starts the span of one attempt to bind sandbox (a warm member) or create it
// (a cold start) for claim.
func (r *claimReconciler) startBind(ctx context.Context, claim *extv1beta1.SandboxClaim, launchType, sandbox string) (context.Context, trace.Span) {
	if !r.Tracer.Enabled() {
		return ctx, tracing.NoSpan
	}
	return r.Tracer.Start(ctx, claim.Annotations, tracing.SpanBind,
		attribute.String("k8s.namespace.name", claim.Namespace), attribute.String("sandboxclaim.name", claim.Name),
		attribute.String("sandbox.name", sandbox), attribute.String("launch_type", launchType))
}

// tracedBind adds the bind span's trace context to a bind patch, so that the binding guard's
// admission of it is the span's child and the Sandbox carries the trace, as the public
// controller's do.
func (r *claimReconciler) tracedBind(ctx context.Context, patch map[string]any) map[string]any {
	tc := r.Tracer.Inject(ctx)
	if tc == "" {
		return patch
	}
	md, _ := patch["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		patch["metadata"] = md
	}
	annotations, _ := md["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		md["annotations"] = annotations
	}
	annotations[tracing.Annotation] = tc
	return patch
}

// tracedCreate sets the bind span's trace context on a Sandbox about to be created.
func (r *claimReconciler) tracedCreate(ctx context.Context, sb *agentsv1beta1.Sandbox) {
	if tc := r.Tracer.Inject(ctx); tc != "" {
		if sb.Annotations == nil {
			sb.Annotations = map[string]string{}
		}
		sb.Annotations[tracing.Annotation] = tc
	}
}

// traceReady records the claim's span from the controller's first sight to now, when the
// status write reporting it Ready returned.
func (r *claimReconciler) traceReady(ctx context.Context, s *claimStep, launchType string, now time.Time) {
	if !r.Tracer.Enabled() {
		return
	}
	r.Tracer.Record(ctx, s.claim.Annotations, tracing.SpanReady, s.mem.firstSeen, now, nil,
		attribute.String("k8s.namespace.name", s.claim.Namespace), attribute.String("sandboxclaim.name", s.claim.Name),
		attribute.String("sandbox.name", s.claim.Status.Sandbox.Name), attribute.String("launch_type", launchType))
}
