package gateway_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
)

// startGateway runs a gateway of its own with limits (the request timeout
// 30s unless set), served as Run serves it, for a test of them, and
// returns its URL.
func startGateway(t *testing.T, limits gateway.Limits) string {
	t.Helper()
	return startGatewayWith(t, gateway.Options{Limits: limits})
}

// startGatewayWith is startGateway with more options than its limits (and
// its log, when set).
func startGatewayWith(t *testing.T, opts gateway.Options) string {
	t.Helper()
	url, _ := startGatewayAndMetrics(t, opts)
	return url
}

// startGatewayAndMetrics is startGatewayWith, also serving the gateway's
// metrics at the second URL it returns.
func startGatewayAndMetrics(t *testing.T, opts gateway.Options) (url, metrics string) {
	t.Helper()
	limits := &opts.Limits
	limits.MaxBodyBytes, limits.MaxUploadBytes = cmp.Or(limits.MaxBodyBytes, maxBody), maxUpload
	limits.RequestTimeout = cmp.Or(limits.RequestTimeout, 30*time.Second)
	opts.BasePath, opts.DeniedNetworks, opts.IdleTimeout = "/", "link-local,metadata", time.Minute
	opts.Log = cmp.Or(opts.Log, testcluster.Log("gateway"))
	gw, err := gateway.New(restConfig, opts)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	must(t, gw.Start(ctx))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := gw.HTTPServer()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	m := httptest.NewServer(gw.MetricsHandler(false))
	t.Cleanup(m.Close)
	return "http://" + l.Addr().String(), m.URL
}

// post sends a JSON command to the gateway at url with token and returns
// the answer's status, headers and decoded body.
func post(t *testing.T, ctx context.Context, url, token, command, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/"+command, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	status, header, raw := send(t, req, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %d, body is not JSON: %.200q", command, status, raw)
	}
	return status, header, out
}

// stall starts a raw download of file through url and reads none of it:
// until closed, the request holds its stream's share of the memory
// budget, its place in flight and its load on a session.
func stall(t *testing.T, url, token, file string) (closeIt func()) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/read", strings.NewReader(`{"path": "`+file+`"}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("the download to stall: %d %s", resp.StatusCode, raw)
	}
	var once sync.Once
	closeIt = func() { once.Do(func() { _ = resp.Body.Close() }) }
	t.Cleanup(closeIt)
	return closeIt
}

// largeFile writes a file on the fixture's server larger than a socket's
// buffers hold, so that a download of it stalls with its client.
func largeFile(t *testing.T, f *fixture, name string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, name), make([]byte, 64<<20), 0o644))
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// TestMemoryBudgetRefusesRatherThanGrows: what a request would hold past
// the budget waits a moment and is answered 503, while small requests
// still pass; what could never fit is refused at once.
func TestMemoryBudgetRefusesRatherThanGrows(t *testing.T) {
	f := newFixture(t)
	// 4 MiB: 3.5 for large holds, a stream holds 2.5.
	url := startGateway(t, gateway.Limits{MemoryBudget: 4 << 20, MaxBodyBytes: 4 << 20}) + "/" + f.slug
	largeFile(t, f, "large.bin")
	text := strings.Repeat("<", 1536<<10)
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "text.txt"), []byte(text), 0o644))
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "four.txt"), bytes.Repeat([]byte("a"), 4<<20), 0o644))
	ctx := context.Background()

	status, _, out := post(t, ctx, url, f.token, "read", `{"path": "text.txt"}`)
	if read, _ := out["read"].(map[string]any); status != http.StatusOK || read["content"] != text {
		t.Fatalf("a read within the budget: %d %.200v", status, out)
	}
	// A write's text counts once: it is unquoted in the body itself.
	written := strings.Repeat("a\"b\n", 512<<10) // 2 MiB, 3 MiB quoted
	quoted, err := json.Marshal(written)
	must(t, err)
	if status, _, out := post(t, ctx, url, f.token, "write", `{"path": "written.txt", "file": {"text": `+string(quoted)+`}}`); status != http.StatusOK {
		t.Fatalf("a write within the budget: %d %.200v", status, out)
	}
	if got, err := os.ReadFile(filepath.Join(f.sshd.Dir, "written.txt")); err != nil || string(got) != written {
		t.Fatalf("the write wrote %d bytes (%v), want its %d", len(got), err, len(written))
	}
	if status, _, out := post(t, ctx, url, f.token, "read", `{"path": "four.txt"}`); status != http.StatusBadRequest || errorCode(out) != "invalid_request" {
		t.Errorf("a read larger than the budget allows one request: %d %v, want 400", status, out)
	}

	closeDownload := stall(t, url, f.token, "large.bin")
	status, header, out := post(t, ctx, url, f.token, "read", `{"path": "text.txt"}`)
	if status != http.StatusServiceUnavailable || errorCode(out) != "busy" || header.Get("Retry-After") == "" {
		t.Errorf("a read past what the budget has left: %d %v %q, want 503 busy with Retry-After", status, out, header.Get("Retry-After"))
	}
	if status, _, out := post(t, ctx, url, f.token, "stat", `{"path": "text.txt"}`); status != http.StatusOK {
		t.Errorf("a small request while large ones fill the budget: %d %v", status, out)
	}
	closeDownload()
	eventuallyFound(t, "the budget is given back", func() (bool, string) {
		status, _, out := post(t, ctx, url, f.token, "read", `{"path": "text.txt"}`)
		return status == http.StatusOK, fmt.Sprintf("%d %v", status, out)
	})
}

