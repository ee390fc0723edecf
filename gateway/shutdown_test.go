package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// TestShutdownFinishesRequests: on SIGTERM (ctx ending) the gateway stops
// accepting connections, a request in flight (a slow upload) still
// completes, and the log lines still in the log's buffer are written.
func TestShutdownFinishesRequests(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	must(t, os.WriteFile(path, kubeconfig, 0o600))
	addr := testhttp.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	must(t, err)
	// Run logs to standard error: its descriptor points at the file for
	// the test (os.Stderr itself stays, as other goroutines read it).
	saved, err := unix.Dup(2)
	must(t, err)
	must(t, unix.Dup2(int(logFile.Fd()), 2))
	defer func() { _ = unix.Dup2(saved, 2); _ = unix.Close(saved) }()
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, []string{"--kubeconfig=" + path, "--listen-address=" + addr, "--metrics-address=0",
			"--denied-networks=" + testcluster.LoopbackNetworks, "--shutdown-grace=20s", "--log-flush-interval=1h"})
	}()
	base := "http://" + addr
	eventually(t, "the gateway is ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// An upload whose body arrives slowly, across the shutdown.
	body, feed := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/%s/write?path=slow.txt", base, f.slug), body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/octet-stream")
	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the request in flight failed: %v", err)
			answered <- answer{}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		raw, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(raw)}
	}()
	_, err = feed.Write([]byte("first half, "))
	must(t, err)
	// The request is in the handler once its temporary file is there.
	eventually(t, "the upload starts", func() bool {
		tmp, _ := filepath.Glob(filepath.Join(f.sshd.Dir, tempname.Prefix+"*"))
		return len(tmp) == 1
	})
	cancel()
	// New connections are refused once the gateway stops listening: at
	// once, so within 10 s, a bound of the gateway's and not the test kit's
	// minute, well inside the 20 s grace the upload still has.
	must(t, testkit.Wait(10*time.Second, "the gateway refuses connections once shutdown began", func() (bool, string) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true, ""
		}
		_ = conn.Close()
		return false, ""
	}))
	_, err = feed.Write([]byte("second half"))
	must(t, err)
	must(t, feed.Close())
	if a := <-answered; a.status != http.StatusOK || !strings.Contains(a.body, `"bytesWritten":23`) {
		t.Errorf("the request in flight: %d %s", a.status, a.body)
	}
	if got, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "slow.txt")); string(got) != "first half, second half" {
		t.Errorf("the file holds %q", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after shutdown")
	}
	logged, err := os.ReadFile(logFile.Name())
	must(t, err)
	if !strings.Contains(string(logged), `"command":"write","status":200`) {
		t.Errorf("the upload's log line is missing from the log:\n%s", logged)
	}
	// The audit chain of the namespace ends with its closing record.
	records := audit.FromLog(string(logged), f.ns)
	if reports := audit.Verify(records); len(reports) != 1 || !reports[0].Whole() || !reports[0].Closed {
		t.Errorf("the namespace's audit chain after shutdown: %+v", reports)
	}
}
