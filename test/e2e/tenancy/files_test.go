package tenancy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testproxy"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// onePixelPNG is a 1×1 PNG.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa75\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// TestFileBrowser is the file browser in a browser: browse a tree and see
// a text and an image in place; upload a 50 MiB file, see its progress,
// reload the page halfway and go on where it stopped; download it and
// compare; rename; delete a file and a folder; all at a phone's width too.
func TestFileBrowser(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	// A slow link to the server, so that the upload is seen under way.
	proxy := testproxy.Start(t, fmt.Sprintf("%s:%d", sshd.Host, sshd.Port))
	ctx := testwebui.Browser(t)
	testwebui.SignUp(t, ctx, uiURL)
	testwebui.AddConnectionAt(t, ctx, uiURL, "shelf", proxy.Host, proxy.Port, sshd, sshd.Password)
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.ready .when-ready"))))
	owned := func(p string) {
		must(t, os.Chown(p, sshd.UID, sshd.GID))
	}
	must(t, os.MkdirAll(filepath.Join(sshd.Dir, "docs", "deep"), 0o755))
	owned(filepath.Join(sshd.Dir, "docs"))
	owned(filepath.Join(sshd.Dir, "docs", "deep"))
	must(t, os.WriteFile(filepath.Join(sshd.Dir, "docs", "readme.txt"), []byte("hello <b>files</b>"), 0o644))
	must(t, os.WriteFile(filepath.Join(sshd.Dir, "docs", "deep", "dot.png"), onePixelPNG, 0o644))

	// Browse: the connection's page leads to its root, a folder, a
	// deeper one, and back by the breadcrumb; a text and an image show.
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a.button[href*="/files?path="]`)),
		chromedp.Click(chromedp.CSS(`tr[data-name="docs"] a.dir`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="readme.txt"]`)),
	))
	testwebui.CheckPage(t, ctx, "files")
	// A folder or a file that is not there: a 404 page that says so and
	// offers neither uploads nor a download.
	for _, missing := range []struct{ path, says, page string }{
		{"/shelf/files?path=/docs/gone", "There is no folder /docs/gone on shelf", "files (a missing folder)"},
		{"/shelf/files/view?path=/docs/gone.txt", "There is no file /docs/gone.txt on shelf", "a missing file"},
	} {
		must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections"+missing.path), chromedp.WaitVisible(chromedp.CSS(".alert.error"))))
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".alert.error").textContent + " | " + document.querySelectorAll("#upload-files, a[download]").length`))
		must(t, err)
		if !strings.HasPrefix(shown, missing.says) || !strings.HasSuffix(shown, " | 0") {
			t.Errorf("%s shows %q", missing.path, shown)
		}
		testwebui.CheckPage(t, ctx, missing.page)
	}
	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/shelf/files?path=/docs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="readme.txt"]`))))
	// The file input is hidden: its label, the button, shows the focus.
	must(t, chromedp.Do(ctx, chromedp.Focus(chromedp.ID("upload-files"))))
	if outline, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('label[for="upload-files"]')).outlineStyle`)); err != nil || outline != "solid" {
		t.Errorf("the upload button shows no focus: its outline is %q (%v)", outline, err)
	}
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-name="deep"] a.dir`)),
		chromedp.Click(chromedp.CSS(`tr[data-name="dot.png"] a`)),
		chromedp.WaitVisible(chromedp.CSS("img.preview")),
	))
	testwebui.CheckPage(t, ctx, "image")
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`new Promise(r => { const i = document.querySelector("img.preview"); i.complete ? r(i.naturalWidth === 1) : i.onload = () => r(i.naturalWidth === 1) })`,
		chromedp.EvalAwaitPromise))
	if err != nil || !loaded {
		t.Errorf("the image is not shown (%v)", err)
	}
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`nav.crumbs a:nth-of-type(2)`)), // docs
		chromedp.Click(chromedp.CSS(`tr[data-name="readme.txt"] a`)),
		chromedp.WaitVisible(chromedp.ID("file-text")),
	))
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("file-text"))); err != nil || text != "hello <b>files</b>" {
		t.Errorf("the text shown is %q (%v)", text, err)
	}
	testwebui.CheckPage(t, ctx, "text file")

	// Upload 50 MiB through a link of 6 MB/s to the server.
	data := make([]byte, 50<<20)
	_, _ = rand.Read(data)
	local := filepath.Join(t.TempDir(), "big.bin")
	must(t, os.WriteFile(local, data, 0o644))
	proxy.Limit(6 << 20)
	folder := uiURL + "/connections/shelf/files?path=/docs"
	must(t, chromedp.Do(ctx, chromedp.Navigate(folder), chromedp.SetUploadFiles(chromedp.ID("upload-files"), []string{local})))
	waitFor(t, ctx, `Number(document.querySelector("#uploads progress")?.value || 0) >= 25`, "the upload's progress to pass 25%")
	testwebui.CheckPage(t, ctx, "files (uploading)")
	// Reload halfway: the page says the upload is unfinished; the same file
	// chosen again goes on, and only the rest is sent.
	must(t, chromedp.Do(ctx, chromedp.Navigate(folder)))
	waitFor(t, ctx, `[...document.querySelectorAll("#uploads li")].some(l => (l.dataset.note || "").startsWith("unfinished"))`, "the unfinished upload to be listed")
	testwebui.CheckPage(t, ctx, "files (an upload unfinished)")
	before := proxy.Sent()
	must(t, chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.ID("upload-files"), []string{local})))
	waitFor(t, ctx, `!!document.querySelector("#uploads li[data-from]")`, "the upload to go on")
	testwebui.CheckPage(t, ctx, "files (uploading)")
	waitFor(t, ctx, `!!document.querySelector("#uploads li.done") || !!document.querySelector("#uploads li.failed")`, "the upload to end")
	if failed, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#uploads li.failed .state")?.textContent || ""`)); failed != "" {
		t.Fatalf("the upload failed: %s", failed)
	}
	proxy.Limit(0)
	sent := proxy.Sent() - before
	from, err := chromedp.Run(ctx, chromedp.Evaluate[int64](`Number(document.querySelector("#uploads li[data-from]").dataset.from)`))
	must(t, err)
	rest := int64(len(data)) - from
	t.Logf("the upload went on from %d bytes: %d went to the server for the %d left (%.3f×)", from, sent, rest, float64(sent)/float64(rest))
	if from <= 0 || sent > rest+rest/10+1<<20 {
		t.Errorf("after the reload, the upload went on from %d and %d bytes went to the server for the %d left", from, sent, rest)
	}
	got, err := os.ReadFile(filepath.Join(sshd.Dir, "docs", "big.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file on the server is %d bytes and not the ones sent (%v)", len(got), err)
	}
	waitFor(t, ctx, `!!document.querySelector('tr[data-name="big.bin"]')`, "the listing to show the file")

	// Download, and compare in the page.
	sum := sha256.Sum256(data)
	downloaded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`
		fetch(document.querySelector('tr[data-name="big.bin"] a[download]').href)
			.then(r => r.arrayBuffer()).then(b => crypto.subtle.digest("SHA-256", b))
			.then(h => [...new Uint8Array(h)].map(x => x.toString(16).padStart(2, "0")).join(""))`, chromedp.EvalAwaitPromise))
	if err != nil || downloaded != hex.EncodeToString(sum[:]) {
		t.Errorf("the download's SHA-256 is %s (%v), want the file's", downloaded, err)
	}

	// Rename, then delete the file and the deeper folder.
	must(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr[data-name="readme.txt"] details.rename summary`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="readme.txt"] input[name="name"]`)),
	))
	testwebui.CheckPage(t, ctx, "files (renaming)")
	must(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`tr[data-name="readme.txt"] input[name="name"]`), "notes.txt"),
		chromedp.Submit(chromedp.CSS(`tr[data-name="readme.txt"] input[name="name"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="notes.txt"]`)),
	))
	if _, err := os.Stat(filepath.Join(sshd.Dir, "docs", "notes.txt")); err != nil {
		t.Errorf("the renamed file: %v", err)
	}
	for _, name := range []string{"notes.txt", "deep"} {
		must(t, chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`tr[data-name="`+name+`"] a.danger`)),
			chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
		))
		if name == "deep" {
			testwebui.CheckPage(t, ctx, "delete a folder")
		} else {
			testwebui.CheckPage(t, ctx, "delete a file")
		}
		must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="big.bin"]`))))
		if _, err := os.Stat(filepath.Join(sshd.Dir, "docs", name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", name, err)
		}
	}
	testwebui.CheckPage(t, ctx, "files")

	// A new folder.
	must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("folder-name"), "inbox"),
		chromedp.Submit(chromedp.ID("folder-name")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-name="inbox"]`)),
	))
	testwebui.CheckPage(t, ctx, "files (a new folder)")

	// A file dropped on the folder uploads too.
	must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`{
		const drop = new DataTransfer();
		drop.items.add(new File(["dropped in"], "dropped.txt", { type: "text/plain" }));
		document.getElementById("files").dispatchEvent(new DragEvent("drop", { dataTransfer: drop, bubbles: true, cancelable: true }));
	}`)))
	waitFor(t, ctx, `!!document.querySelector("#uploads li.done")`, "the dropped file's upload to end")
	if b, err := os.ReadFile(filepath.Join(sshd.Dir, "docs", "dropped.txt")); err != nil || string(b) != "dropped in" {
		t.Errorf("the dropped file holds %q (%v)", b, err)
	}

	// Logging out ends the browser's access at once: its downloads and
	// uploads lead to the log-in page.
	must(t, chromedp.Do(ctx, chromedp.Navigate(folder), chromedp.WaitVisible(chromedp.CSS(`tr[data-name="big.bin"]`))))
	download, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('tr[data-name="big.bin"] a[download]').href`))
	must(t, err)
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("details.account summary")), chromedp.Click(chromedp.CSS("form.logout button")),
		chromedp.WaitVisible(chromedp.ID("password"))))
	testwebui.CheckPage(t, ctx, "log in")
	for _, probe := range []string{
		`fetch(` + strconv.Quote(download) + `).then(r => r.url)`,
		`fetch("/connections/shelf/uploads/", { method: "POST", headers: { "Tus-Resumable": "1.0.0", "Upload-Length": "1" } }).then(r => r.url)`,
	} {
		landed, err := chromedp.Run(ctx, chromedp.Evaluate[string](probe, chromedp.EvalAwaitPromise))
		if err != nil || !strings.HasSuffix(landed, "/login") {
			t.Errorf("after logging out, %s lands on %q (%v), want the log-in page", probe, landed, err)
		}
	}
}

// waitFor waits until the page's expression is true, as the test kit
// waits; what is the wait's, the page's text what it found.
func waitFor(t *testing.T, ctx context.Context, expression, what string) {
	t.Helper()
	testkit.EventuallyFound(t, what, func() (bool, string) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expression))
		if err == nil && ok {
			return true, ""
		}
		// Not chromedp.Text, which would wait for a main to come.
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main")?.innerText ?? ""`))
		return false, fmt.Sprintf("(%v) the page: %s", err, strings.Join(strings.Fields(body), " "))
	})
}
