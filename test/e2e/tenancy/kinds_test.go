package tenancy

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
)

// TestFilesOfEveryKind: an FTP connection and a bucket, made with
// kubectl in a team's namespace, are listed beside its connections, and
// their files are browsed, uploaded (tus, through the UI), read, renamed,
// shared and deleted in the web UI as a connection's are.
func TestFilesOfEveryKind(t *testing.T) {
	t.Parallel()
	tn := newTenant(t, "kinds")
	ftpd := testftpd.Start(t)
	conn, secret := ftpd.Connection(tn.ns, "partner")
	conn.Spec.Slug = "ftp-" + tn.slug
	testkit.ReadyFtp(t, k8s, conn, secret)
	s3 := tests3.Start(t)
	s3.Bucket(t, "landing")
	testkit.ReadyStore(t, k8s, tn.ns, "landing", s3, "landing", "in/", func(s *v1alpha1.ObjectStore) {
		// A part must fit the gateway's memory budget, 8 MiB here.
		s.Spec.Slug, s.Spec.Limits.PartSizeMiB = "s3-"+tn.slug, 5
	})

	status, page := tn.ui.Get(t, "/connections")
	for _, want := range []string{`href="/ftpconnections/partner/files?path=%2F"`, `href="/objectstores/landing/files?path=%2F"`, "<dd>FTP</dd>", "<dd>S3</dd>"} {
		if status != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("the connections page (%d) shows no %s", status, want)
		}
	}
	for _, base := range []string{"/ftpconnections/partner", "/objectstores/landing"} {
		t.Run(strings.Split(base, "/")[1], func(t *testing.T) {
			if status, _ := tn.ui.Form(t, base+"/files/mkdir", url.Values{"dir": {"/"}, "name": {"docs"}}); status != http.StatusOK {
				t.Fatalf("a new folder: %d", status)
			}
			upload(t, tn, base, "/docs/a.txt", "hello from "+base)
			status, page := tn.ui.Get(t, base+"/files?path=/docs")
			if status != http.StatusOK || !strings.Contains(page, `data-name="a.txt"`) {
				t.Fatalf("the folder (%d) lists no a.txt: %.500s", status, page)
			}
			if status, page := tn.ui.Get(t, base+"/files/view?path=/docs/a.txt"); status != http.StatusOK || !strings.Contains(page, "hello from "+base) {
				t.Errorf("the text shown (%d): %.500s", status, page)
			}
			if status, body := tn.ui.Get(t, base+"/files/download?path=/docs/a.txt"); status != http.StatusOK || body != "hello from "+base {
				t.Errorf("the download: %d %q", status, body)
			}
			if status, _ := tn.ui.Form(t, base+"/files/rename", url.Values{"path": {"/docs/a.txt"}, "name": {"b.txt"}}); status != http.StatusOK {
				t.Errorf("the rename: %d", status)
			}
			link := shareLinkAt(t, tn, base, url.Values{"path": {"/docs/b.txt"}, "mode": {"Download"}, "expires": {"1d"}})
			if status, body := fetch(t, link); status != http.StatusOK || body != "hello from "+base {
				t.Errorf("the share link's download: %d %q", status, body)
			}
			if status, _ := tn.ui.Form(t, base+"/files/delete", url.Values{"path": {"/docs"}, "directory": {"true"}}); status != http.StatusOK {
				t.Errorf("deleting the folder: %d", status)
			}
			if status, _ := tn.ui.Get(t, base+"/files?path=/docs"); status != http.StatusNotFound {
				t.Errorf("the deleted folder: %d, want 404", status)
			}
		})
	}
	// Another team's page of them is not found.
	other := newClient(t)
	other.SignUp(t)
	if status, _ := other.Get(t, "/ftpconnections/partner/files?path=/"); status != http.StatusNotFound {
		t.Errorf("another account opens the FTP connection's files: %d, want 404", status)
	}
}

// upload sends content to p through the UI's resumable uploads at base,
// in two parts, as the file browser's script does.
func upload(t *testing.T, tn *tenant, base, p, content string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tn.ui.Base+base+"/uploads/", nil)
	must(t, err)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Length", strconv.Itoa(len(content)))
	req.Header.Set("Upload-Metadata", "path "+base64.StdEncoding.EncodeToString([]byte(p)))
	resp, err := tn.ui.HTTP.Do(req)
	must(t, err)
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	location := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || location == "" {
		t.Fatalf("the upload's creation: %d, Location %q: %.300s", resp.StatusCode, location, answer)
	}
	target, err := url.Parse(tn.ui.Base)
	must(t, err)
	at, err := target.Parse(location)
	must(t, err)
	// In two parts, as the browser sends a file larger than its part.
	half := len(content) / 2
	for _, part := range []struct {
		offset int
		body   string
	}{{0, content[:half]}, {half, content[half:]}} {
		req, err = http.NewRequest(http.MethodPatch, at.String(), strings.NewReader(part.body))
		must(t, err)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Upload-Offset", strconv.Itoa(part.offset))
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		if status, body := tn.ui.Do(t, req); status != http.StatusNoContent {
			t.Fatalf("the upload's part at %d: %d %.300s", part.offset, status, body)
		}
	}
}
