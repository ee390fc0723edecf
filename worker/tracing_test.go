package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
)

// TestTraces: with tracing on, a watch's polls and its deliveries are
// spans, and the event carries its delivery's trace context (CloudEvents'
// distributed tracing extension) for the consumer to go on from; a
// transfer a watch triggers copies each file in a span linked to the
// trigger's, whose traceparent the Transfer keeps. Other tests' spans go
// to the same exporter meanwhile: what is looked for is this test's.
func TestTraces(t *testing.T) {
	t.Parallel() // with the package's shared worker, which runs once the sequential tests ended
	exporter := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	startWorker(t)
	t.Run("deliveries", func(t *testing.T) { tracedDeliveries(t, exporter) })
	t.Run("triggered transfer", func(t *testing.T) { tracedTrigger(t, exporter) })
}

func tracedDeliveries(t *testing.T, exporter *tracetest.InMemoryExporter) {
	tn := newTenant(t)
	sink := testsink.Start(t)
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

func tracedTrigger(t *testing.T, exporter *tracetest.InMemoryExporter) {
	ctx := t.Context()
	src, dst := inProcessServer(testsftp.Start(t)), inProcessServer(testsftp.Start(t))
	ns := transferNamespace(t, map[string]server{"partner": src, "archive": dst})
	src.file(t, "inbox/.keep", nil)
	w := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inbox"}, Spec: v1alpha1.SftpWatchSpec{
		ConnectionRef: v1alpha1.ConnectionReference{Name: "partner"}, Path: "/inbox",
		PollInterval: &metav1.Duration{Duration: 5 * time.Second}, Stability: v1alpha1.Stability{MinAge: &metav1.Duration{}},
		Transfer: &v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: "archive"}, Path: "/copies"}}}}
	must(t, k8s.Create(ctx, w))
	testkit.Polls(t, k8s, w)(1)
	src.file(t, "inbox/report.csv", []byte("a,b\n1,2\n"))
	var tr v1alpha1.Transfer
	eventually(t, "the triggered transfer succeeds", func() bool {
		var list v1alpha1.TransferList
		must(t, k8s.List(ctx, &list, client.InNamespace(ns)))
		if len(list.Items) == 0 {
			return false
		}
		tr = list.Items[0]
		return readyReason(&tr) == "True/"+v1alpha1.ReasonSucceeded
	})
	parent := strings.Split(tr.Annotations[v1alpha1.AnnotationTraceParent], "-")
	if len(parent) != 4 {
		t.Fatalf("the Transfer's traceparent: %q", tr.Annotations[v1alpha1.AnnotationTraceParent])
	}
	attr := func(s tracetest.SpanStub, key string) string {
		for _, a := range s.Attributes {
			if string(a.Key) == key {
				return a.Value.String()
			}
		}
		return ""
	}
	testkit.EventuallyFound(t, "the trigger's span, and the copy's linked to it", func() (bool, string) {
		var trigger, copied bool
		for _, s := range exporter.GetSpans() {
			switch {
			case s.Name == "trigger transfer" && s.SpanContext.SpanID().String() == parent[2] && s.SpanContext.TraceID().String() == parent[1]:
				trigger = attr(s, "sftpgate.watch") == "inbox" && attr(s, "cloudevents.event_id") == tr.Annotations[v1alpha1.AnnotationEventID]
			case s.Name == "copy" && attr(s, "sftpgate.transfer") == tr.Name && attr(s, "sftpgate.namespace") == ns:
				copied = len(s.Links) == 1 && s.Links[0].SpanContext.SpanID().String() == parent[2] &&
					attr(s, "sftpgate.file.size") == "8" && attr(s, "sftpgate.file.written") == "8"
			}
		}
		return trigger && copied, fmt.Sprintf("trigger %v, copy %v", trigger, copied)
	})
}
