// Package tracing is sandgate's OpenTelemetry plumbing. A client of the public SDK creates a
// claim with its span's W3C trace context in the opentelemetry.io/trace-context annotation
// (JSON of the propagation headers, {"traceparent": "00-...-...-01"}); sandgate continues that
// trace with spans for the claim's admission, its bind (or cold start), the binding guard's
// admission of that write, and the claim becoming Ready.
//
// A nil *Tracer is tracing off: every method returns at once, reads no annotation and
// allocates nothing. --enable-tracing turns it on with an OTLP/gRPC exporter configured, as
// the public controller's is, by the standard OTEL_EXPORTER_OTLP_* environment variables.
package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Annotation is the key of the trace context on claims and Sandboxes: a JSON object of W3C
// Trace Context headers (traceparent, tracestate), as the public SDKs and controller write it.
const Annotation = "opentelemetry.io/trace-context"

// Span names.
const (
	// SpanClaimAdmission is the claim stamper's admission of a new claim.
	SpanClaimAdmission = "sandgate.admission.claim"
	// SpanSandboxAdmission is the binding guard's admission of a write that binds a Sandbox
	// to a claim (a warm bind patch or a cold start's create); its parent is the bind's span,
	// whose context the write carries in its Annotation.
	SpanSandboxAdmission = "sandgate.admission.sandbox"
	// SpanBind is one attempt of the claim controller to bind a warm member or cold-start a
	// Sandbox for the claim.
	SpanBind = "sandgate.claim.bind"
	// SpanReady runs from the claim controller's first sight of a claim to the status write
	// that reports it Ready.
	SpanReady = "sandgate.claim.ready"
)

// ServiceName is the service.name of sandgate's spans, unless OTEL_SERVICE_NAME says another.
const ServiceName = "sandgate"

// instrumentationName names sandgate's tracer.
const instrumentationName = "github.com/sandgate-dev/sandgate"

// Tracer starts sandgate's spans; nil is tracing off.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// New returns a Tracer of tp's spans; nil tp is tracing off (a nil Tracer).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	return &Tracer{tracer: tp.Tracer(instrumentationName), prop: propagation.TraceContext{}}
}

// NoSpan records nothing: the span of what is not traced, for callers that skip Start (and
// the attributes they would build) when tracing is off.
var NoSpan = trace.SpanFromContext(context.Background())

// Enabled reports whether spans are recorded.
func (t *Tracer) Enabled() bool { return t != nil }

// Start starts a span. Its parent is the trace context in annotations (Annotation) when
// there is a valid one, else the span in ctx. With tracing off it returns ctx and a span that
// records nothing.
func (t *Tracer) Start(ctx context.Context, annotations map[string]string, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, NoSpan
	}
	if parent, ok := t.extract(ctx, annotations[Annotation]); ok {
		ctx = parent
	}
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// extract returns ctx with the remote span context of an annotation value.
func (t *Tracer) extract(ctx context.Context, value string) (context.Context, bool) {
	if value == "" {
		return ctx, false
	}
	var carrier map[string]string
	if err := json.Unmarshal([]byte(value), &carrier); err != nil {
		return ctx, false
	}
	out := t.prop.Extract(ctx, propagation.MapCarrier(carrier))
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx, false
	}
	return out, true
}

// Inject returns the Annotation value of the span in ctx, "" with tracing off or without a
// span.
func (t *Tracer) Inject(ctx context.Context) string {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	data, err := json.Marshal(map[string]string(carrier))
	if err != nil {
		return ""
	}
	return string(data)
}

// End ends span, marking it failed with err.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Setup makes the OTLP/gRPC exporter and the tracer provider of --enable-tracing. The
// exporter reads its endpoint, TLS, headers and timeout from the OTEL_EXPORTER_OTLP_* (and
// OTEL_EXPORTER_OTLP_TRACES_*) environment variables, as the public controller's does; the
// resource's service.name is ServiceName unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise. Shut the provider down to flush its spans.
func Setup(ctx context.Context) (*sdktrace.TracerProvider, error) {
	exporter, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("describing the trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// Record records a span that already happened, from start to end, failed with err when
// not nil. Its parent is found as Start finds it.
func (t *Tracer) Record(ctx context.Context, annotations map[string]string, name string, start, end time.Time, err error, attrs ...attribute.KeyValue) {
	if t == nil {
		return
	}
	if parent, ok := t.extract(ctx, annotations[Annotation]); ok {
		ctx = parent
	}
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}
