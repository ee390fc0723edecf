package share

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/tus/tusd/v2/pkg/handler"
	"golang.org/x/crypto/bcrypt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/web"
	"github.com/sftpgate/sftpgate/webui/internal/web/webtest"
)

// The fuzz tests run the partner's pages on a core of their own, which
// needs no cluster.
func fuzzUI(tb testing.TB) *Pages {
	return &Pages{Gateway: &gw.Gateway{Core: webtest.Core(tb)}}
}

// FuzzShareToken: a token reads as a link's only when it names one
// Kubernetes can hold (its namespace a label, its name a subdomain), and
// a token made for that link reads back as it.
func FuzzShareToken(f *testing.F) {
	for _, token := range []string{"", "sgs_", "sgs_c2Z0cGdhdGUtYWJjL3Ez_ABC", v1alpha1.NewShareToken("sftpgate-abc", "share-1"), v1alpha1.NewShareToken("ns", "a/b"),
		v1alpha1.NewShareToken("ns", ".."), v1alpha1.NewShareToken("", "x"), v1alpha1.NewShareToken("ns", strings.Repeat("x", 300)), "sgs_!!!_x", "sgs_" + strings.Repeat("_", 5)} {
		f.Add(token)
	}
	f.Fuzz(func(t *testing.T, token string) {
		namespace, name, ok := shareLinkOf(token)
		if !ok {
			return
		}
		if len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("%q reads as %q/%q, which no link can be", token, namespace, name)
		}
		again := v1alpha1.NewShareToken(namespace, name)
		if ns, n, ok := shareLinkOf(again); !ok || ns != namespace || n != name {
			t.Fatalf("a token of %q/%q reads as %q/%q (%v)", namespace, name, ns, n, ok)
		}
	})
}

// FuzzSharePassword: whatever a link's password form, HTTP Basic and
// cookie hold, the link lets the request in only when the password given
// is the link's, or the browser's cookie (the UI's own) says it was; any
// other answer is a refusal for the holder, and a browser let in by its
// password is let in again by the cookie it got.
func FuzzSharePassword(f *testing.F) {
	const password = "correct horse"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		f.Fatal(err)
	}
	share := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l", UID: "uid-1"}, Spec: v1alpha1.ShareLinkSpec{PasswordHash: string(hash)}}
	for _, form := range []string{"", "password=correct+horse", "password=wrong", "password=" + strings.Repeat("x", 80), "password=%ZZ", "password=a&password=correct+horse",
		"password=correct%20horse%00"} {
		f.Add(form, "application/x-www-form-urlencoded", "", false, "")
	}
	f.Add("", "", "correct horse", true, "")
	f.Add("password=wrong", "application/x-www-form-urlencoded", "correct horse", true, "")
	f.Add("", "multipart/form-data; boundary=x", "", false, "MTcxNjIzOTAyMnxhYmN8")
	f.Add("--x\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\ncorrect horse\r\n--x--\r\n", "multipart/form-data; boundary=x", "", false, "")
	u := fuzzUI(f)
	f.Fuzz(func(t *testing.T, form, contentType, basic string, useBasic bool, cookie string) {
		r := httptest.NewRequest(http.MethodPost, "/s/token", strings.NewReader(form))
		r.Header.Set("Content-Type", contentType)
		if useBasic {
			r.SetBasicAuth("", basic)
		}
		if cookie != "" {
			r.Header.Set("Cookie", web.ShareCookie+"="+cookie)
		}
		w := httptest.NewRecorder()
		err := u.sharePassword(w, r, share)
		given := r.PostFormValue("password")
		if _, p, ok := r.BasicAuth(); ok {
			given = p
		}
		var refusal *shareRefusal
		switch {
		case err == nil && given != password:
			t.Fatalf("let in with %q", given)
		case err == nil:
			again := httptest.NewRequest(http.MethodGet, "/s/token", nil)
			for _, c := range w.Result().Cookies() {
				again.AddCookie(c)
			}
			if err := u.sharePassword(httptest.NewRecorder(), again, share); err != nil {
				t.Fatalf("the cookie of a browser let in does not let it in again: %v", err)
			}
		case !errors.As(err, &refusal) || refusal.status != http.StatusUnauthorized:
			t.Fatalf("%v: not a refusal asking for the password", err)
		case given == password && len(given) <= 72:
			t.Fatalf("the link's password refused: %v", err)
		}
	})
}

