package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/hack/fixtures/conformance"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
)

// apiCounts counts the requests a gateway sends the API server about
// upload records, reads and writes apart.
type apiCounts struct {
	mu            sync.Mutex
	reads, writes int
}

func (c *apiCounts) take() (reads, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, writes, c.reads, c.writes = c.reads, c.writes, 0, 0
	return reads, writes
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingConfig is the tests' API server config, counting into c.
func countingConfig(c *apiCounts) *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if aboutUploads(r) {
				c.mu.Lock()
				if r.Method == http.MethodGet {
					c.reads++
				} else {
					c.writes++
				}
				c.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// aboutUploads reports whether r is about a ConfigMap and not the audit
// trail's: its segments share the namespace with the upload records and
// are stored every second, whatever the test does.
func aboutUploads(r *http.Request) bool {
	if !strings.Contains(r.URL.Path, "/configmaps") || strings.Contains(r.URL.Path, auditstore.NamePrefix) ||
		strings.Contains(r.URL.RawQuery, url.QueryEscape(auditstore.LabelSegment)) {
		return false
	}
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(body)
			_ = body.Close()
			return !bytes.Contains(b, []byte(auditstore.NamePrefix))
		}
	}
	return true
}

// TestUploadRequestsToTheAPIServer counts what each tus operation costs
// the API server: a HEAD, which changes nothing, writes nothing.
func TestUploadRequestsToTheAPIServer(t *testing.T) {
	f := newFixture(t)
	var counts apiCounts
	base := startReplicaOn(t, countingConfig(&counts), gateway.Options{})
	counts.take()

	url := createUpload(t, base, f.slug, f.token, "counted.bin", 8)
	reads, writes := counts.take()
	t.Logf("POST (creation): %d reads, %d writes", reads, writes)
	for i := range 3 {
		if n, status := offsetOf(t, url, f.token); n != 0 {
			t.Fatalf("HEAD %d: offset %d, status %d", i, n, status)
		}
	}
	reads, writes = counts.take()
	t.Logf("HEAD: %d reads, %d writes each", reads/3, writes/3)
	if writes != 0 || reads > 3 {
		t.Errorf("3 HEADs made %d reads and %d writes at the API server, want at most one read each and no write", reads, writes)
	}
	resp, raw := tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("half"), "Upload-Offset", "0")
	if resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("a part: %v %s", resp, raw)
	}
	reads, writes = counts.take()
	t.Logf("PATCH (a part): %d reads, %d writes", reads, writes)
	if writes > 2 {
		t.Errorf("a part made %d writes, want its hold and its release", writes)
	}
	resp, raw = tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("done"), "Upload-Offset", "4")
	if resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("the last part: %v %s", resp, raw)
	}
	reads, writes = counts.take()
	t.Logf("PATCH (the last part): %d reads, %d writes", reads, writes)
	url = createUpload(t, base, f.slug, f.token, "ended.bin", 8)
	counts.take()
	if resp, raw := tusRequest(t, http.MethodDelete, url, f.token, nil); resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("DELETE: %v %s", resp, raw)
	}
	reads, writes = counts.take()
	t.Logf("DELETE: %d reads, %d writes", reads, writes)
}

// TestUploadsStayWithinTheirBudget: a namespace's upload records stop at
// its byte budget (refused, never stored past it), metadata counts as it
// is stored, escaped, expired uploads stop counting against the bound on
// uploads at once, and record writes are rate-limited per namespace while
// HEADs go on.
func TestUploadsStayWithinTheirBudget(t *testing.T) {
	f := newFixture(t)
	const budget = 4 << 10
	small := startReplica(t, gateway.Options{StateBudget: storedbytes.Limits{PerNamespace: budget}})
	made := 0
	for ; made < 20; made++ {
		resp, raw := tusRequest(t, http.MethodPost, small+"/"+f.slug+"/uploads/", f.token, nil, "Upload-Length", "1",
			"Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte("b"+strconv.Itoa(made))))
		if resp != nil && resp.status == http.StatusCreated {
			continue
		}
		if resp == nil || resp.status != http.StatusTooManyRequests || !strings.Contains(string(raw), "state_budget_exceeded") {
			t.Fatalf("upload %d: %v %s", made, resp, raw)
		}
		break
	}
	stored := storedFor(t, f.ns)
	t.Logf("%d uploads made, %d bytes stored for the namespace at a budget of %d", made, stored, budget)
	if made == 0 || made == 20 || stored > budget {
		t.Errorf("%d uploads made, %d bytes stored: the budget of %d should refuse within 20", made, stored, budget)
	}
	if left := temporaryFiles(t, f.sshd.Dir); len(left) != made {
		t.Errorf("%d partial files for %d uploads: a refused upload leaves none", len(left), made)
	}

	// 700 control bytes are 700 bytes sent and 4,200 stored.
	meta := "path " + base64.StdEncoding.EncodeToString([]byte("m")) + ",note " + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x01", 700)))
	resp, raw := tusRequest(t, http.MethodPost, baseURL+"/"+f.slug+"/uploads/", f.token, nil, "Upload-Length", "1", "Upload-Metadata", meta)
	if resp == nil || resp.status != http.StatusBadRequest || !strings.Contains(string(raw), "Upload-Metadata") {
		t.Errorf("metadata over the bound once escaped: %v %s", resp, raw)
	}

	g := newFixture(t)
	one := startReplica(t, gateway.Options{Uploads: uploads.Limits{MaxPerNamespace: 1, Expiry: time.Second}})
	url := createUpload(t, one, g.slug, g.token, "first", 1)
	eventuallyFound(t, "the upload expires (404)", func() (bool, string) {
		_, status := offsetOf(t, url, g.token)
		return status == http.StatusNotFound, fmt.Sprint(status)
	})
	createUpload(t, one, g.slug, g.token, "second", 1) // the expired one no longer counts

	h := newFixture(t)
	slow := startReplica(t, gateway.Options{Uploads: uploads.Limits{WritesPerNamespace: 0.001, WritesBurst: 2}})
	url = createUpload(t, slow, h.slug, h.token, "rated", 4)
	// HEADs take nothing of the rate: the part after them is let in.
	for range 3 {
		if n, status := offsetOf(t, url, h.token); n != 0 {
			t.Errorf("HEAD: offset %d, status %d", n, status)
		}
	}
	if resp, raw := tusRequest(t, http.MethodPatch, url, h.token, strings.NewReader("ab"), "Upload-Offset", "0"); resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("a part within the rate, after HEADs: %v %s", resp, raw)
	}
	resp, raw = tusRequest(t, http.MethodPatch, url, h.token, strings.NewReader("cd"), "Upload-Offset", "2")
	if resp == nil || resp.status != http.StatusTooManyRequests || resp.header.Get("Retry-After") == "" || !strings.Contains(string(raw), "rate_limited") {
		t.Errorf("a part over the namespace's rate: %v %s", resp, raw)
	}
	if n, status := offsetOf(t, url, h.token); n != 2 {
		t.Errorf("HEAD over the rate: offset %d, status %d; it writes nothing and is not limited", n, status)
	}
}

