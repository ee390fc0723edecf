package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/apitoken"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// tusAnswer is the status and headers of an answer to a tus request.
type tusAnswer struct {
	status int
	header http.Header
}

// tusRequest sends one request of the tus protocol with token; headers
// are name, value pairs. A request that got no answer is nil, with the
// error.
func tusRequest(t testing.TB, method, url, token string, body io.Reader, headers ...string) (*tusAnswer, []byte) {
	t.Helper()
	status, header, raw, err := testhttp.Tus(testClient, method, url, token, body, headers...)
	if status == 0 {
		return nil, []byte(err.Error())
	}
	return &tusAnswer{status: status, header: header}, raw
}

// createUpload begins an upload of size bytes to path at base (a
// gateway's URL) and returns its URL.
func createUpload(t testing.TB, base, slug, token, path string, size int) string {
	t.Helper()
	resp, raw := tusRequest(t, http.MethodPost, base+"/"+slug+"/uploads/", token, nil,
		"Upload-Length", strconv.Itoa(size), "Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte(path)))
	if resp == nil || resp.status != http.StatusCreated {
		t.Fatalf("creating an upload of %s: %v %s", path, resp, raw)
	}
	return base + resp.header.Get("Location")
}

// offsetOf asks an upload's offset (HEAD); -1 when it answers otherwise.
func offsetOf(t testing.TB, url, token string) (int, int) {
	t.Helper()
	resp, _ := tusRequest(t, http.MethodHead, url, token, nil)
	if resp == nil || resp.status != http.StatusOK {
		if resp == nil {
			return -1, 0
		}
		return -1, resp.status
	}
	n, _ := strconv.Atoi(resp.header.Get("Upload-Offset"))
	return n, resp.status
}

// cutBody gives data, then fails: a client whose link broke.
type cutBody struct{ r io.Reader }

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("the link broke")
	}
	return n, err
}

// temporaryFiles are the gateway's temporary files in dir.
func temporaryFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range entries {
		if tempname.Is(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestUploadGoesOnThroughAnotherReplica: an upload cut off halfway goes on
// through a second gateway replica from where it stopped, sending only the
// rest to the SFTP server, and its file is the bytes sent.
func TestUploadGoesOnThroughAnotherReplica(t *testing.T) {
	sshd := testsshd.Start(t)
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", sshd.Host, sshd.Port))
	f := serve(t, newConnectionTo(t, proxy.Host, proxy.Port, testsshd.User, sshd.Password, sshd.HostKeyLine, sshd.Dir), sshd)
	other := startReplica(t, gateway.Options{})

	data := make([]byte, 6<<20)
	_, _ = rand.Read(data)
	url := createUpload(t, baseURL, f.slug, f.token, "big.bin", len(data))
	half := len(data) / 2
	req, err := http.NewRequest(http.MethodPatch, url, &cutBody{bytes.NewReader(data[:half])})
	must(t, err)
	req.ContentLength = int64(len(data))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	if resp, err := testClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}

	// The other replica sees what reached the server once the first
	// noticed the cut.
	url = other + strings.TrimPrefix(url, baseURL)
	var offset int
	eventuallyFound(t, fmt.Sprintf("the upload's offset is %d after the cut: what reached the gateway is kept", half), func() (bool, string) {
		offset, _ = offsetOf(t, url, f.token)
		return offset == half, fmt.Sprint(offset)
	})
	before := proxy.Sent()
	resp, raw := tusRequest(t, http.MethodPatch, url, f.token, bytes.NewReader(data[offset:]), "Upload-Offset", strconv.Itoa(offset))
	if resp == nil || resp.status != http.StatusNoContent || resp.header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
		t.Fatalf("the rest: %v %s", resp, raw)
	}
	sent := proxy.Sent() - before
	rest := int64(len(data) - offset)
	t.Logf("the rest, %d bytes, sent %d bytes to the SFTP server (%.3f×)", rest, sent, float64(sent)/float64(rest))
	if sent < rest || sent > rest+rest/20+64<<10 {
		t.Errorf("%d bytes went to the server for the %d bytes of the rest", sent, rest)
	}
	got, err := os.ReadFile(filepath.Join(sshd.Dir, "big.bin"))
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Errorf("the file is %d bytes and not the %d sent", len(got), len(data))
	}
	if left := temporaryFiles(t, sshd.Dir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, status := offsetOf(t, url, f.token); status != http.StatusNotFound {
		t.Errorf("a finished upload answers %d, want 404: it is done", status)
	}
}