// TestAnswersAreNotEscapedForHTML: a read of text full of <, > and & is
// as long as the text, not six times as long.
func TestAnswersAreNotEscapedForHTML(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.sshd.Dir, "html.txt"), []byte("<a href='x'>&</a>é"), 0o644))
	status, _, raw := f.raw(t, "read", "", "application/json", "", "", []byte(`{"path": "html.txt"}`))
	if status != http.StatusOK || !bytes.Contains(raw, []byte(`"content":"<a href='x'>&</a>é"`)) {
		t.Errorf("%d %s", status, raw)
	}
}

// TestRequestsInFlightAreBounded: one key, and one namespace's keys
// together, have at most so many requests in flight; others are not
// held back by them.
func TestRequestsInFlightAreBounded(t *testing.T) {
	f := newFixture(t)
	second := serve(t, connectionOf(t, f), f.sshd, func(k *v1alpha1.ApiKey) { k.Name = "second" })
	third := serve(t, connectionOf(t, f), f.sshd, func(k *v1alpha1.ApiKey) { k.Name = "third" })
	other := newFixture(t)
	base := startGateway(t, gateway.Limits{MaxRequestsPerKey: 1, MaxRequestsPerNamespace: 2})
	url := base + "/" + f.slug
	largeFile(t, f, "large.bin")
	ctx := context.Background()

	stall(t, url, f.token, "large.bin")
	status, header, out := post(t, ctx, url, f.token, "stat", `{"path": "large.bin"}`)
	if status != http.StatusTooManyRequests || errorCode(out) != "too_many_requests" || header.Get("Retry-After") == "" {
		t.Errorf("a key's second request in flight: %d %v, want 429 too_many_requests with Retry-After", status, out)
	}
	stall(t, url, second.token, "large.bin")
	if status, _, out := post(t, ctx, url, third.token, "stat", `{"path": "large.bin"}`); status != http.StatusTooManyRequests || errorCode(out) != "too_many_requests" {
		t.Errorf("a namespace's third request in flight, from a third key: %d %v, want 429", status, out)
	}
	if status, _, out := post(t, ctx, base+"/"+other.slug, other.token, "stat", `{"path": "/"}`); status != http.StatusOK {
		t.Errorf("another namespace's request: %d %v", status, out)
	}
}

// TestQueueForASessionOverflowsInto503: with every session of a
// connection as busy as it may be, one request waits and the next is
// answered 503; the waiting one runs once a session has room.
func TestQueueForASessionOverflowsInto503(t *testing.T) {
	conn, sshd := newConnection(t, func(c *v1alpha1.SftpConnection) { c.Spec.Limits.MaxConnections = 1 })
	f := serve(t, conn, sshd)
	url := startGateway(t, gateway.Limits{MaxWaitingPerConnection: 1}) + "/" + f.slug
	largeFile(t, f, "large.bin")
	// Two streams: the one session's whole load.
	first, second := stall(t, url, f.token, "large.bin"), stall(t, url, f.token, "large.bin")

	type answer struct {
		status int
		code   string
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			status, _, out := post(t, context.Background(), url, f.token, "stat", `{"path": "large.bin"}`)
			answers <- answer{status, errorCode(out)}
		}()
	}
	if a := <-answers; a.status != http.StatusServiceUnavailable || a.code != "connection_busy" {
		t.Errorf("past the queue: %+v, want 503 connection_busy", a)
	}
	first()
	second()
	if a := <-answers; a.status != http.StatusOK {
		t.Errorf("the request that waited: %+v, want 200", a)
	}
}

