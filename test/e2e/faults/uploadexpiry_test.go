package faults

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/test/framework"
)

// tus sends one request of the tus protocol with token; headers are
// name, value pairs. It returns the status and headers of the answer.
func tus(t *testing.T, method, url, token string, body io.Reader, headers ...string) (int, http.Header) {
	t.Helper()
	status, header, _, err := testhttp.Tus(http.DefaultClient, method, url, token, body, headers...)
	must(t, err)
	return status, header
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
	ctx := context.Background()
	short, err := sys.Add(ctx, "gateway", "--upload-expiry=2s")
	must(t, err)
	t.Cleanup(func() { _ = short.Kill() })

	left := upload(t, short.URL, f, "left.bin", 10, "half")
	upload(t, short.URL, f, "done.bin", 2, "ok")
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
	removed, removedBytes := expiredCounts(ctx)

	// The gateway refuses the upload from its expiry.
	eventually(t, "the gateway says the upload expired", func() bool {
		status, _ := tus(t, http.MethodHead, left, f.token, nil)
		return status == http.StatusNotFound
	})
	// The worker leaves an expired upload for a grace of minutes (a part
	// sent just before its expiry may still be written): the upload is
	// left a day, its record made again as the gateway made it a day
	// earlier.
	records := &uploadrecord.Store{Client: k8s, Namespace: framework.Namespace}
	record, err := records.Get(ctx, path.Base(left))
	must(t, err)
	must(t, records.Delete(ctx, record))
	record.Created, record.Expires = record.Created.Add(-24*time.Hour), record.Expires.Add(-24*time.Hour)
	must(t, records.Create(ctx, record))

	eventually(t, "the worker removes the partial file", func() bool { return len(temporary()) == 0 })
	if got, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "done.bin")); string(got) != "ok" {
		t.Errorf("the finished upload's file holds %q", got)
	}
	if status, _ := tus(t, http.MethodHead, left, f.token, nil); status != http.StatusNotFound {
		t.Errorf("an expired upload answers %d, want 404", status)
	}
	testkit.EventuallyFound(t, "the removal is counted", func() (bool, string) {
		nowRemoved, nowBytes := expiredCounts(ctx)
		return nowRemoved >= removed+1 && nowBytes >= removedBytes+4,
			fmt.Sprintf("%v more partial files, %v more bytes", nowRemoved-removed, nowBytes-removedBytes)
	})
	var list corev1.ConfigMapList
	eventually(t, "no record is left", func() bool {
		must(t, k8s.List(ctx, &list, client.InNamespace(framework.Namespace),
			client.MatchingLabels{uploadrecord.LabelNamespace: f.ns}))
		return len(list.Items) == 0
	})
}

// expiredCounts are the system's workers' counts of expired uploads whose
// partial files they removed, and of the bytes of those.
func expiredCounts(ctx context.Context) (partial, bytes float64) {
	for _, p := range sys.Processes() {
		if strings.HasPrefix(p.Name, "worker-") && p.Running() {
			// None before a replica's first removal.
			n, _ := p.Metric(ctx, `sftpgate_worker_uploads_expired_total{removed="partial"}`)
			b, _ := p.Metric(ctx, "sftpgate_worker_upload_bytes_expired_total")
			partial, bytes = partial+n, bytes+b
		}
	}
	return partial, bytes
}
