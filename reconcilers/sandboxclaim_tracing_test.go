package reconcilers

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
	"github.com/sandgate-dev/sandgate/internal/testing/builders"
	"github.com/sandgate-dev/sandgate/internal/tracing"
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

// One warm claim carrying the client's trace context: its bind and its Ready are spans of
// the client's trace, children of the client's span, and the bound Sandbox carries the bind
// span's context for the binding guard.
func TestWarmClaimTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := tracing.New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	clientCtx, client := sdktrace.NewTracerProvider().Tracer("client").Start(context.Background(), "create_claim")
	client.End()
	tmpl, pool := testTemplate(), testPool(1)
	claim := testClaim(tmpl, func(w *builders.ClaimWrapper) { w.Annotation(tracing.Annotation, tracer.Inject(clientCtx)) })
	member := readyMember(pool, tmpl, "pool-a", "10.0.0.1")
	a := newFakeAPI(t, tmpl, pool, claim, member, podOf(member))
	r := newClaimReconciler(t, a, clocktesting.NewFakeClock(planNow))
	r.Tracer = tracer
	observeSandboxes(t, a, r.Index)

	reconcileClaim(t, r)

	if !meta.IsStatusConditionTrue(getClaim(t, a).Status.Conditions, agentsv1beta1.ConditionReady) {
		t.Fatal("claim not Ready after one reconcile")
	}
	names := map[trace.SpanID]string{client.SpanContext().SpanID(): "client"}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID()] = s.Name()
	}
	got := map[string]string{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != client.SpanContext().TraceID() {
			t.Errorf("%s is not in the client's trace", s.Name())
		}
		got[s.Name()] = names[s.Parent().SpanID()]
	}
	want := map[string]string{tracing.SpanBind: "client", tracing.SpanReady: "client"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span -> parent (-want +got):\n%s", diff)
	}
	bound := claimSandboxes(t, a, claim.UID)
	if len(bound) != 1 {
		t.Fatalf("%d bound sandboxes", len(bound))
	}
	var bind sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == tracing.SpanBind {
			bind = s
		}
	}
	wantTC := `{"traceparent":"00-` + bind.SpanContext().TraceID().String() + "-" + bind.SpanContext().SpanID().String() + `-01"}`
	if tc := bound[0].Annotations[tracing.Annotation]; tc != wantTC {
		t.Errorf("bound Sandbox trace context = %s, want the bind span's %s", tc, wantTC)
	}
}
