package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsink"
	"github.com/sftpgate/sftpgate/internal/audit"
)

// auditRounds is how many rounds of each the audit bench alternates.
const auditRounds = 10

// TestBenchmarkAudit: what the audit trail costs the gateway. Two gateway
// processes serve the same connection, one keeping the trail (records
// logged, stored every second, delivered by a worker to an AuditSink, a
// CloudEvents receiver on loopback), one with --audit=false; small
// writes at concurrency 16 alternate between them, and each one's CPU
// per write is its process's. Then a worker starts and delivers the
// stored records: the sink's rate is records per second from its first
// batch to its last.
func TestBenchmarkAudit(t *testing.T) {
	binary := os.Getenv("SFTPGATE_BENCH_BINARY")
	if binary == "" {
		t.Fatal("run it with make bench, which builds the binary it measures")
	}
	// The trail's records go where the worker reads them.
	r := startRig(t, binary, "audit", map[string]string{"box": ""}, io.Discard, "--namespace="+benchWorkerNS, "--log-level=warn")
	if err := r.k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchWorkerNS}}); err != nil {
		t.Fatal(err)
	}
	off, offAddr, _ := r.startGateway(t, binary, io.Discard, "--audit=false", "--log-level=warn")
	sink := testsink.Start(t)
	r.create(t, &v1alpha1.AuditSink{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: v1alpha1.AuditSinkName},
		Spec: v1alpha1.AuditSinkSpec{Sink: v1alpha1.Destination{URI: sink.URL}, MaxBatch: 1000}})
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	on := r.client(httpClient, "box", r.token)
	offClient := &gatewayClient{url: "http://" + offAddr + "/box/", token: r.token, http: httpClient}
	waitServed(t, on, offClient)

	withTrail, without, onCPU, offCPU := smallWritesAB(t, r, auditRounds, r.gateway, on, off, offClient)

	// The worker starts once the writes are stored: the sink's rate is
	// what it drains from the outbox.
	r.startWorker(t, binary, "audit-0", "--log-level=warn")
	written := withTrail.ops
	// Records dropped past the bounds count as received: their drop
	// records say so.
	received := func() (n, dropped int, first, last time.Time) {
		for _, req := range sink.Taken() {
			if first.IsZero() {
				first = req.At
			}
			last = req.At
		}
		for _, rec := range sink.AuditRecords(t) {
			switch rec.Action {
			case "gateway.write":
				n++
			case audit.ActionDropped:
				dropped += int(rec.Count)
			}
		}
		return n, dropped, first, last
	}
	deadline := time.Now().Add(5 * time.Minute)
	for n, dropped, _, _ := received(); n+dropped < written; n, dropped, _, _ = received() {
		if time.Now().After(deadline) {
			var st v1alpha1.AuditSink
			_ = r.k8s.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: v1alpha1.AuditSinkName}, &st)
			t.Fatalf("the sink got %d records of %d writes; the AuditSink's status: %+v", n, written, st.Status)
		}
		time.Sleep(time.Second)
	}
	n, dropped, first, last := received()
	batches := len(sink.Taken())

	fmt.Printf(`
the audit trail's cost, small writes (1 KiB, JSON) at concurrency 16, %d rounds of %s each way (make bench)
| measure | trail on | trail off (--audit=false) | ratio | target |
|---|---|---|---|---|
| writes/s | %.0f | %.0f | %.2f | >= 0.95 |
| gateway CPU per write | %.3f ms | %.3f ms | %.2f | |
| records delivered at the sink | %.0f records/s (%d records in %d batches, %.1f s) | | | |
| records dropped past the bounds (and said so) | %d | | | 0 |
`, auditRounds, phase, withTrail.rate(), without.rate(), withTrail.rate()/without.rate(),
		onCPU.perOp(onCPU.client), offCPU.perOp(offCPU.client), onCPU.perOp(onCPU.client)/offCPU.perOp(offCPU.client),
		float64(n)/last.Sub(first).Seconds(), n, batches, last.Sub(first).Seconds(), dropped)
}
