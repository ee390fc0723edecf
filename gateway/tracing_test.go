package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/egress"
)

// TestTraces: a request that carries a W3C traceparent goes on in the
// caller's trace: a server span whose parent is the caller's, with the
// command's operation on the server as its child; the request's log
// line and audit record carry the trace id.
func TestTraces(t *testing.T) {
	f := newFixture(t)
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	var log testkit.Log
	gw, err := gateway.New(restConfig, gateway.Options{Networks: egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		Log: slog.New(slog.NewJSONHandler(&log, nil)), Tracing: provider,
		Limits: gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second}})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, gw.Start(ctx))
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	call := func() int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/"+f.slug+"/write",
			strings.NewReader(`{"path": "traced.txt", "file": {"text": "x"}}`))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, "the replica serves the connection", func() bool { return call() == http.StatusOK })

	var server, operation *tracetest.SpanStub
	spans := exporter.GetSpans()
	for i := range spans {
		if s := &spans[i]; s.SpanKind == trace.SpanKindServer && s.Parent.SpanID().String() == parentID {
			server = s
		}
	}
	for i := range spans {
		if s := &spans[i]; server != nil && s.SpanKind == trace.SpanKindClient && s.Parent.SpanID() == server.SpanContext.SpanID() {
			operation = s
		}
	}
	if server == nil || operation == nil {
		t.Fatalf("no server span under the caller's, or no operation under it: %+v", spans)
	}
	if server.SpanContext.TraceID().String() != traceID || operation.SpanContext.TraceID().String() != traceID {
		t.Errorf("the spans are not of the caller's trace: %s, %s", server.SpanContext.TraceID(), operation.SpanContext.TraceID())
	}
	attrs := map[string]string{}
	for _, a := range server.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["sftpgate.slug"] != f.slug || attrs["sftpgate.command"] != "write" || attrs["http.response.status_code"] != "200" ||
		attrs["sftpgate.namespace"] != f.ns {
		t.Errorf("the request span's attributes: %v", attrs)
	}
	if !strings.Contains(operation.Name, "write") {
		t.Errorf("the operation's span: %q", operation.Name)
	}
	if !strings.Contains(log.String(), `"traceID":"`+traceID+`"`) {
		t.Error("the request's log line has no trace id")
	}
	traced := false
	for _, r := range audit.FromLog(log.String(), "") {
		traced = traced || r.Action == "gateway.write" && r.TraceID == traceID
	}
	if !traced {
		t.Error("the write's audit record has no trace id")
	}
}
