package uploads_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/answer"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/test/framework"
)

// The test kit's, as every test package has them.
var must = testkit.Must

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(framework.MainWithManager(m, 2, func(_ *envtest.Environment, c client.Client) { k8s = c }))
}

// fixture is an endpoint whose records live in a namespace of their own,
// over one tenant's connection to an in-process SFTP server.
type fixture struct {
	endpoint *uploads.Endpoint
	records  *uploadrecord.Store
	pools    *pool.Pools
	dialer   pool.Dialer
	conn     *v1alpha1.SftpConnection
	dir      string // the server's root, on this machine
}

func newFixture(t *testing.T, limits uploads.Limits) *fixture {
	t.Helper()
	ctx := context.Background()
	srv := testsftp.Start(t)
	recordsNS := testkit.Namespace(t, k8s, "records-")
	f := &fixture{
		records: &uploadrecord.Store{Client: k8s, Namespace: recordsNS},
		conn:    testkit.ReadyConnection(t, k8s, testkit.Namespace(t, k8s, "tenant-"), "box", srv.Login()),
		dir:     srv.Dir,
	}
	policy, err := egress.ParsePolicy(testcluster.LoopbackNetworks)
	must(t, err)
	f.pools = &pool.Pools{Secrets: k8s, IdleTimeout: time.Minute}
	f.dialer = &sftpdial.Dialer{Policy: policy}
	poolCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go f.pools.Run(poolCtx)
	if limits.Expiry == 0 {
		limits.Expiry = time.Hour
	}
	if limits.MaxSize == 0 {
		limits.MaxSize = 1 << 30
	}
	f.endpoint, err = uploads.New(f.records, limits, answerError, nil)
	must(t, err)
	return f
}

// answerError is the gateway's answer to an error, as far as uploads go.
func answerError(err error) error {
	if answered, ok := errors.AsType[*answer.Error](err); ok {
		return answered
	}
	if a := uploads.Answer(err); a != nil {
		return a
	}
	if failure, ok := errors.AsType[*commands.Failure](err); ok {
		return answer.Refused(failure)
	}
	if bad, ok := errors.AsType[*commands.BadRequest](err); ok {
		return answer.InvalidRequest(bad.Error(), bad.Field)
	}
	if _, ok := errors.AsType[*uploadrecord.APIError](err); ok {
		return answer.RecordsUnavailable(err)
	}
	return answer.Internal(err)
}

// send serves one tus request of caller owner, as the gateway does once
// it let the request in.
func (f *fixture) send(t *testing.T, owner types.UID, method, id string, header map[string]string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	return f.sendWithin(t, context.Background(), owner, method, id, header, body)
}

// sendWithin is send with the request's context ctx.
func (f *fixture) sendWithin(t *testing.T, ctx context.Context, owner types.UID, method, id string, header map[string]string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	p, err := f.pools.Get(ctx, f.dialer, f.conn)
	must(t, err)
	r := httptest.NewRequestWithContext(ctx, method, "/box/uploads/"+id, bytes.NewReader(body))
	r.Header.Set("Tus-Resumable", "1.0.0")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	if method == http.MethodPatch {
		r.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	w := httptest.NewRecorder()
	f.endpoint.Serve(w, r, &uploads.Request{
		Conn: f.conn, Owner: owner, Pool: p, Env: &commands.Env{Root: f.conn.Status.RootPath},
		OpTimeout: 10 * time.Second, StreamTimeout: time.Minute,
		ReadAhead:  func(body io.Reader) (io.Reader, func(bool)) { return body, func(bool) {} },
		Collection: "/box/uploads/",
	}, id)
	return w
}

// create begins an upload of size bytes to name, and returns its id.
func (f *fixture) create(t *testing.T, owner types.UID, name string, size int) string {
	t.Helper()
	w := f.send(t, owner, http.MethodPost, "", map[string]string{
		"Upload-Length":   strconv.Itoa(size),
		"Upload-Metadata": "path " + base64.StdEncoding.EncodeToString([]byte(name)),
	}, nil)
	if w.Code != http.StatusCreated {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
	return strings.TrimPrefix(w.Header().Get("Location"), "/box/uploads/")
}

func (f *fixture) offset(t *testing.T, owner types.UID, id string) string {
	t.Helper()
	w := f.send(t, owner, http.MethodHead, id, nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("HEAD: %d %s", w.Code, w.Body)
	}
	return w.Header().Get("Upload-Offset")
}

// partials are the partial files on the server.
func (f *fixture) partials(t *testing.T) []string {
	t.Helper()
	var found []string
	must(t, filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && tempname.Is(d.Name()) {
			found = append(found, p)
		}
		return err
	}))
	return found
}

