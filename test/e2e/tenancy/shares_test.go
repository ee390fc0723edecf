package tenancy

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// shareLinkURL makes a share link of tn's web UI connection with the
// form's values, and returns the link the one page shows.
func shareLinkURL(t *testing.T, tn *tenant, values url.Values) string {
	t.Helper()
	return shareLinkAt(t, tn, "/connections/"+tn.uiConn, values)
}

// shareLinkAt makes a link from the files of the pages at base.
func shareLinkAt(t *testing.T, tn *tenant, base string, values url.Values) string {
	t.Helper()
	status, body := tn.ui.Form(t, base+"/shares", values)
	m := regexp.MustCompile(`id="share-url">([^<]+)<`).FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("making a share link of %v: %d %s", values, status, body)
	}
	return m[1]
}

// fetch GETs url as curl would (no cookies, Accept */*), with headers as
// name, value pairs.
func fetch(t *testing.T, rawURL string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	must(t, err)
	req.Header.Set("Accept", "*/*")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(body)
}

// shareUses is the link's count of uses.
func shareUses(t *testing.T, namespace, name string) int64 {
	t.Helper()
	var s v1alpha1.ShareLink
	must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &s))
	return s.Status.Uses
}

// TestShareLinks: a partner with no account downloads from a folder's
// link in a browser and with curl, and uploads into a drop box with a
// password through the browser's resumable uploads; each use counts and
// is audited, a link used up, deleted, expired or used from outside its
// addresses is refused, and a drop box refuses names and sizes it does
// not take, and replacing a file.
func TestShareLinks(t *testing.T) {
	t.Parallel()
	owner := newTenant(t, "sharer")
	must(t, os.MkdirAll(filepath.Join(owner.sshd.Dir, "reports"), 0o755))
	// The server's user (not the test's) writes into the drop box.
	must(t, os.MkdirAll(filepath.Join(owner.sshd.Dir, "dropbox"), 0o777))
	must(t, os.Chmod(filepath.Join(owner.sshd.Dir, "dropbox"), 0o777))
	must(t, os.WriteFile(filepath.Join(owner.sshd.Dir, "reports", "q3.csv"), []byte("id,total\n1,42\n"), 0o644))

	// A link to nothing, or to a file as a drop box, is refused when
	// made, beside each field to change, what was typed kept.
	for path, wants := range map[string][]string{
		"/reports/q4.csv": {"There is no file or folder /reports/q4.csv on " + owner.uiConn, `id="maxUses-error"`},
		"/reports/q3.csv": {"An upload link needs a folder, and /reports/q3.csv is a file", `id="maxUses-error"`},
	} {
		mode := map[string]string{"/reports/q4.csv": "Download", "/reports/q3.csv": "Upload"}[path]
		status, page := owner.ui.Form(t, "/connections/"+owner.uiConn+"/shares", url.Values{"path": {path}, "mode": {mode}, "expires": {"7d"}, "maxUses": {"0"}})
		if status != http.StatusUnprocessableEntity {
			t.Errorf("a %s link to %s: %d, want 422", mode, path, status)
		}
		for _, want := range append(wants, `id="path-error"`, `value="`+path+`"`) {
			if !strings.Contains(page, want) {
				t.Errorf("a %s link to %s: the form does not show %s", mode, path, want)
			}
		}
	}

	download := shareLinkURL(t, owner, url.Values{"name": {"q3"}, "path": {"/reports"}, "mode": {"Download"}, "expires": {"7d"}, "maxUses": {"2"}})
	ctx := testwebui.Browser(t)
	must(t, chromedp.Do(ctx, chromedp.Navigate(download), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="q3.csv"]`))))
	testwebui.CheckPage(t, ctx, "share link: a folder")
	if shareUses(t, owner.ns, "q3") != 0 {
		t.Error("listing the folder counted as a use")
	}
	if status, body := fetch(t, download+"?path=/q3.csv&download=1"); status != http.StatusOK || body != "id,total\n1,42\n" {
		t.Fatalf("curl's download: %d %q", status, body)
	}
	if status, _ := fetch(t, download+"?path=/q3.csv&download=1"); status != http.StatusOK {
		t.Fatalf("the second download: %d", status)
	}
	if status, _ := fetch(t, download+"?path=/q3.csv&download=1"); status != http.StatusGone {
		t.Errorf("a third download of a link of two uses: %d, want 410", status)
	}
	if n := shareUses(t, owner.ns, "q3"); n != 2 {
		t.Errorf("the link counts %d uses, want 2", n)
	}

	// A file's own link: curl gets the bytes; deleted, the link is gone.
	file := shareLinkURL(t, owner, url.Values{"name": {"q3-file"}, "path": {"/reports/q3.csv"}, "mode": {"Download"}, "expires": {"1d"}})
	if status, body := fetch(t, file); status != http.StatusOK || body != "id,total\n1,42\n" {
		t.Fatalf("curl on a file's link: %d %q", status, body)
	}
	if status, _ := owner.ui.Form(t, "/shares/q3-file/delete", nil); status != http.StatusOK {
		t.Fatalf("deleting the link: %d", status)
	}
	if status, _ := fetch(t, file); status != http.StatusNotFound {
		t.Errorf("a deleted link: %d, want 404", status)
	}

	// Links made with kubectl: one expired, one only from another network.
	base, _, _ := strings.Cut(download, "/s/")
	for name, mutate := range map[string]func(*v1alpha1.ShareLinkSpec){
		"expired":   func(s *v1alpha1.ShareLinkSpec) { s.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Minute)} },
		"elsewhere": func(s *v1alpha1.ShareLinkSpec) { s.AllowedCIDRs = []string{"203.0.113.0/24"} },
	} {
		token := "sgs_" + base64.RawURLEncoding.EncodeToString([]byte(owner.ns+"/"+name)) + "_" + strings.Repeat("C", 52)
		link := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: owner.ns, Name: name},
			Spec: v1alpha1.ShareLinkSpec{Connection: owner.uiConn, Path: "/reports/q3.csv", TokenSHA256: apitoken.Hash(token)}}
		mutate(&link.Spec)
		must(t, k8s.Create(context.Background(), link))
		want := map[string]int{"expired": http.StatusGone, "elsewhere": http.StatusForbidden}[name]
		if status, _ := fetch(t, base+"/s/"+token); status != want {
			t.Errorf("the %s link: %d, want %d", name, status, want)
		}
		if name == "expired" {
			must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/s/"+token), chromedp.WaitVisible(chromedp.CSS("main h1"))))
			testwebui.CheckPage(t, ctx, "share link: expired")
		}
	}

	drop := shareLinkURL(t, owner, url.Values{"name": {"drop"}, "path": {"/dropbox"}, "mode": {"Upload"}, "expires": {"7d"},
		"password": {"partner secret"}, "maxFileMB": {"1"}, "names": {"*.csv"}})
	if status, _ := fetch(t, drop); status != http.StatusUnauthorized {
		t.Errorf("a link with a password, without it: %d, want 401", status)
	}
	must(t, chromedp.Do(ctx, chromedp.Navigate(drop), chromedp.WaitVisible(chromedp.ID("password"))))
	testwebui.CheckPage(t, ctx, "share link: its password")
	must(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("password"), "partner secret"), chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`label[for="upload-files"]`))))
	testwebui.CheckPage(t, ctx, "share link: a drop box")
	intro, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#files")))
	must(t, err)
	for _, says := range []string{"Send files to " + owner.ui.Email, "Shared by " + owner.ui.Email + ", until", "up to 1 MB", "Only files ending in .csv"} {
		if !strings.Contains(intro, says) {
			t.Errorf("the drop box does not say %q: %q", says, intro)
		}
	}
	// The page stays as it is while the partner sends files: it says
	// which arrived, and how many.
	must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.stayed = true`)))
	dir := t.TempDir()
	invoice, again := filepath.Join(dir, "invoice.csv"), filepath.Join(t.TempDir(), "invoice.csv")
	must(t, os.WriteFile(invoice, []byte("invoice,amount\n7,99\n"), 0o644))
	must(t, os.WriteFile(again, []byte("a second one"), 0o644))
	must(t, chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload-files"), []string{invoice}),
		chromedp.WaitVisible(chromedp.ID("upload-summary"))))
	landed := filepath.Join(owner.sshd.Dir, "dropbox", "invoice.csv")
	if b, err := os.ReadFile(landed); err != nil || string(b) != "invoice,amount\n7,99\n" {
		t.Errorf("the partner's upload is not in the drop box: %q %v", b, err)
	}
	// The same name again: refused in words that name no folder of the
	// owner's.
	must(t, chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload-files"), []string{again}),
		chromedp.WaitVisible(chromedp.CSS("#uploads li.failed"))))
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.stayed + " " + document.getElementById("upload-summary").textContent + " " + document.getElementById("uploads").textContent`))
	must(t, err)
	if !strings.HasPrefix(shown, "true 1 file sent.") || !strings.Contains(shown, "sent") || !strings.Contains(shown, "A file named invoice.csv was sent here already") ||
		strings.Contains(shown, "dropbox") {
		t.Errorf("after a file sent and one refused the page shows %q", shown)
	}
	testwebui.CheckPage(t, ctx, "share link: a drop box (one sent, one refused)")
	// Each upload begun is a use, the one the server refused too.
	if n := shareUses(t, owner.ns, "drop"); n != 2 {
		t.Errorf("the drop box counts %d uses, want 2", n)
	}
	// What a drop box refuses, with its password given as curl would.
	for what, tc := range map[string]struct {
		name   string
		length string
		want   int
	}{
		"a name it does not take":   {"invoice.exe", "5", http.StatusBadRequest},
		"a file over its size":      {"big.csv", "2000000", http.StatusRequestEntityTooLarge},
		"replacing a file uploaded": {"invoice.csv", "5", http.StatusConflict},
	} {
		meta := "path " + b64(tc.name)
		req, err := http.NewRequest(http.MethodPost, drop+"/uploads/", nil)
		must(t, err)
		req.SetBasicAuth("", "partner secret")
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Upload-Length", tc.length)
		req.Header.Set("Upload-Metadata", meta)
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", what, resp.StatusCode, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(owner.sshd.Dir, "dropbox", "invoice.exe")); err == nil {
		t.Error("the drop box took a name it should not")
	}
	// Every use is in the owner's trail, its actor the link.
	testkit.EventuallyFound(t, "the owner's trail has the link's uses", func() (bool, string) {
		_, body := owner.ui.Get(t, "/activity?format=jsonl")
		return strings.Contains(body, `"action":"webui.share.upload"`) && strings.Contains(body, `"kind":"ShareLink","name":"drop"`) &&
			strings.Contains(body, `"paths":["/reports/q3.csv"]`), fmt.Sprintf("%.2000s", body)
	})
	// Not a way to read: the drop box's page, never a file.
	if status, body := fetch(t, drop+"?path=/invoice.csv&download=1", "Authorization", "Basic "+b64(":partner secret")); status == http.StatusOK && strings.Contains(body, "invoice,amount") {
		t.Error("an upload link downloaded a file")
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestNarrowedShareLink: a link its owner narrows (with kubectl or
// GitOps: a smaller path) reaches no further from the very next request,
// though its key was just used and trusted. The link's folder holds a
// symlink back up to the old path: followed at once after the narrowing,
// it leads nowhere.
func TestNarrowedShareLink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := newTenant(t, "narrower")
	shared := filepath.Join(owner.sshd.Dir, "shared")
	must(t, os.MkdirAll(filepath.Join(shared, "inner"), 0o755))
	must(t, os.WriteFile(filepath.Join(shared, "outer.csv"), []byte("outer"), 0o644))
	must(t, os.WriteFile(filepath.Join(shared, "inner", "inner.csv"), []byte("inner"), 0o644))
	must(t, os.Symlink("..", filepath.Join(shared, "inner", "up")))
	link := shareLinkURL(t, owner, url.Values{"name": {"narrowed"}, "path": {"/shared"}, "mode": {"Download"}, "expires": {"1d"}})
	if status, body := fetch(t, link+"?download=1&path=/inner/up/outer.csv"); status != http.StatusOK || body != "outer" {
		t.Fatalf("the link's own file, through its symlink: %d %q", status, body)
	}

	var share v1alpha1.ShareLink
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: owner.ns, Name: "narrowed"}, &share))
	share.Spec.Path = "/shared/inner"
	must(t, k8s.Update(ctx, &share))
	if status, body := fetch(t, link+"?download=1&path=/up/outer.csv"); status == http.StatusOK || strings.Contains(body, "outer") {
		t.Errorf("the narrowed link's next request reached its old path: %d %q", status, body)
	}
	if status, body := fetch(t, link+"?download=1&path=/inner.csv"); status != http.StatusOK || body != "inner" {
		t.Errorf("the narrowed link's own file: %d %q", status, body)
	}
	var key v1alpha1.ApiKey
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: owner.ns, Name: "sftpgate-share-narrowed"}, &key))
	if want := []string{"/shared/inner"}; !slices.Equal(key.Spec.Paths, want) {
		t.Errorf("the link's key has paths %v, want %v", key.Spec.Paths, want)
	}
}