// storedFor is the bytes sftpgate stores for namespace, as its budget
// counts them.
func storedFor(t testing.TB, namespace string) int64 {
	t.Helper()
	n, err := (&storedbytes.Budget{Client: k8s, Namespace: gateway.DefaultNamespace}).Used(context.Background(), namespace)
	must(t, err)
	return n
}

// TestUploadEndsWhenItsRootOrScopeNarrows: every part is checked against
// the connection's root and the key's paths as they are now. A key whose
// paths no longer cover the upload is refused (403); an upload begun
// under another root is over (404); nothing is written either way.
func TestUploadEndsWhenItsRootOrScopeNarrows(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	scoped := scopedKey(t, f)
	f.ok(t, "mkdir", `{"path": "`+conformance.ScopedPath+`"}`)
	f.ok(t, "mkdir", `{"path": "narrower"}`)
	scopedURL := createUpload(t, baseURL, f.slug, scoped, path.Join(conformance.ScopedPath, "narrowed.bin"), 4)
	var key v1alpha1.ApiKey
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "scoped"}, &key))
	key.Spec.Paths = []string{"/elsewhere/"}
	must(t, k8s.Update(ctx, &key))
	// Once the gateway knows the key's new paths...
	eventuallyFound(t, "the gateway takes the key's new paths", func() (bool, string) {
		status, _, _ := post(t, ctx, baseURL+"/"+f.slug, scoped, "exists", `{"path": "`+conformance.ScopedPath+`"}`)
		return status == http.StatusForbidden, fmt.Sprint(status)
	})
	eventuallyFound(t, "a part after the key's paths narrowed is refused", func() (bool, string) {
		resp, raw := tusRequest(t, http.MethodPatch, scopedURL, scoped, strings.NewReader("data"), "Upload-Offset", "0")
		if resp != nil && resp.status == http.StatusNoContent {
			t.Fatalf("a part after the key's paths narrowed was written: %s", raw)
		}
		return resp != nil && resp.status == http.StatusForbidden && strings.Contains(string(raw), "path_not_allowed"),
			fmt.Sprintf("%v %s", resp, raw)
	})

	url := createUpload(t, baseURL, f.slug, f.token, "rooted.bin", 4)
	var conn v1alpha1.SftpConnection
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "box"}, &conn))
	conn.Spec.RootPath = filepath.Join(f.sshd.Dir, "narrower")
	must(t, k8s.Update(ctx, &conn))
	// Once the gateway serves the new root (where there is no narrower/)...
	eventuallyFound(t, "the gateway serves the new root", func() (bool, string) {
		status, out := f.call(t, "exists", `{"path": "/narrower"}`)
		return status == http.StatusOK && out["exists"] == false, fmt.Sprintf("%d %v", status, out)
	})
	eventuallyFound(t, "a part after the root narrowed is refused", func() (bool, string) {
		resp, raw := tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("data"), "Upload-Offset", "0")
		if resp != nil && resp.status == http.StatusNoContent {
			t.Fatalf("a part after the root narrowed was written: %s", raw)
		}
		return resp != nil && resp.status == http.StatusNotFound && strings.Contains(string(raw), "root directory"),
			fmt.Sprintf("%v %s", resp, raw)
	})
	for _, name := range []string{"rooted.bin", filepath.Join(conformance.ScopedPath, "narrowed.bin")} {
		if _, err := os.Stat(filepath.Join(f.sshd.Dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written: %v", name, err)
		}
	}
	for _, dir := range []string{f.sshd.Dir, filepath.Join(f.sshd.Dir, conformance.ScopedPath)} {
		for _, name := range temporaryFiles(t, dir) {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() != 0 {
				t.Errorf("the partial file %s holds %d bytes: nothing is written once refused", name, fi.Size())
			}
		}
	}
}
