// Package tracing sets up OpenTelemetry traces for a component, off
// unless the standard environment asks for them: OTEL_TRACES_EXPORTER=otlp
// or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), with OTEL_TRACES_SAMPLER and the
// exporter's other variables as the SDK reads them. Off, the global
// provider is OpenTelemetry's no-op one, and a span costs next to
// nothing. W3C trace context is what crosses processes: traceparent in
// HTTP headers, and in CloudEvents as their distributed tracing
// extension.
package tracing

import (
	"context"
	"errors"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the one way trace context crosses processes: W3C
// traceparent and tracestate.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Enabled says whether the environment asks for traces.
func Enabled() bool {
	exporter := os.Getenv("OTEL_TRACES_EXPORTER")
	if exporter == "none" {
		return false
	}
	return exporter == "otlp" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup exports component's spans over OTLP (HTTP) when Enabled, and
// returns what flushes and stops them; else it does nothing.
func Setup(ctx context.Context, component string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator)
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("sftpgate-"+component)))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, err
	}
	// Bounded: an attribute's value, and a span's attributes and events,
	// whatever a request or a server says.
	limits := sdktrace.NewSpanLimits()
	limits.AttributeValueLengthLimit = 256
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits))
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

// Tracer is sftpgate's tracer, from the global provider (no-op unless
// Setup enabled one, or a test set one).
func Tracer() trace.Tracer { return otel.Tracer("github.com/sftpgate/sftpgate") }

// TraceID is the trace id of ctx's span, "" when it has none (tracing
// off): what log lines and audit records carry.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceParent is the W3C traceparent of ctx's span, "" when it has none
// (tracing off): what an object records of the span that made it, for
// the work another process does for it later to link to (LinkTo).
func TraceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	Propagator.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// LinkTo links a span to the one traceparent names, and to none when it
// names none: empty, or not a traceparent (it may be anyone's
// annotation).
func LinkTo(traceparent string) trace.SpanStartOption {
	sc := trace.SpanContextFromContext(Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
	if !sc.IsValid() {
		return trace.WithLinks()
	}
	return trace.WithLinks(trace.Link{SpanContext: sc})
}
