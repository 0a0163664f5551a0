package webhooks

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/tracing"
)

func spanRecorder() (*tracetest.SpanRecorder, *tracing.Tracer, map[string]string) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := sdktrace.NewTracerProvider().Tracer("client").Start(context.Background(), "create_claim")
	defer parent.End()
	return rec, tracing.New(tp), map[string]string{tracing.Annotation: tracing.New(tp).Inject(ctx)}
}

func TestClaimAdmissionSpanContinuesTheClient(t *testing.T) {
	rec, tr, annotations := spanRecorder()
	c := builders.MakeClaim("", "ns", "pool").Obj()
	c.GenerateName = "sandbox-claim-"
	c.Annotations = annotations
	_, span := startClaimAdmission(context.Background(), tr, "ns", c)
	span.End()
	got := rec.Ended()
	if len(got) != 1 || got[0].Name() != tracing.SpanClaimAdmission || !got[0].Parent().IsRemote() {
		t.Fatalf("spans %v, want one %s under the client's span", got, tracing.SpanClaimAdmission)
	}
	if _, span := startClaimAdmission(context.Background(), nil, "ns", c); span.IsRecording() {
		t.Error("a span recorded with tracing off")
	}
}

// The guard traces the writes that bind, and only those.
func TestBindAdmissionSpanOnlyForBinds(t *testing.T) {
	_, _, annotations := spanRecorder()
	member := builders.MakeSandbox("m", "ns").UID("m-uid").Obj()
	bound := builders.MakeSandbox("m", "ns").UID("m-uid").Label(agentsv1beta1.LabelClaimUID, "c-uid").Obj()
	bound.Annotations = annotations
	untraced := builders.MakeSandbox("m", "ns").UID("m-uid").Label(agentsv1beta1.LabelClaimUID, "c-uid").Obj()
	for name, tc := range map[string]struct {
		old, new *agentsv1beta1.Sandbox
		want     bool
	}{
		"warm bind":                  {member, bound, true},
		"cold start":                 {&agentsv1beta1.Sandbox{}, bound, true},
		"a later write of the bound": {bound, bound, false},
		"bind without trace context": {member, untraced, false},
		"a pool member's write":      {member, member, false},
	} {
		t.Run(name, func(t *testing.T) {
			rec, tr, _ := spanRecorder()
			_, span := startBindAdmission(context.Background(), tr, tc.old, tc.new)
			span.End()
			if got := len(rec.Ended()) == 1; got != tc.want {
				t.Errorf("traced = %v, want %v", got, tc.want)
			}
		})
	}
}
