package tenancy

import (
	"encoding/csv"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
	"github.com/sftpgate/sftpgate/internal/audit"
)

// TestActivity: what a person does in the web UI (signing up, a failed
// log-in by someone else on their email, a connection added, a folder
// listed) is on their Activity page, newest first, with who, from where
// and the result; the filters narrow it; the exports have the same
// records, the JSON Lines one a whole chain `audit verify` accepts, and
// neither has another account's records.
func TestActivity(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	ctx := testwebui.Browser(t)
	testwebui.SignUp(t, ctx, uiURL)
	email, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".who")))
	must(t, err)
	stranger := newClient(t)
	stranger.Form(t, "/login", url.Values{"email": {email}, "password": {"not the password"}})
	other := newClient(t)
	other.SignUp(t)
	testwebui.AddConnection(t, ctx, uiURL, "shelf", sshd, sshd.Password)
	must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("section.status.ready .when-ready")),
		chromedp.Navigate(uiURL+"/connections/shelf/files?path=/")))

	// The records are stored every second; the file browser's own call
	// through the gateway is folded into the listing that made it.
	var rows []string
	testkit.EventuallyFound(t, "the activity page shows the file listing, its gateway call folded in, and the three before", func() (bool, string) {
		must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/activity")))
		rows, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("table.activity tbody tr")].map(r => r.dataset.action + " | " + r.innerText.replace(/\s+/g, " ").trim())`))
		must(t, err)
		return len(rows) >= 4 && strings.HasPrefix(rows[0], "webui.file.list") && strings.Contains(rows[0], "through the gateway: 1 call"), fmt.Sprintf("%q", rows)
	})
	want := []string{email + " opened the folder / on shelf", "webui.connection.create", "Failed: invalid credentials",
		"webui.signup"}
	for i, w := range want {
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, w) }) {
			t.Errorf("no row %d %q in %q", i, w, rows)
		}
	}
	if slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, "gateway.") }) {
		t.Errorf("the web UI's own gateway calls show as rows of their own: %q", rows)
	}
	if len(rows) == 0 || !strings.Contains(rows[len(rows)-1], "webui.signup") || !strings.Contains(rows[len(rows)-1], "127.0.0.1") {
		t.Errorf("the oldest row is not the sign-up, from the browser's address: %q", rows)
	}
	testwebui.CheckPage(t, ctx, "activity")

	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/activity?result=failed")))
	failed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("table.activity tbody tr")].map(r => r.dataset.action)`))
	must(t, err)
	if len(failed) != 1 || failed[0] != "webui.login" {
		t.Errorf("failed records: %q", failed)
	}

	fetch := func(query string) string {
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("/activity?`+query+`").then(r => r.text())`, chromedp.EvalAwaitPromise))
		must(t, err)
		return text
	}
	records, _, err := audit.Read(strings.NewReader(fetch("format=jsonl")))
	must(t, err)
	if len(records) < len(rows) {
		t.Errorf("the JSON Lines export has %d records, the page %d", len(records), len(rows))
	}
	for _, r := range records {
		if r.Actor.Kind == audit.ActorAccount && r.Actor.Name == other.Email || r.Namespace != records[0].Namespace {
			t.Fatalf("another account's record: %s", r)
		}
	}
	for _, rep := range audit.Verify(records) {
		if !rep.Whole() {
			t.Errorf("chain %+v", rep)
		}
	}
	lines, err := csv.NewReader(strings.NewReader(fetch("format=csv&connection=shelf"))).ReadAll()
	must(t, err)
	if len(lines) < 2 || lines[0][1] != "action" || !slices.ContainsFunc(lines[1:], func(l []string) bool { return l[1] == "webui.file.list" && l[8] == "/" }) {
		t.Errorf("the CSV export of shelf: %q", lines)
	}
}