// TestSmallRawUploadsShareThePool: raw uploads of a few bytes share the
// warm session as JSON writes do, where each used to open one of its own.
func TestSmallRawUploadsShareThePool(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			status, _, raw := f.raw(t, "write", "path=small-"+strconv.Itoa(i)+".bin", "application/octet-stream", "", "", []byte("1 KiB or so"))
			if status != http.StatusOK {
				t.Errorf("a small raw upload: %d %s", status, raw)
			}
		})
	}
	wg.Wait()
	if sessions := f.metric(t, "sftpgate_gateway_pool_sessions"); sessions != "1" {
		t.Errorf("sessions after 8 small raw uploads at once: %q, want 1", sessions)
	}
}

// connectionOf reads the fixture's connection.
func connectionOf(t *testing.T, f *fixture) *v1alpha1.SftpConnection {
	t.Helper()
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "box"}, &conn))
	return &conn
}

// TestLargeTransfersYieldToSmallRequests: while small requests are being
// answered, large transfers are paced, and each still moves the whole
// file: a JSON write and read, a raw upload and download, a copy and a
// hash.
func TestLargeTransfersYieldToSmallRequests(t *testing.T) {
	f := newFixture(t)
	base, metrics := startGatewayAndMetrics(t, gateway.Options{Limits: gateway.Limits{LargeTransferShare: 0.2, MaxBodyBytes: 8 << 20}})
	url := base + "/" + f.slug
	ctx := context.Background()
	pacedBefore := metricValue(t, metrics, "sftpgate_gateway_paced_seconds_total")
	stop := make(chan struct{})
	var small sync.WaitGroup
	for range 4 {
		small.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if status, _, out := post(t, ctx, url, f.token, "stat", `{"path": "."}`); status != http.StatusOK {
					t.Errorf("a small request among large ones: %d %v", status, out)
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		small.Wait()
	}()

	text := strings.Repeat("paced <text> \"quoted\"\n", 100_000) // 2.2 MB
	quoted, err := json.Marshal(text)
	must(t, err)
	if status, _, out := post(t, ctx, url, f.token, "write", `{"path": "text.txt", "file": {"text": `+string(quoted)+`}}`); status != http.StatusOK {
		t.Fatalf("a large JSON write: %d %.200v", status, out)
	}
	onServer := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.sshd.Dir, name))
		must(t, err)
		return b
	}
	if got := onServer("text.txt"); string(got) != text {
		t.Fatalf("the JSON write wrote %d bytes, want %d", len(got), len(text))
	}
	status, _, out := post(t, ctx, url, f.token, "read", `{"path": "text.txt"}`)
	if read, _ := out["read"].(map[string]any); status != http.StatusOK || read["content"] != text {
		t.Fatalf("a large JSON read: %d, not the text written", status)
	}

	data := bytes.Repeat([]byte{0, 1, 2, 253, 254, 255}, 700_000) // 4.2 MB
	rawRequest := func(command, query, accept string, body []byte) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, url+"/"+command+"?"+query, bytes.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/octet-stream")
		if accept != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
		}
		status, _, raw := send(t, req, string(body))
		return status, raw
	}
	if status, raw := rawRequest("write", "path=data.bin", "", data); status != http.StatusOK {
		t.Fatalf("a large raw upload: %d %s", status, raw)
	}
	if !bytes.Equal(onServer("data.bin"), data) {
		t.Fatal("the raw upload did not write its body")
	}
	if status, raw := rawRequest("read", "", "application/octet-stream", []byte(`{"path": "data.bin"}`)); status != http.StatusOK || !bytes.Equal(raw, data) {
		t.Fatalf("a large raw download: %d, %d bytes, want the %d uploaded", status, len(raw), len(data))
	}
	if status, _, out := post(t, ctx, url, f.token, "copy", `{"from": "data.bin", "to": "copy.bin"}`); status != http.StatusOK || !bytes.Equal(onServer("copy.bin"), data) {
		t.Fatalf("a large copy: %d %v", status, out)
	}
	sum := sha256.Sum256(data)
	status, _, out = post(t, ctx, url, f.token, "hash", `{"path": "data.bin"}`)
	if hash, _ := out["hash"].(map[string]any); status != http.StatusOK || hash["hash"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("a large hash: %d %v", status, out)
	}
	if metricValue(t, metrics, "sftpgate_gateway_paced_seconds_total") <= pacedBefore {
		t.Error("no large transfer waited for its turn")
	}
}

// metricValue reads a metric without labels of the gateway whose metrics
// are at metrics.
func metricValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(metricSample(t, metrics, name), 64)
	must(t, err)
	return v
}
