package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// FuzzLinkTo: whatever a Transfer's traceparent annotation holds (anyone
// who may make a Transfer writes it), a span starts, linked to nothing
// or to the one valid span context the value names, which a span of
// that context gives back as its traceparent.
func FuzzLinkTo(f *testing.F) {
	for _, seed := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "\xff-", "--"} {
		f.Add(seed)
	}
	tracer := sdktrace.NewTracerProvider().Tracer("fuzz")
	f.Fuzz(func(t *testing.T, traceparent string) {
		_, span := tracer.Start(context.Background(), "copy", LinkTo(traceparent))
		defer span.End()
		links := span.(sdktrace.ReadOnlySpan).Links()
		if len(links) > 1 {
			t.Fatalf("%q: %d links", traceparent, len(links))
		}
		if len(links) == 1 {
			sc := links[0].SpanContext
			if !sc.IsValid() {
				t.Fatalf("%q: a link to an invalid span context", traceparent)
			}
			again := TraceParent(trace.ContextWithSpanContext(context.Background(), sc))
			if trace.SpanContextFromContext(Propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": again})).TraceID() != sc.TraceID() {
				t.Fatalf("%q: linked to %v, which reads back as %q", traceparent, sc, again)
			}
		}
	})
}