// TestUploadIsTheCallersAlone: nobody but the key that began an upload
// can see, continue or end it, not even another key of its namespace.
func TestUploadIsTheCallersAlone(t *testing.T) {
	f := newFixture(t)
	url := createUpload(t, baseURL, f.slug, f.token, "mine.bin", 10)
	if resp, raw := tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("hello"), "Upload-Offset", "0"); resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("the owner's part: %v %s", resp, raw)
	}

	token, keyID := apitoken.NewToken()
	must(t, k8s.Create(context.Background(), &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "neighbour"},
		Spec: v1alpha1.ApiKeySpec{Token: v1alpha1.TokenSource{SHA256: apitoken.Hash(token), KeyID: keyID}}}))
	waitForKey(t, f.slug, token)
	stranger := newFixture(t)
	id := url[strings.LastIndex(url, "/")+1:]
	for _, c := range []struct {
		who, url, token, code string
	}{
		{"another key of the namespace", url, token, "upload_not_found"},
		{"a key of another namespace, at its own connection", baseURL + "/" + stranger.slug + "/uploads/" + id, stranger.token, "upload_not_found"},
		{"a key of another namespace", url, stranger.token, "connection_not_found"},
	} {
		for _, method := range []string{http.MethodHead, http.MethodPatch, http.MethodDelete} {
			var body io.Reader
			if method == http.MethodPatch {
				body = strings.NewReader("world")
			}
			resp, raw := tusRequest(t, method, c.url, c.token, body, "Upload-Offset", "5")
			if resp == nil || resp.status != http.StatusNotFound || (method != http.MethodHead && !strings.Contains(string(raw), c.code)) {
				t.Errorf("%s, %s: %v %s, want 404 %s", c.who, method, resp, raw, c.code)
			}
		}
	}
	if n, _ := offsetOf(t, url, f.token); n != 5 {
		t.Errorf("the owner's upload is at %d, want 5", n)
	}
	if resp, raw := tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("world"), "Upload-Offset", "5"); resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("the owner's last part: %v %s", resp, raw)
	}
	if got, _ := os.ReadFile(filepath.Join(f.sshd.Dir, "mine.bin")); string(got) != "helloworld" {
		t.Errorf("the file holds %q", got)
	}
}

// waitForKey waits until the gateway takes token.
func waitForKey(t testing.TB, slug, token string) {
	t.Helper()
	eventuallyFound(t, "the gateway takes the key", func() (bool, string) {
		status, _ := do(t, http.MethodPost, "/"+slug+"/exists", token, "application/json", `{"path": "/"}`)
		return status == http.StatusOK, fmt.Sprint(status)
	})
}

// TestUploadsBounds: a namespace has at most so many uploads; an upload
// is no larger than a raw upload may be; a checksum is sha256.
func TestUploadsBounds(t *testing.T) {
	f := newFixture(t)
	two := startReplica(t, gateway.Options{Uploads: uploads.Limits{MaxPerNamespace: 2}})
	first := createUpload(t, two, f.slug, f.token, "1", 1)
	createUpload(t, two, f.slug, f.token, "2", 1)
	meta := "path " + base64.StdEncoding.EncodeToString([]byte("3"))
	resp, raw := tusRequest(t, http.MethodPost, two+"/"+f.slug+"/uploads/", f.token, nil, "Upload-Length", "1", "Upload-Metadata", meta)
	if resp == nil || resp.status != http.StatusTooManyRequests || !strings.Contains(string(raw), "too_many_uploads") {
		t.Errorf("a third upload: %v %s", resp, raw)
	}
	if resp, raw := tusRequest(t, http.MethodDelete, first, f.token, nil); resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("ending one: %v %s", resp, raw)
	}
	createUpload(t, two, f.slug, f.token, "3", 1)

	resp, raw = tusRequest(t, http.MethodPost, baseURL+"/"+f.slug+"/uploads/", f.token, nil, "Upload-Length", strconv.Itoa(maxUpload+1), "Upload-Metadata", meta)
	if resp == nil || resp.status != http.StatusRequestEntityTooLarge {
		t.Errorf("an upload over the largest: %v %s", resp, raw)
	}
	url := createUpload(t, baseURL, f.slug, f.token, "md5", 3)
	sum := sha256.Sum256([]byte("abc"))
	resp, raw = tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("abc"), "Upload-Offset", "0", "Upload-Checksum", "md5 "+base64.StdEncoding.EncodeToString(sum[:16]))
	if resp == nil || resp.status != http.StatusBadRequest || !strings.Contains(string(raw), "Upload-Checksum") {
		t.Errorf("an md5 checksum: %v %s", resp, raw)
	}

	resp, raw = tusRequest(t, http.MethodOptions, baseURL+"/"+f.slug+"/uploads/", "", nil)
	h := resp.header
	if resp.status != http.StatusOK || h.Get("Tus-Version") != "1.0.0" || h.Get("Tus-Checksum-Algorithm") != "sha256,sha1" ||
		h.Get("Tus-Max-Size") != strconv.Itoa(maxUpload) || h.Get("Tus-Extension") != "creation,creation-with-upload,termination,expiration,checksum" {
		t.Errorf("OPTIONS: %d %v %s", resp.status, h, raw)
	}
}

// slowBody gives n zero bytes a part at a time, a pause between parts.
type slowBody struct {
	n     int
	pause time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.pause)
	p = p[:min(len(p), b.n, 64<<10)]
	clear(p)
	b.n -= len(p)
	return len(p), nil
}

