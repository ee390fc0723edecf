package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/logging"
)

// writeBench sends 1 KiB JSON writes, each of a new file, to a handler in
// this process, as a client would send them but with one request and one
// response writer for all: the benchmark itself allocates next to
// nothing, so that the allocations counted are the handler's.
type writeBench struct {
	req  *http.Request
	body body
	buf  []byte
	name string // the files' names start with it
	w    benchWriter
	n    int
}

// body is a request body that can be read again.
type body struct{ bytes.Reader }

func (*body) Close() error { return nil }

// benchWriter is a ResponseWriter that keeps the status and the body.
type benchWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *benchWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

var (
	kib = strings.Repeat("x", 1024)
	// harnessAnswer is the harness's handler's.
	harnessAnswer = []byte(`{"write":{}}`)
)

// newWriteBench writes with token's key to the connection of slug, to
// files named <name><n>.txt.
func newWriteBench(slug, token, name string) *writeBench {
	wb := &writeBench{name: name, w: benchWriter{header: http.Header{}}}
	wb.req = (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/" + slug + "/write"}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}},
		Body:   &wb.body, Host: "example.com", RemoteAddr: "192.0.2.1:1234", RequestURI: "/" + slug + "/write"}).WithContext(context.Background())
	return wb
}

// write sends one write to h and checks its answer.
func (wb *writeBench) write(h http.Handler) error {
	wb.n++
	wb.buf = append(strconv.AppendInt(append(append(wb.buf[:0], `{"path": "`...), wb.name...), int64(wb.n), 10), `.txt", "file": {"text": "`...)
	wb.buf = append(append(wb.buf, kib...), `"}}`...)
	wb.body.Reset(wb.buf)
	wb.req.ContentLength = int64(len(wb.buf))
	clear(wb.w.header)
	wb.w.status = 0
	wb.w.body.Reset()
	h.ServeHTTP(&wb.w, wb.req)
	if wb.w.status != http.StatusOK || !bytes.HasPrefix(wb.w.body.Bytes(), []byte(`{"write":{`)) {
		return fmt.Errorf("%d %s", wb.w.status, wb.w.body.Bytes())
	}
	return nil
}

// cpuTime is the CPU this process has used: the gateway's and its SSH
// clients', not sshd's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWrites writes with wb to h for the benchmark, reporting the CPU per
// write beside the time and allocations.
func benchWrites(b *testing.B, wb *writeBench, h http.Handler) {
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if err := wb.write(h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkWriteLayers measures what each of the gateway's own layers
// costs a 1 KiB write, in this process, against the real sshd: the write
// with the layers added one at a time (gateway.WriteLayers), the first
// with none (decode, run on a pooled session, answer: the same SFTP steps
// as the gateway's), the last the gateway as it serves; each layer's cost
// is the difference from the row before. The harness row is the
// benchmark's own request and writer, answered by a handler that does
// nothing. make bench prints the rows as a table (hack/bench,
// TestBenchmarkLayers).
//
// A row's cost is a few microseconds of a write's hundreds, which the
// machine's spells and sshd's answers vary by more: so the rows take
// turns write by write, each loop sending one write through every row
// (in an order of its own), and each write is measured on
// its own: its time, the process's CPU meanwhile (the gateway's and its
// SSH clients', not sshd's), and the allocations meanwhile (counted with
// the world stopped, before and after, outside the time and CPU). It
// reports, for each row, the median time and CPU of its writes
// ("ns/<row>", "cpu-ns/<row>": a slow spell or a collection lands on a
// few writes, whichever row they were) and their mean allocations
// ("allocs/<row>": what the collector has to do, with what the
// background allocates meanwhile, which falls on the rows alike, and
// the audit trail's storing of its records, on the rows that record).
// Run it for some seconds (make bench runs -benchtime=20s).
//
// The gateway is one of its own: the one of TestMain would refuse the
// writes past its rate. It logs as Run's does (the audit record's line
// written as it is), to nowhere, and collects garbage as Run sets it.
func BenchmarkWriteLayers(b *testing.B) {
	f := newFixture(b)
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	gw, err := gateway.New(restConfig, gateway.Options{
		BasePath:    "/",
		Networks:    egress.Networks{DeniedNetworks: testcluster.LoopbackNetworks},
		IdleTimeout: time.Minute,
		Limits: gateway.Limits{MaxBodyBytes: maxBody, MaxUploadBytes: maxUpload, RequestTimeout: 30 * time.Second,
			RatePerKey: 1e9, RateBurst: 1 << 30},
		Log: quietLogger(b),
	})
	must(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	must(b, gw.Start(ctx))
	layers, err := gw.WriteLayers(f.slug, f.token)
	must(b, err)
	type row struct {
		name    string
		h       http.Handler
		wb      *writeBench
		ns, cpu []time.Duration
		allocs  uint64
	}
	rows := []*row{{name: "harness", h: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(harnessAnswer) })}}
	for _, l := range layers {
		rows = append(rows, &row{name: strings.ReplaceAll(l.Name, " ", "-"), h: l.Handler})
	}
	for i, r := range rows {
		r.name = fmt.Sprintf("%d-%s", i, r.name)
		r.wb = newWriteBench(f.slug, f.token, r.name+"-")
		// The pool's first session is dialled, and each row's first write
		// made, before any is counted.
		if err := r.wb.write(r.h); err != nil {
			b.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	order := slices.Clone(rows)
	for n := 0; b.Loop(); n++ {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, r := range order {
			runtime.ReadMemStats(&before)
			cpu, start := cpuTime(), time.Now()
			err := r.wb.write(r.h)
			took, used := time.Since(start), cpuTime()-cpu
			runtime.ReadMemStats(&after)
			r.allocs += after.Mallocs - before.Mallocs
			r.ns, r.cpu = append(r.ns, took), append(r.cpu, used)
			if err != nil {
				b.Fatal(err)
			}
		}
		if n%500 == 499 {
			// The rows write to a directory of at most some thousand files.
			old, _ := filepath.Glob(filepath.Join(f.sshd.Dir, "*-*.txt"))
			for _, file := range old {
				_ = os.Remove(file)
			}
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	for _, r := range rows {
		b.ReportMetric(median(r.ns), "ns/"+r.name)
		b.ReportMetric(median(r.cpu), "cpu-ns/"+r.name)
		b.ReportMetric(float64(r.allocs)/float64(b.N), "allocs/"+r.name)
	}
}

// quietLogger is the gateway's logger as Run makes it (lines in batches,
// the audit record's written as it is), writing to nowhere. logging.New
// writes to os.Stderr as it is when called.
func quietLogger(b *testing.B) *slog.Logger {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	must(b, err)
	stderr := os.Stderr
	os.Stderr = null
	log, flush := logging.New("gateway", logging.Options{Level: slog.LevelInfo, FlushInterval: time.Second})
	os.Stderr = stderr
	b.Cleanup(func() { flush(); _ = null.Close() })
	return log
}
