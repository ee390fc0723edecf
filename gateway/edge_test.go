package gateway_test

import (
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/gateway"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/httpedge"
)

// TestHeadersBounded: the server Run serves refuses a request whose
// headers pass httpedge.MaxHeaderBytes with 431, before anything reads
// it, and serves one just under it.
func TestHeadersBounded(t *testing.T) {
	f := newFixture(t)
	url := startGateway(t, gateway.Limits{}) + "/" + f.slug + "/exists"
	auth, body := "Bearer "+f.token, `{"path": "/"}`
	for _, c := range []struct {
		name, header, value string
		want                int
	}{
		{"headers just under the bound", "X-Padding", strings.Repeat("a", httpedge.MaxHeaderBytes-4<<10), http.StatusOK},
		{"a header over the bound", "X-Padding", strings.Repeat("a", httpedge.MaxHeaderBytes+8<<10), http.StatusRequestHeaderFieldsTooLarge},
		{"a 180 kB X-Request-Id of 0x80 bytes", "X-Request-Id", strings.Repeat("\x80", 180_000), http.StatusRequestHeaderFieldsTooLarge},
	} {
		status, answer := testhttp.Raw(t, http.MethodPost, url, body, "Authorization", auth, "Content-Type", "application/json", c.header, c.value)
		if status != c.want {
			t.Errorf("%s: %d %.200s, want %d", c.name, status, answer, c.want)
		}
	}
}

// TestMethodOverrideRefused: tusd would take X-HTTP-Method-Override as
// the method after the gateway judged the request's own (a POST sent as
// PATCH would pass as a write of no record); the gateway refuses it
// wherever it comes, with a 400 of its own code.
func TestMethodOverrideRefused(t *testing.T) {
	f := newFixture(t)
	uploads := baseURL + "/" + f.slug + "/uploads/"
	meta := "path " + base64.StdEncoding.EncodeToString([]byte("overridden"))
	for _, method := range []string{http.MethodPatch, http.MethodDelete, http.MethodGet, ""} {
		resp, raw := tusRequest(t, http.MethodPost, uploads, f.token, nil, "Upload-Length", "1", "Upload-Metadata", meta, "X-HTTP-Method-Override", method)
		if resp == nil || resp.status != http.StatusBadRequest || !strings.Contains(string(raw), `"method_override_refused"`) {
			t.Errorf("a POST as %q: %v %s", method, resp, raw)
		}
	}
	req, err := http.NewRequest(http.MethodPost, baseURL+"/"+f.slug+"/exists", strings.NewReader(`{"path": "/"}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-HTTP-Method-Override", http.MethodGet)
	if status, _, raw := send(t, req, `{"path": "/"}`); status != http.StatusBadRequest || !strings.Contains(string(raw), `"method_override_refused"`) {
		t.Errorf("a command with an override: %d %s", status, raw)
	}
	createUpload(t, baseURL, f.slug, f.token, "overridden", 1) // without one, as before
}

// TestRequestIDs: a client's X-Request-Id names its request's audit
// record when it is a short token of safe characters; any other is
// replaced by one the gateway makes, which no client's can be.
func TestRequestIDs(t *testing.T) {
	f := newFixture(t)
	var log testkit.Log
	url := startGatewayWith(t, gateway.Options{Log: slog.New(slog.NewJSONHandler(&log, nil))}) + "/" + f.slug + "/write"
	ids := map[string]string{ // the file written: the id sent
		"kept":       "ci-build.42:7_x",
		"long":       strings.Repeat("a", httpedge.MaxRequestIDBytes+1),
		"binary":     strings.Repeat("\x80", 30_000),
		"control":    "a\x01b",
		"formula":    `=HYPERLINK("http://x")`,
		"a-server's": "host/AbCdEfGhIj-000001",
	}
	for file, id := range ids {
		testhttp.Raw(t, http.MethodPost, url, `{"path": "`+file+`", "file": {"text": "x"}}`, "Authorization", "Bearer "+f.token,
			"Content-Type", "application/json", "X-Request-Id", id)
	}
	eventually(t, "the writes' records", func() bool {
		n := 0
		for _, r := range audit.FromLog(log.String(), "") {
			if r.Action == "gateway.write" {
				n++
			}
		}
		// A control byte is refused by Go's server itself (400), before a
		// handler or a record.
		return n == len(ids)-1
	})
	for _, r := range audit.FromLog(log.String(), "") {
		if r.Action != "gateway.write" {
			continue
		}
		file := r.Paths[0]
		if want := ids[file]; file == "kept" && r.RequestID != want || file != "kept" && (r.RequestID == want || httpedge.ValidRequestID(r.RequestID)) {
			t.Errorf("the write of %s, sent as %.40q, was recorded as %.40q", file, ids[file], r.RequestID)
		}
	}
}