// TestUploadOneWriterAtATime: while one replica writes to an upload,
// another's part for it waits, and then finds where the first left it
// (a part at an old offset is refused); the file is what was sent.
func TestUploadOneWriterAtATime(t *testing.T) {
	f := newFixture(t)
	other := startReplica(t, gateway.Options{})
	const part = 1 << 20
	url := createUpload(t, baseURL, f.slug, f.token, "one.bin", 2*part)
	first := make(chan *tusAnswer, 1)
	go func() {
		resp, _ := tusRequest(t, http.MethodPatch, url, f.token, &slowBody{n: part, pause: 30 * time.Millisecond}, "Upload-Offset", "0")
		first <- resp
	}()
	// The first holds the upload once its bytes arrive on the server.
	eventually(t, "the first part arrives", func() bool {
		partial := temporaryFiles(t, f.sshd.Dir)
		if len(partial) != 1 {
			return false
		}
		fi, err := os.Stat(filepath.Join(f.sshd.Dir, partial[0]))
		return err == nil && fi.Size() > 0
	})
	// A part sent through the other replica while the first arrives
	// waits for it, and then finds the offset moved. (Without the hold it
	// would be refused at once, the first part still arriving.)
	second, raw := tusRequest(t, http.MethodPatch, other+strings.TrimPrefix(url, baseURL), f.token, strings.NewReader(strings.Repeat("x", part)), "Upload-Offset", "0")
	partial := temporaryFiles(t, f.sshd.Dir)
	if fi, err := os.Stat(filepath.Join(f.sshd.Dir, partial[0])); err != nil || fi.Size() != part {
		t.Errorf("the other replica answered a part while the first was still being written (%v, %v)", fi.Size(), err)
	}
	if second == nil || second.status != http.StatusConflict || !strings.Contains(string(raw), "mismatched_offset") {
		t.Errorf("a part at an offset passed: %v %s, want 409 mismatched_offset", second, raw)
	}
	if done := <-first; done == nil || done.status != http.StatusNoContent {
		t.Fatalf("the first writer: %v", done)
	}
	resp, raw := tusRequest(t, http.MethodPatch, url, f.token, bytes.NewReader(make([]byte, part)), "Upload-Offset", strconv.Itoa(part))
	if resp == nil || resp.status != http.StatusNoContent {
		t.Fatalf("the last part: %v %s", resp, raw)
	}
	got, err := os.ReadFile(filepath.Join(f.sshd.Dir, "one.bin"))
	if err != nil || !bytes.Equal(got, make([]byte, 2*part)) {
		t.Errorf("the file is not the first writer's bytes (%d bytes, %v)", len(got), err)
	}
}

// TestUploadProtocolAnswers: methods an URL does not have, a sha1
// checksum, and the tus headers on every answer.
func TestUploadProtocolAnswers(t *testing.T) {
	f := newFixture(t)
	url := createUpload(t, baseURL, f.slug, f.token, "sums.bin", 6)
	for _, c := range []struct{ method, url, allow string }{
		{http.MethodGet, url, "OPTIONS, HEAD, PATCH, DELETE"},
		{http.MethodPost, url, "OPTIONS, HEAD, PATCH, DELETE"},
		{http.MethodPatch, baseURL + "/" + f.slug + "/uploads/", "OPTIONS, POST"},
	} {
		resp, raw := tusRequest(t, c.method, c.url, f.token, nil)
		if resp == nil || resp.status != http.StatusMethodNotAllowed || resp.header.Get("Allow") != c.allow || !strings.Contains(string(raw), "method_not_allowed") {
			t.Errorf("%s %s: %v %s, want 405 with Allow: %s", c.method, c.url, resp, raw, c.allow)
		}
	}
	sum := sha1.Sum([]byte("abc"))
	resp, raw := tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("abc"), "Upload-Offset", "0",
		"Upload-Checksum", "sha1 "+base64.StdEncoding.EncodeToString(sum[:]))
	if resp == nil || resp.status != http.StatusNoContent {
		t.Errorf("a part with its sha1: %v %s", resp, raw)
	}
	resp, raw = tusRequest(t, http.MethodPatch, url, f.token, strings.NewReader("def"), "Upload-Offset", "3",
		"Upload-Checksum", "sha1 "+base64.StdEncoding.EncodeToString(sum[:]))
	if resp == nil || resp.status != 460 || !strings.Contains(string(raw), "checksum_mismatch") {
		t.Errorf("a part with another's sha1: %v %s", resp, raw)
	}
	for _, token := range []string{f.token, "sgk_nobody"} {
		resp, _ := tusRequest(t, http.MethodHead, url, token, nil)
		if resp == nil || resp.header.Get("Tus-Resumable") != "1.0.0" {
			t.Errorf("HEAD with %.8s...: %v without Tus-Resumable", token, resp)
		}
	}
	if n, _ := offsetOf(t, url, f.token); n != 3 {
		t.Errorf("the upload is at %d, want 3: the refused part was not kept", n)
	}
}
