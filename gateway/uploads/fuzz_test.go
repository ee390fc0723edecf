package uploads_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/uploads"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// apiAway is a Kubernetes API server that answers nothing: the records of
// uploads cannot be read or written. Any call but those the records make
// panics (its Client is nil).
type apiAway struct{ client.Client }

var errAway = errors.New("the API server is away")

func (apiAway) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errAway
}
func (apiAway) List(context.Context, client.ObjectList, ...client.ListOption) error { return errAway }
func (apiAway) Create(context.Context, client.Object, ...client.CreateOption) error {
	return errAway
}
func (apiAway) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return errAway
}
func (apiAway) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errAway
}
func (apiAway) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errAway
}

// FuzzTus: whatever tus headers, metadata, method and id a caller sends
// (Upload-Length, Upload-Offset, Upload-Checksum, Upload-Metadata and
// the rest), the endpoint answers it in the gateway's envelope, as the
// caller's mistake (4xx) or as records unavailable (503, every record
// refused here): never another server error, never a panic; and one the
// checksum refuses says so before any record is read.
func FuzzTus(f *testing.F) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	id := strings.Repeat("a", 26)
	for _, c := range []struct {
		method                                              byte
		id, length, offset, checksum, metadata, contentType string
	}{
		{0, "", "5", "", "", "path " + b64("a.txt"), ""},
		{0, "", "-1", "", "", "path " + b64("a.txt"), ""},
		{0, "", "99999999999999999999", "", "sha256 " + b64(strings.Repeat("x", 32)), "path " + b64("a.txt"), "application/offset+octet-stream"},
		{0, "", "5", "", "md5 x", "path " + b64(""), ""},
		{0, "", "5", "", "", "path " + b64("a") + ",mode " + b64("999") + ",overwrite " + b64("maybe"), ""},
		{0, "", "", "", "", "filename " + b64("x"), ""},
		{1, id, "", "0", "", "", "application/offset+octet-stream"},
		{1, id, "5", "-3", "sha1 !!", "", "application/offset+octet-stream"},
		{1, "../x", "", "0", "", "", "text/plain"},
		{2, id, "", "", "", "", ""},
		{3, id, "", "", "", "", ""},
		{4, "", "", "", "", "", ""},
		{5, id, "", "", "", "", ""},
	} {
		f.Add(c.method, c.id, c.length, c.offset, c.checksum, c.metadata, c.contentType, "", []byte("hello"))
	}
	f.Add(byte(0), "", "5", "", "", "path "+b64("a"), "", "PATCH", []byte("hello"))
	records := &uploadrecord.Store{Client: apiAway{}, Namespace: "records"}
	endpoint, err := uploads.New(records, uploads.Limits{Expiry: time.Hour, MaxPerNamespace: 10, MaxSize: 1 << 20}, answerError, nil)
	if err != nil {
		f.Fatal(err)
	}
	methods := []string{http.MethodPost, http.MethodPatch, http.MethodHead, http.MethodDelete, http.MethodOptions, http.MethodGet}
	conn := &v1alpha1.SftpConnection{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "box", UID: "conn-uid"}}
	f.Fuzz(func(t *testing.T, method byte, id, length, offset, checksum, metadata, contentType, override string, body []byte) {
		r := httptest.NewRequest(methods[int(method)%len(methods)], "/box/uploads/", bytes.NewReader(body))
		for name, value := range map[string]string{"Tus-Resumable": "1.0.0", "Upload-Length": length, "Upload-Offset": offset,
			"Upload-Checksum": checksum, "Upload-Metadata": metadata, "Content-Type": contentType, "X-HTTP-Method-Override": override} {
			if value != "" {
				r.Header[name] = []string{value}
			}
		}
		w := httptest.NewRecorder()
		endpoint.Serve(w, r, &uploads.Request{
			Conn: conn, Owner: "owner", Env: &commands.Env{Root: "/srv"},
			OpTimeout: time.Second, StreamTimeout: time.Second,
			ReadAhead:  func(body io.Reader) (io.Reader, func(bool)) { return body, func(bool) {} },
			Collection: "/box/uploads/",
		}, id)
		status := w.Code
		if status < 400 {
			if status != http.StatusNoContent && status != http.StatusOK {
				t.Fatalf("%s %q: %d %s with no record written", r.Method, id, status, w.Body)
			}
			return
		}
		var envelope struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &envelope); err != nil || envelope.Error.Code == "" {
			t.Fatalf("%s %q: %d %q is not the gateway's envelope", r.Method, id, status, w.Body)
		}
		if status >= 500 && envelope.Error.Code != "records_unavailable" {
			t.Fatalf("%s %q: %d %s", r.Method, id, status, w.Body)
		}
		if _, err := commands.ParseChecksum(checksum); err != nil && (r.Method == http.MethodPost || r.Method == http.MethodPatch) && status != http.StatusBadRequest {
			t.Fatalf("Upload-Checksum %q: %d %s", checksum, status, w.Body)
		}
	})
}
