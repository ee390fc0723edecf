package e2e

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/worker/uploadexpiry"
)

// tus sends one request of the tus protocol with token; headers are
// name, value pairs. It returns the status and headers of the answer.
func tus(t *testing.T, method, url, token string, body io.Reader, headers ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// upload begins an upload of size bytes to path at base and sends it
// part, returning its URL.
func upload(t *testing.T, base string, f *fixture, path string, size int, part string) string {
	t.Helper()
	status, h := tus(t, http.MethodPost, base+"/"+f.slug+"/uploads/", f.token, nil,
		"Upload-Length", strconv.Itoa(size), "Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte(path)))
	if status != http.StatusCreated {
		t.Fatalf("creating an upload of %s: %d", path, status)
	}
	url := base + h.Get("Location")
	if status, _ := tus(t, http.MethodPatch, url, f.token, strings.NewReader(part), "Upload-Offset", "0"); status != http.StatusNoContent {
		t.Fatalf("a part of %s: %d", path, status)
	}
	return url
}

// TestUploadsExpire: an upload the gateway left past its expiry is
// removed by the worker's sweep, its partial file and its record, and
// counted; a finished upload's file stays.
func TestUploadsExpire(t *testing.T) {
	f := newFixture(t)
	short, err := gateway.New(env.Config, gateway.Options{BasePath: "/", DeniedNetworks: testcluster.LoopbackNetworks,
		IdleTimeout: time.Minute, Uploads: uploads.Limits{Expiry: 2 * time.Second}, Log: testcluster.Log("gateway")})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	must(t, short.Start(ctx))
	srv := httptest.NewServer(short.Handler())
	t.Cleanup(srv.Close)

	left := upload(t, srv.URL, f, "left.bin", 10, "half")
	_, head := tus(t, http.MethodHead, left, f.token, nil)
	expires, err := http.ParseTime(head.Get("Upload-Expires"))
	must(t, err)
	upload(t, srv.URL, f, "done.bin", 2, "ok")
	temporary := func() (names []string) {
		entries, err := os.ReadDir(f.sshd.Dir)
		must(t, err)
		for _, e := range entries {
			if tempname.Is(e.Name()) {
				names = append(names, e.Name())
			}
		}
		return names
	}
	if names := temporary(); len(names) != 1 {
		t.Fatalf("partial files: %v, want one", names)
	}

	policy, err := sftpdial.ParsePolicy(testcluster.LoopbackNetworks)
	must(t, err)
	removed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "removed"}, []string{"removed"})
	bytesRemoved := prometheus.NewCounter(prometheus.CounterOpts{Name: "bytes"})
	sweeper := &uploadexpiry.Sweeper{
		Records: &uploadrecord.Store{Client: k8s, Namespace: gateway.DefaultNamespace}, Connections: k8s,
		Pools:   &pool.Pools{Dialer: &sftpdial.Dialer{Policy: policy}, Secrets: k8s, IdleTimeout: time.Minute},
		Removed: removed, RemovedBytes: bytesRemoved,
	}
	time.Sleep(time.Until(expires) + 10*time.Millisecond)
	sweeper.Sweep(context.Background())
	sweeper.Wait()
	if names := temporary(); len(names) != 0 {
		t.Errorf("partial files left after expiry: %v", names)
	}
	if got, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "done.bin")); string(got) != "ok" {
		t.Errorf("the finished upload's file holds %q", got)
	}
	if status, _ := tus(t, http.MethodHead, left, f.token, nil); status != http.StatusNotFound {
		t.Errorf("an expired upload answers %d, want 404", status)
	}
	if got := testutil.ToFloat64(removed.WithLabelValues("partial")); got < 1 {
		t.Errorf("%v expired partial files counted", got)
	}
	if got := testutil.ToFloat64(bytesRemoved); got < 4 {
		t.Errorf("%v bytes of expired partial files counted", got)
	}
	var records corev1.ConfigMapList
	must(t, k8s.List(context.Background(), &records, client.InNamespace(gateway.DefaultNamespace),
		client.MatchingLabels{uploadrecord.LabelNamespace: f.ns}))
	if len(records.Items) != 0 {
		t.Errorf("%d records left", len(records.Items))
	}
}
