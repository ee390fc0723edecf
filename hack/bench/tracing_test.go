package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
)

// tracingRounds is how many rounds of each the tracing bench alternates.
const tracingRounds = 10

// TestBenchmarkTracing: what tracing costs the gateway. Two gateway
// processes serve the same connection, one exporting a span per request
// and per operation, sampled at 100 %, over OTLP/HTTP to a receiver on
// loopback that takes and drops them, the other with tracing off; small
// writes at concurrency 16 (each a trace of its own) alternate between
// them.
func TestBenchmarkTracing(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	var exported atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	r := startRig(t, binary, "tracing", map[string]string{"box": ""}, io.Discard, "--log-level=warn")
	r.gatewayEnv = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + collector.URL + "/v1/traces", "OTEL_TRACES_SAMPLER=always_on"}
	traced, tracedAddr, _ := r.startGateway(t, binary, io.Discard, "--log-level=warn")
	r.gatewayEnv = nil
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	off := r.client(httpClient, "box", r.token)
	on := &gatewayClient{url: "http://" + tracedAddr + "/box/", token: r.token, http: httpClient}
	waitServed(t, on, off)
	withSpans, without, onCPU, offCPU := smallWritesAB(t, r, tracingRounds, traced, on, r.gateway, off)
	if exported.Load() == 0 {
		t.Fatal("the traced gateway exported no spans")
	}
	fmt.Printf(`
tracing's cost, small writes (1 KiB, JSON) at concurrency 16, %d rounds of %s each way (make bench)
| measure | traced (100 %% sampled, OTLP/HTTP) | tracing off | ratio | target |
|---|---|---|---|---|
| writes/s | %.0f | %.0f | %.2f | >= 0.90 |
| gateway CPU per write | %.3f ms | %.3f ms | %.2f | |
| span bytes exported | %d | | | |
`, tracingRounds, phase, withSpans.rate(), without.rate(), withSpans.rate()/without.rate(),
		onCPU.perOp(onCPU.client), offCPU.perOp(offCPU.client), onCPU.perOp(onCPU.client)/offCPU.perOp(offCPU.client), exported.Load())
}