// FuzzShareUpload: whatever a drop box's upload says of itself
// (Upload-Metadata, Upload-Length), it is refused for its holder, or
// makes a file of one name directly in the shared folder, allowed by the
// link's names and size, that tusd reads back from the metadata the UI
// sends on, never replacing a file.
func FuzzShareUpload(f *testing.F) {
	for _, c := range []struct{ metadata, length string }{{"path " + b64("a.csv"), "5"}, {"path " + b64("../../x.csv"), "5"}, {"path " + b64("a.csv") + ",path " + b64("b.txt"), "5"},
		{"path " + b64("dir/"), "1"}, {"path " + b64(".."), "1"}, {"path " + b64(" x.csv "), "-1"}, {"path " + b64("\x00.csv"), "1"}, {"path !!", "1"}, {"", "1"},
		{"path " + b64(strings.Repeat("n", 300)+".csv"), "1"}, {"path " + b64("a.csv"), "99999999999999999999"}, {"path " + b64("a.csv"), ""}} {
		f.Add(c.metadata, c.length, "/drop", "*.csv", int64(1))
		f.Add(c.metadata, c.length, "/", "", int64(0))
	}
	f.Fuzz(func(t *testing.T, metadata, length, folder, allowed string, maxMB int64) {
		folder = path.Clean("/" + folder) // a link's path is clean and absolute (browsePath)
		share := &v1alpha1.ShareLink{Spec: v1alpha1.ShareLinkSpec{Path: folder, Mode: v1alpha1.ShareUpload, Upload: &v1alpha1.ShareUploadLimits{}}}
		if allowed != "" {
			share.Spec.Upload.AllowedNames = strings.Split(allowed, ",")
		}
		if maxMB > 0 {
			limit := maxMB % (1 << 20) << 20
			share.Spec.Upload.MaxFileBytes = &limit
		}
		h := http.Header{"Upload-Metadata": {metadata}, "Upload-Length": {length}}
		name, err := shareUploadName(share, h)
		if err != nil {
			if !errors.As(err, new(*shareRefusal)) {
				t.Fatalf("%v is not a refusal for the link's holder", err)
			}
			return
		}
		if _, err := gw.EntryName(name); err != nil || path.Base(name) != name {
			t.Fatalf("%q from %q: not one name", name, metadata)
		}
		if up := share.Spec.Upload; len(up.AllowedNames) > 0 && !matchesAny(up.AllowedNames, name) {
			t.Fatalf("%q, which the link's names %q do not take", name, up.AllowedNames)
		}
		if n, err := strconv.ParseInt(length, 10, 64); share.Spec.Upload.MaxFileBytes != nil && (err != nil || n > *share.Spec.Upload.MaxFileBytes) {
			t.Fatalf("%q bytes taken, the most is %d", length, *share.Spec.Upload.MaxFileBytes)
		}
		sent := handler.ParseMetadataHeader(shareUploadMetadata(share, name))
		if p := sent["path"]; path.Dir(p) != folder || path.Base(p) != name || sent["overwrite"] != "false" || sent["filename"] != name {
			t.Fatalf("%q in %q is sent as %q", name, folder, sent)
		}
	})
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func matchesAny(patterns []string, name string) bool {
	for _, g := range patterns {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// FuzzPartnerAnswer: whatever the gateway answers a drop box's upload, a
// refusal reaches the partner as the gateway's status and the UI's own
// words in JSON, none of the gateway's (which name the owner's folder).
func FuzzPartnerAnswer(f *testing.F) {
	f.Add(409, `{"error":{"code":"already_exists","message":"/incoming/a.csv: already exists"}}`, "a.csv")
	f.Add(413, `not json`, "")
	f.Add(503, `{"error":{"code":"connection_not_ready","message":"/secret/folder"}}`, "b")
	f.Add(204, ``, "")
	f.Fuzz(func(t *testing.T, status int, body, name string) {
		status = 100 + (status%500+500)%500
		resp := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		if err := partnerAnswer(resp, name); err != nil {
			t.Fatal(err)
		}
		if status < http.StatusBadRequest {
			return
		}
		var got struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Error.Message == "" || got.Error.Code == "" {
			t.Fatalf("%d %q: the partner gets %+v (%v)", status, body, got, err)
		}
		if resp.StatusCode != status || len(body) > 8 && strings.Contains(got.Error.Message, body) {
			t.Fatalf("%d %q: answered %d %q", status, body, resp.StatusCode, got.Error.Message)
		}
	})
}
