package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
)

// TestTracedDeliveries: with tracing on, a watch's polls and its
// deliveries are spans, and the event carries its delivery's trace
// context (CloudEvents' distributed tracing extension) for the consumer
// to go on from. Other tests' spans go to the same exporter meanwhile:
// what is looked for is this watch's.
func TestTracedDeliveries(t *testing.T) {
	t.Parallel() // with the package's shared worker, which runs once the sequential tests ended
	exporter := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	tn := newTenant(t)
	sink := testsink.Start(t)
	startWorker(t)
	w := tn.watch(t, "traced", sink.URL)
	testkit.Polls(t, k8s, w)(1) // the first poll's snapshot, which the file is not in
	tn.put(t, "in/traced.csv", "x")
	eventually(t, "the file's event arrives", func() bool { return len(sink.Events()) > 0 })
	ev := sink.Events()[0]
	parent, ok := ev.Extensions()["traceparent"].(string)
	if !ok {
		t.Fatalf("the event has no traceparent: %v", ev.Extensions())
	}
	parts := strings.Split(parent, "-")
	if len(parts) != 4 {
		t.Fatalf("traceparent %q", parent)
	}
	// The try's span ends once the sink's answer is read: after the sink
	// has the event.
	testkit.EventuallyFound(t, "the delivery's span, named in the event's traceparent, and the watch's poll's", func() (bool, string) {
		var delivered, polled bool
		for _, s := range exporter.GetSpans() {
			if s.SpanContext.SpanID().String() == parts[2] && s.SpanContext.TraceID().String() == parts[1] && strings.HasPrefix(s.Name, "deliver ") {
				delivered = true
			}
			for _, a := range s.Attributes {
				polled = polled || string(a.Key) == "sftpgate.watch" && a.Value.AsString() == "traced" && s.Name == "poll"
			}
		}
		return delivered && polled, fmt.Sprintf("delivery %v, poll %v", delivered, polled)
	})
}
