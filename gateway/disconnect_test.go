package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// The test kit's, as every test package has them.
var (
	eventually      = testkit.Eventually
	eventuallyFound = testkit.EventuallyFound
)

// metric reads one sample of the gateway's metrics for the fixture's
// connection; "" when there is none.
func (f *fixture) metric(t *testing.T, name string) string {
	t.Helper()
	return metricSample(t, metricsURL, name+`\{name="box",namespace="`+f.ns+`"\}`)
}

// metricSample reads the value of the metric sample that series (a
// regular expression of its name and labels) matches, of the gateway
// whose metrics are at metrics; "" when none does.
func metricSample(t *testing.T, metrics, series string) string {
	t.Helper()
	resp, err := http.Get(metrics + "/metrics")
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	must(t, err)
	m := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`).FindSubmatch(raw)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// commandRequest is a JSON command to url, ended with ctx.
func commandRequest(t *testing.T, ctx context.Context, url, token, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// TestDepartedClientLeavesTheQueue: a request waiting for a session of a
// busy connection leaves the queue when its client goes away, and takes
// no place in it after.
func TestDepartedClientLeavesTheQueue(t *testing.T) {
	conn, sshd := newConnection(t, func(c *v1alpha1.SftpConnection) { c.Spec.Limits.MaxConnections = 1 })
	f := serve(t, conn, sshd)
	url := baseURL + "/" + f.slug
	largeFile(t, f, "large.bin")
	// Two streams: the one session's whole load.
	first, second := stall(t, url, f.token, "large.bin"), stall(t, url, f.token, "large.bin")
	defer first()
	defer second()

	ctx, leave := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(commandRequest(t, ctx, url+"/stat", f.token, `{"path": "large.bin"}`))
		if err == nil {
			_ = resp.Body.Close()
		}
		gone <- err
	}()
	eventually(t, "the request waits for a session", func() bool { return f.metric(t, "sftpgate_gateway_pool_waiting") == "1" })
	leave()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client that left got %v", err)
	}
	eventually(t, "the request leaves the queue", func() bool { return f.metric(t, "sftpgate_gateway_pool_waiting") == "0" })
}

// TestDepartedClientStopsItsCopy: a copy whose client goes away stops at
// its next chunk and removes the file it had begun; the target never
// appears.
func TestDepartedClientStopsItsCopy(t *testing.T) {
	f := newFixture(t)
	source, target := filepath.Join(f.sshd.Dir, "source.bin"), filepath.Join(f.sshd.Dir, "target.bin")
	must(t, os.WriteFile(source, nil, 0o644))
	must(t, os.Truncate(source, 1<<30)) // sparse: quick to make, slow to copy
	// The copy is written under a temporary name beside the target.
	exists := func() bool {
		if _, err := os.Stat(target); err == nil {
			t.Fatal("the target appeared before the copy ended")
		}
		entries, err := os.ReadDir(f.sshd.Dir)
		must(t, err)
		return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return tempname.Is(e.Name()) })
	}

	ctx, leave := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(commandRequest(t, ctx, baseURL+"/"+f.slug+"/copy", f.token, `{"from": "source.bin", "to": "target.bin"}`))
		if err == nil {
			_ = resp.Body.Close()
		}
		gone <- err
	}()
	eventually(t, "the copy begins its temporary file", exists)
	leave()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client that left got %v", err)
	}
	eventually(t, "the copy stops and removes the file it began", func() bool { return !exists() })
	f.ok(t, "stat", `{"path": "source.bin"}`)
}

// TestFailedUploadLeavesTheConnectionSound: an upload that fails after
// its body was read closes its HTTP connection, so the client's next
// requests, on a new one, are served (net/http cancels every later request
// on a connection whose read was cut short).
func TestFailedUploadLeavesTheConnectionSound(t *testing.T) {
	f := newFixture(t)
	f.ok(t, "write", `{"path": "taken.bin", "file": {"text": "taken"}}`)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	// Unsized, so that it streams: read ahead whole before the write fails.
	body := io.NopCloser(strings.NewReader(strings.Repeat("x", 100<<10)))
	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/write?path=taken.bin&overwrite=false", body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	// The refusal may come before the read-ahead has the whole body; the
	// gateway then stops reading it and closes the connection, and the
	// client's write of the rest fails instead of its reading the answer.
	// Either way, what follows must be served.
	if resp, err := client.Do(req); err == nil {
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "already_exists") {
			t.Errorf("an upload onto an existing file without overwrite: %d %s", resp.StatusCode, raw)
		}
	} else if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("an upload onto an existing file without overwrite: %v", err)
	}
	for range 3 {
		// hash, as the commands that stop when their client goes away.
		resp, err := client.Do(commandRequest(t, context.Background(), baseURL+"/"+f.slug+"/hash", f.token, `{"path": "taken.bin"}`))
		must(t, err)
		_, _ = io.Copy(io.Discard, resp.Body) // read whole: the connection is kept for the next
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a request after the failed upload: %d, want 200", resp.StatusCode)
		}
	}
}

// TestCommandsOutlastTheReadTimeout: the server's read timeout bounds a
// request's body, not the command it runs: a hash that takes longer is
// not taken for a client that went away.
func TestCommandsOutlastTheReadTimeout(t *testing.T) {
	f := newFixture(t)
	source := filepath.Join(f.sshd.Dir, "large.bin")
	must(t, os.WriteFile(source, nil, 0o644))
	must(t, os.Truncate(source, 256<<20))
	url := startGateway(t, gateway.Limits{RequestTimeout: 100 * time.Millisecond}) + "/" + f.slug
	status, _, out := post(t, context.Background(), url, f.token, "hash", `{"path": "large.bin"}`)
	if status != http.StatusOK || out["error"] != nil {
		t.Errorf("a hash longer than the read timeout: %d %v", status, out)
	}
}
