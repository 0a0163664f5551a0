package reconcilers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sandgate-dev/sandgate/internal/tracing"
	"github.com/sandgate-dev/sandgate/test/builders"
)

func TestBindPatchCarriesTheBindSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	r := &claimReconciler{Tracer: tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))}
	claim := builders.MakeClaim("c", "ns", "pool").UID("c-uid").Obj()
	member := builders.MakeSandbox("m", "ns").Obj()
	ctx, span := r.startBind(context.Background(), claim, "warm", "m")
	patch := r.tracedBind(ctx, bindPatch(claim, member))
	span.End()
	annotations := patch["metadata"].(map[string]any)["annotations"].(map[string]any)
	if got, want := annotations[tracing.Annotation], r.Tracer.Inject(ctx); got != want || got == "" {
		t.Errorf("bind patch trace context = %v, want %s", got, want)
	}
	if n := len(rec.Ended()); n != 1 || rec.Ended()[0].Name() != tracing.SpanBind {
		t.Errorf("spans = %v, want one %s", rec.Ended(), tracing.SpanBind)
	}
}

// With tracing off the claim path writes exactly what it writes without tracing.
func TestTracingOffChangesNoWrite(t *testing.T) {
	r := &claimReconciler{}
	claim := builders.MakeClaim("c", "ns", "pool").UID("c-uid").Obj()
	member := builders.MakeSandbox("m", "ns").Obj()
	ctx, span := r.startBind(context.Background(), claim, "warm", "m")
	if span.IsRecording() {
		t.Error("bind span recorded with tracing off")
	}
	if diff := cmp.Diff(bindPatch(claim, member), r.tracedBind(ctx, bindPatch(claim, member))); diff != "" {
		t.Errorf("bind patch changed (-want +got):\n%s", diff)
	}
	sb := builders.MakeSandbox("s", "ns").Obj()
	r.tracedCreate(ctx, sb)
	if _, ok := sb.Annotations[tracing.Annotation]; ok {
		t.Error("trace context set with tracing off")
	}
	r.traceReady(ctx, &claimStep{claim: claim, mem: &claimMemory{}}, "warm", time.Now())
}
