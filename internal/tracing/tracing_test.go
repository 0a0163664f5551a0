package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// clientSpan is a span of the SDK's, and the annotation it writes on the claim: the JSON of
// the W3C headers (clients/go/sandbox traceContextJSON).
func clientSpan(t *testing.T) (trace.SpanContext, map[string]string) {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("client").Start(context.Background(), "create_claim")
	defer span.End()
	tc := New(tp).Inject(ctx)
	if tc == "" {
		t.Fatal("no trace context injected")
	}
	return span.SpanContext(), map[string]string{Annotation: tc}
}

func recorder() (*tracetest.SpanRecorder, *Tracer) {
	rec := tracetest.NewSpanRecorder()
	return rec, New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
}

func TestSpansContinueTheAnnotatedTrace(t *testing.T) {
	parent, annotations := clientSpan(t)
	rec, tr := recorder()
	ctx, span := tr.Start(context.Background(), annotations, SpanBind)
	_, child := tr.Start(ctx, nil, SpanSandboxAdmission)
	child.End()
	End(span, errors.New("conflict"))
	tr.Record(context.Background(), annotations, SpanReady, time.Unix(10, 0), time.Unix(12, 0), nil)

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
		if s.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("%s is in trace %s, want the client's %s", s.Name(), s.SpanContext().TraceID(), parent.TraceID())
		}
	}
	if got := byName[SpanBind].Parent().SpanID(); got != parent.SpanID() {
		t.Errorf("bind's parent = %s, want the client's span %s", got, parent.SpanID())
	}
	if !byName[SpanBind].Parent().IsRemote() {
		t.Error("bind's parent is not remote")
	}
	if got := byName[SpanSandboxAdmission].Parent().SpanID(); got != byName[SpanBind].SpanContext().SpanID() {
		t.Errorf("admission's parent = %s, want the bind span", got)
	}
	if byName[SpanBind].Status().Code != codes.Error {
		t.Errorf("bind status = %v, want Error", byName[SpanBind].Status())
	}
	ready := byName[SpanReady]
	if ready.Parent().SpanID() != parent.SpanID() || !ready.StartTime().Equal(time.Unix(10, 0)) || !ready.EndTime().Equal(time.Unix(12, 0)) {
		t.Errorf("ready span: parent %s, %s to %s", ready.Parent().SpanID(), ready.StartTime(), ready.EndTime())
	}
}

func TestBadAnnotationsStartNewTraces(t *testing.T) {
	for name, value := range map[string]string{
		"not JSON":        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"no traceparent":  `{"tracestate":"a=b"}`,
		"bad traceparent": `{"traceparent":"zz"}`,
	} {
		t.Run(name, func(t *testing.T) {
			rec, tr := recorder()
			_, span := tr.Start(context.Background(), map[string]string{Annotation: value}, SpanClaimAdmission)
			span.End()
			if p := rec.Ended()[0].Parent(); p.IsValid() {
				t.Errorf("parent %v from a bad annotation", p)
			}
		})
	}
}

func TestInjectWritesTheSDKFormat(t *testing.T) {
	_, tr := recorder()
	ctx, span := tr.Start(context.Background(), nil, SpanBind)
	defer span.End()
	want := `{"traceparent":"00-` + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + `-01"}`
	if got := tr.Inject(ctx); got != want {
		t.Errorf("Inject = %s, want %s", got, want)
	}
	if got := tr.Inject(context.Background()); got != "" {
		t.Errorf("Inject without a span = %q, want empty", got)
	}
}

// Tracing off is a nil Tracer: nothing is recorded, read or allocated.
func TestNilTracerIsOff(t *testing.T) {
	var tr *Tracer
	_, annotations := clientSpan(t)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tr.Start(ctx, annotations, SpanBind)
		End(span, nil)
		tr.Record(c, annotations, SpanReady, time.Time{}, time.Time{}, nil)
		_ = tr.Inject(c)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per traced step with tracing off, want 0", allocs)
	}
	if tr.Enabled() || New(nil) != nil {
		t.Error("a nil Tracer or provider is not off")
	}
}

// Setup makes an exporter from the environment without reaching the collector.
func TestSetupFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SERVICE_NAME", "sandgate-test")
	tp, err := Setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = tp.Shutdown(ctx) // nothing to send
}