// TestAnUploadInPartsArrivesWhole: the parts gather in a partial file;
// the target appears only with the last byte, whole; a part whose
// checksum is wrong is refused and changes nothing; the record goes
// with the upload.
func TestAnUploadInPartsArrivesWhole(t *testing.T) {
	f := newFixture(t, uploads.Limits{MaxPerNamespace: 10})
	const owner = types.UID("owner")
	content := make([]byte, 300_000)
	_, _ = rand.Read(content)
	must(t, os.Mkdir(filepath.Join(f.dir, "in"), 0o755))
	id := f.create(t, owner, "in/file.bin", len(content))
	target := filepath.Join(f.dir, "in", "file.bin")

	patch := func(from, to int, header map[string]string) *httptest.ResponseRecorder {
		h := map[string]string{"Upload-Offset": strconv.Itoa(from)}
		for k, v := range header {
			h[k] = v
		}
		return f.send(t, owner, http.MethodPatch, id, h, content[from:to])
	}
	if w := patch(0, 100_000, nil); w.Code != http.StatusNoContent || w.Header().Get("Upload-Offset") != "100000" {
		t.Fatalf("first part: %d, offset %s: %s", w.Code, w.Header().Get("Upload-Offset"), w.Body)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("the target is there before its last byte: %v", err)
	}
	wrong := sha256.Sum256([]byte("something else"))
	w := patch(100_000, 200_000, map[string]string{"Upload-Checksum": "sha256 " + base64.StdEncoding.EncodeToString(wrong[:])})
	if w.Code != answer.StatusChecksumMismatch {
		t.Errorf("a part with a wrong checksum: %d %s", w.Code, w.Body)
	}
	if got := f.offset(t, owner, id); got != "100000" {
		t.Errorf("after a refused part the offset is %s, want 100000", got)
	}
	sum := sha256.Sum256(content[100_000:])
	if w := patch(100_000, len(content), map[string]string{"Upload-Checksum": "sha256 " + base64.StdEncoding.EncodeToString(sum[:])}); w.Code != http.StatusNoContent {
		t.Fatalf("last part: %d %s", w.Code, w.Body)
	}
	got, err := os.ReadFile(target)
	must(t, err)
	if !bytes.Equal(got, content) {
		t.Errorf("the target holds %d bytes, not the %d sent", len(got), len(content))
	}
	if left := f.partials(t); len(left) != 0 {
		t.Errorf("partial files left: %v", left)
	}
	// Every record, whenever it expires.
	if recs, err := f.records.Expired(context.Background(), time.Now().AddDate(100, 0, 0)); err != nil || len(recs) != 0 {
		t.Errorf("records left: %d (%v)", len(recs), err)
	}
}

// TestAnotherCallersUploadIsNone: every request for an upload another
// caller began is answered as for no upload at all, and changes nothing.
func TestAnotherCallersUploadIsNone(t *testing.T) {
	f := newFixture(t, uploads.Limits{MaxPerNamespace: 10})
	id := f.create(t, "owner", "mine.bin", 10)
	for _, method := range []string{http.MethodHead, http.MethodPatch, http.MethodDelete} {
		w := f.send(t, "stranger", method, id, map[string]string{"Upload-Offset": "0"}, []byte("0123456789"))
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "upload_not_found") {
			t.Errorf("%s of another caller's upload: %d %s", method, w.Code, w.Body)
		}
	}
	if got := f.offset(t, "owner", id); got != "0" {
		t.Errorf("the owner's upload is at %s after a stranger's requests", got)
	}
	if len(f.partials(t)) != 1 {
		t.Errorf("partial files: %v, want the owner's", f.partials(t))
	}
}

