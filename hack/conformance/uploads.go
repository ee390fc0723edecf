package conformance

// Rows of resumable uploads (tus 1.0 at {slug}/uploads/): a step with a
// tus call sends it; the row's upload is the one its last creation made.

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// tusCall is one request of the tus protocol.
type tusCall struct {
	// method is POST (a new upload of length bytes to path, with body as
	// its first part when set), PATCH (body at offset), HEAD or DELETE.
	method   string
	path     string
	length   int
	meta     string // more Upload-Metadata pairs, as sent ("overwrite ZmFsc2U=")
	body     string
	offset   int
	checksum string // "" none, "good", or "bad"
	// wantOffset, when not -1, is the Upload-Offset the answer must say.
	wantOffset int
}

func create(path string, length int, body, want string) step {
	return step{command: "uploads", want: want, tus: &tusCall{method: http.MethodPost, path: path, length: length, body: body, wantOffset: -1}}
}

func patch(offset int, body, checksum, want string, wantOffset int) step {
	return step{command: "uploads", want: want, tus: &tusCall{method: http.MethodPatch, offset: offset, body: body, checksum: checksum, wantOffset: wantOffset}}
}

func head(want string, wantOffset int) step {
	return step{command: "uploads", want: want, tus: &tusCall{method: http.MethodHead, wantOffset: wantOffset}}
}

var uploadRows = []row{
	{"uploads", "in two parts with checksums, over an existing file", []step{
		ok("write", writeA, ""), ok("chmod", `{"path": "$d/a", "mode": "0640"}`, ""),
		create("$d/a", 11, "", "ok"), only(tempFile, "a"),
		patch(0, "hello ", "good", "ok", 6), head("ok", 6), file("a", "alpha"),
		patch(6, "world", "good", "ok", 11), file("a", "hello world"), only("a"),
		ok("stat", `{"path": "$d/a"}`, `{"mode": "0640"}`), head("404 upload_not_found", -1),
	}},
	{"uploads", "whole with its creation, with parents", []step{
		{command: "uploads", want: "ok", tus: &tusCall{method: http.MethodPost, path: "$d/x/y", length: 3, body: "new", meta: "createParents " + b64("true"), wantOffset: 3}},
		file("x/y", "new"),
	}},
	{"uploads", "a wrong checksum", []step{
		create("$d/c", 5, "", "ok"), patch(0, "abcde", "bad", "460 checksum_mismatch", -1), head("ok", 0), absent("c"),
	}},
	{"uploads", "a part at the wrong offset", []step{create("$d/c", 5, "", "ok"), patch(2, "cde", "", "409 mismatched_offset", -1)}},
	{"uploads", "ended before its end", []step{
		create("$d/e", 5, "", "ok"), patch(0, "ab", "", "ok", 2),
		{command: "uploads", want: "ok", tus: &tusCall{method: http.MethodDelete, wantOffset: -1}},
		head("404 upload_not_found", -1), only(),
	}},
	{"uploads", "overwrite false on an existing file", []step{
		ok("write", writeA, ""),
		{command: "uploads", want: "409 already_exists", tus: &tusCall{method: http.MethodPost, path: "$d/a", length: 1, meta: "overwrite " + b64("false"), wantOffset: -1}},
		file("a", "alpha"), only("a"),
	}},
	{"uploads", "into a missing directory", []step{create("$d/no/a", 1, "", "409 not_found"), only()}},
	{"uploads", "onto a directory", []step{ok("mkdir", mkdirSub, ""), create("$d/sub", 1, "", "409 is_a_directory"), only("sub")}},
	{"uploads", "without a path", []step{create("", 1, "", "400 invalid_request")}},
	{"uploads", "with a key limited to /scoped/", []step{
		asScoped(create("/scoped$d.up", 2, "in", "ok")),
		asScoped(create("$d/out", 1, "", "403 path_not_allowed")), only(),
	}},
	{"uploads", "out of the root", []step{escape, create("$d/escape/f", 1, "", "400 invalid_request")}},
}

// tempFile stands, in only's names, for one temporary file of the
// gateway's.
const tempFile = ".sftpgate-*.tmp"

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// runTus sends a step's tus call; location is the row's upload.
func runTus(t *testing.T, target Target, d string, s step, location *string) {
	t.Helper()
	c := s.tus
	expand := func(v string) string { return strings.ReplaceAll(v, "$d", d) }
	endpoint := target.URL + "/uploads/"
	if c.method != http.MethodPost {
		endpoint = *location
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, endpoint, body)
	must(t, err)
	token := target.Token
	if s.scoped {
		token = target.ScopedToken
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if c.method == http.MethodPost {
		req.Header.Set("Upload-Length", strconv.Itoa(c.length))
		meta := "filename " + b64("ignored.bin")
		if c.path != "" {
			meta += ",path " + b64(expand(c.path))
		}
		if c.meta != "" {
			meta += "," + c.meta
		}
		req.Header.Set("Upload-Metadata", meta)
	}
	if c.method == http.MethodPatch {
		req.Header.Set("Upload-Offset", strconv.Itoa(c.offset))
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	switch c.checksum {
	case "good":
		sum := sha256.Sum256([]byte(c.body))
		req.Header.Set("Upload-Checksum", "sha256 "+base64.StdEncoding.EncodeToString(sum[:]))
	case "bad":
		sum := sha256.Sum256([]byte("not " + c.body))
		req.Header.Set("Upload-Checksum", "sha256 "+base64.StdEncoding.EncodeToString(sum[:]))
	}
	got, header, raw := exchange(t, target, req, c.body)
	what := fmt.Sprintf("%s %s %s", c.method, expand(c.path), c.body)
	if status, code, isHTTP := strings.Cut(s.want, " "); isHTTP {
		if fmt.Sprint(got) != status || (c.method != http.MethodHead && !strings.Contains(string(raw), `"code":"`+code+`"`)) {
			t.Errorf("%s: %d %s, want %s", what, got, raw, s.want)
		}
		return
	}
	if got/100 != 2 || header.Get("Tus-Resumable") != "1.0.0" {
		t.Fatalf("%s: %d %s, want success", what, got, raw)
	}
	if c.method == http.MethodPost {
		*location = req.URL.ResolveReference(mustParse(t, header.Get("Location"))).String()
		if header.Get("Upload-Expires") == "" {
			t.Errorf("%s: no Upload-Expires", what)
		}
	}
	if offset := header.Get("Upload-Offset"); c.wantOffset >= 0 && offset != strconv.Itoa(c.wantOffset) {
		t.Errorf("%s: Upload-Offset %q, want %d", what, offset, c.wantOffset)
	}
}

func mustParse(t *testing.T, ref string) *url.URL {
	t.Helper()
	u, err := url.Parse(ref)
	must(t, err)
	return u
}