// TestUploadsPerNamespaceAreBounded: past the namespace's bound a new
// upload is refused, leaving nothing behind; ending one makes room.
func TestUploadsPerNamespaceAreBounded(t *testing.T) {
	f := newFixture(t, uploads.Limits{MaxPerNamespace: 2})
	first := f.create(t, "owner", "a.bin", 10)
	f.create(t, "owner", "b.bin", 10)
	w := f.send(t, "owner", http.MethodPost, "", map[string]string{
		"Upload-Length": "10", "Upload-Metadata": "path " + base64.StdEncoding.EncodeToString([]byte("c.bin")),
	}, nil)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "too_many_uploads") {
		t.Errorf("a third upload: %d %s", w.Code, w.Body)
	}
	if n := len(f.partials(t)); n != 2 {
		t.Errorf("%d partial files after a refused upload, want 2", n)
	}
	if w := f.send(t, "owner", http.MethodDelete, first, nil, nil); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	f.create(t, "owner", "c.bin", 10)
}

// TestAnUploadWhoseLastAnswerWasLostEndsForItsClient: the last part
// reached the server but its answer was lost (chaos seed 2, a link cut).
// The client, still at its old offset, sends the part again and is told
// the offset moved (409); the HEAD it then sends says the upload is
// whole. Whether the file was put in place already or not, the 409 must
// not end the upload where the client cannot see it.
func TestAnUploadWhoseLastAnswerWasLostEndsForItsClient(t *testing.T) {
	for _, placed := range []bool{false, true} {
		t.Run(map[bool]string{false: "bytes there", true: "file in place"}[placed], func(t *testing.T) {
			f := newFixture(t, uploads.Limits{MaxPerNamespace: 10})
			const owner = types.UID("owner")
			content := []byte("0123456789")
			id := f.create(t, owner, "file.bin", len(content))
			if w := f.send(t, owner, http.MethodPatch, id, map[string]string{"Upload-Offset": "0"}, content[:5]); w.Code != http.StatusNoContent {
				t.Fatalf("first part: %d %s", w.Code, w.Body)
			}
			// The last part's bytes arrive; its answer does not.
			partial := f.partials(t)[0]
			must(t, os.WriteFile(partial, content, 0o600))
			if placed {
				must(t, os.Rename(partial, filepath.Join(f.dir, "file.bin")))
			}
			if w := f.send(t, owner, http.MethodPatch, id, map[string]string{"Upload-Offset": "5"}, content[5:]); w.Code != http.StatusConflict {
				t.Errorf("the last part again: %d %s, want 409", w.Code, w.Body)
			}
			if got := f.offset(t, owner, id); got != "10" {
				t.Errorf("HEAD after the 409 says offset %s, want 10", got)
			}
			got, err := os.ReadFile(filepath.Join(f.dir, "file.bin"))
			if err != nil || !bytes.Equal(got, content) {
				t.Errorf("the target holds %q (%v)", got, err)
			}
			if recs, err := f.records.Expired(context.Background(), time.Now().AddDate(100, 0, 0)); err != nil || len(recs) != 0 {
				t.Errorf("records left: %d (%v)", len(recs), err)
			}
		})
	}
}

// TestAHoldThatOutlastsTheRequestIsBusy: a HEAD that finds an upload
// whole must hold it to put its file in place; while another replica's
// hold (here, a dead one's) outlasts the request, the answer is 423,
// which a client retries, and never a 500 (chaos seed 2).
func TestAHoldThatOutlastsTheRequestIsBusy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, uploads.Limits{MaxPerNamespace: 10})
	const owner = types.UID("owner")
	id := f.create(t, owner, "file.bin", 4)
	must(t, os.WriteFile(f.partials(t)[0], []byte("0123"), 0o600))
	must(t, f.records.Hold(context.Background(), id, "a-dead-replica", time.Now().Add(time.Hour)))
	// tusd lets a request's work run on for a while after its client
	// left; the hold's wait ends with that.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if w := f.sendWithin(t, ctx, owner, http.MethodHead, id, nil, nil); w.Code != http.StatusLocked {
		t.Fatalf("HEAD while held: %d %s, want 423", w.Code, w.Body)
	}
}
