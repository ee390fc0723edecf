package tenancy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// TestExpectations: an editor of a team opens the Expectations form from
// a watched folder of the team's connection, is told what to fix, adds an
// expectation and sees it listed as the worker evaluates it, then opens
// its history. Outcomes the worker keeps in an expectation's status show
// as badges in words, oldest first, and as a history table. A viewer
// sees the pages without the ways to change them, and a post of theirs
// is refused. Deleting asks first.
func TestExpectations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := newTenant(t, "expecting")
	owner.watchedFolder(t, "incoming")
	if status, _ := owner.ui.Form(t, "/connections/"+owner.uiConn+"/watches", url.Values{"path": {"/incoming"},
		"url": {"https://example.com/hooks"}, "created": {"on"}}); status != http.StatusOK {
		t.Fatalf("the owner watches /incoming: %d", status)
	}

	// The editor: a person the owner adds to the team, in a browser.
	browser := testwebui.Browser(t)
	testwebui.SignUp(t, browser, uiURL)
	email, err := chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(".who")))
	must(t, err)
	verifyEmail(t, email)
	addMember(t, owner.ui, "person", email, "editor")
	must(t, chromedp.Do(browser, chromedp.Navigate(uiURL+"/teams"),
		chromedp.Click(chromedp.CSS(`button[aria-label="Switch to `+owner.ui.Email+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/connections/`+owner.uiConn+`"]`))))

	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`nav a[href="/expectations"]`)), chromedp.WaitVisible(chromedp.CSS(".empty"))))
	testwebui.CheckPage(t, browser, "expectations (none)")

	// "Expect files here", on the watched folder's row, opens the form
	// filled with its connection and folder.
	expect := `#watches a[href^="/expectations/new"]`
	must(t, chromedp.Do(browser, chromedp.Navigate(uiURL+"/connections/"+owner.uiConn), chromedp.WaitVisible(chromedp.CSS(expect))))
	testwebui.CheckPage(t, browser, "connection (a watch, as an editor)")
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(expect)), chromedp.WaitVisible(chromedp.ID("include"))))
	connection, err := chromedp.Run(browser, chromedp.Value(chromedp.ID("connection")))
	must(t, err)
	folder, err := chromedp.Run(browser, chromedp.Value(chromedp.ID("path")))
	must(t, err)
	if connection != owner.uiConn || folder != "/incoming" {
		t.Errorf("the form opened from the watched folder holds %q and %q", connection, folder)
	}
	testwebui.CheckPage(t, browser, "new expectation")

	// Three mistakes, each said beside its field.
	must(t, chromedp.Do(browser,
		chromedp.SetValue(chromedp.ID("include"), "report-*.csv"),
		chromedp.SetValue(chromedp.ID("opens"), "every morning"),
		chromedp.SetValue(chromedp.ID("timeZone"), "Mars/Olympus"),
		chromedp.SetValue(chromedp.ID("deadline"), "soon"),
		chromedp.Submit(chromedp.ID("include")),
		chromedp.WaitVisible(chromedp.ID("opens-error"))))
	if n := count(t, browser, "#opens-error, #timeZone-error, #deadline-error, [aria-invalid=true]"); n != 6 {
		t.Errorf("the refused form marks %d fields and errors, want 3 of each", n)
	}
	if kept, err := chromedp.Run(browser, chromedp.Value(chromedp.ID("include"))); err != nil || kept != "report-*.csv" {
		t.Errorf("the refused form keeps %q (%v)", kept, err)
	}
	testwebui.CheckPage(t, browser, "new expectation (refused)")
	must(t, chromedp.Do(browser,
		chromedp.SetValue(chromedp.ID("name"), "partner-report"),
		chromedp.SetValue(chromedp.ID("minCount"), "2"),
		chromedp.SetValue(chromedp.ID("opens"), "0 6 * * 1-5"),
		chromedp.SetValue(chromedp.ID("timeZone"), "Europe/Berlin"),
		chromedp.SetValue(chromedp.ID("deadline"), "6h"),
		chromedp.SetValue(chromedp.ID("pickUpWithin"), "1h"),
		chromedp.Submit(chromedp.ID("include")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-expectation="partner-report"]`))))
	var made v1alpha1.FileExpectation
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: owner.ns, Name: "partner-report"}, &made))
	if s := made.Spec; s.ConnectionRef.Name != owner.uiConn || s.Path != "/incoming" || strings.Join(s.Files.Include, ",") != "report-*.csv" ||
		s.Files.MinCount != 2 || s.Schedule.Opens != "0 6 * * 1-5" || s.Schedule.TimeZone != "Europe/Berlin" ||
		s.Schedule.Deadline.Duration != 6*time.Hour || s.PickUpWithin == nil || s.PickUpWithin.Duration != time.Hour || s.Sink != nil {
		t.Errorf("the form made %+v", s)
	}
	// What the worker made of it shows on a reload: it lists the folder.
	testkit.EventuallyFound(t, "the expectation is shown as evaluated", func() (bool, string) {
		must(t, chromedp.Do(browser, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`li[data-expectation="partner-report"]`))))
		headline, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`li[data-expectation="partner-report"] .conn-head .badge`)))
		must(t, err)
		return headline == "Expecting the files" && count(t, browser, `li.ready[data-expectation="partner-report"]`) == 1, headline
	})
	testwebui.CheckPage(t, browser, "expectations")
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`h2 a[href="/expectations/partner-report"]`)), chromedp.WaitVisible(chromedp.ID("history"))))
	testwebui.CheckPage(t, browser, "expectation (no window decided)")

	// An expectation whose connection is gone keeps the outcomes the
	// worker decided before, in its status (written here as the worker
	// writes it: the worker's deciding is tested in worker/).
	retired := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: owner.ns, Name: "regulator"},
		Spec: v1alpha1.FileExpectationSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "retired"}, Path: "/outbound",
			Files:        v1alpha1.ExpectedFiles{Include: []string{"REG_*.xml"}},
			Schedule:     v1alpha1.ExpectationSchedule{Opens: "0 0 * * *", Deadline: metav1.Duration{Duration: 4 * time.Hour}},
			PickUpWithin: &metav1.Duration{Duration: time.Hour}}}
	must(t, k8s.Create(ctx, retired))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), retired) })
	refusedReason(t, retired, v1alpha1.ReasonConnectionNotReady)
	day := time.Now().UTC().Truncate(24 * time.Hour)
	window := func(daysAgo int) v1alpha1.ExpectationWindow {
		opens := day.AddDate(0, 0, -daysAgo)
		return v1alpha1.ExpectationWindow{Opens: metav1.NewTime(opens), Deadline: metav1.NewTime(opens.Add(4 * time.Hour))}
	}
	at := func(w v1alpha1.ExpectationWindow, d time.Duration) metav1.Time { return metav1.NewTime(w.Opens.Add(d)) }
	file := func(name string, came metav1.Time) v1alpha1.ExpectedFile {
		return v1alpha1.ExpectedFile{Name: name, Size: 4096, Came: came}
	}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(retired), retired))
		w1, w2, w3 := window(1), window(2), window(3)
		retired.Status.LastOutcomes = []v1alpha1.ExpectationResult{ // newest first
			{Outcome: v1alpha1.OutcomeNotProcessed, Window: w1, Time: at(w1, 3*time.Hour), DecidedTime: at(w1, 3*time.Hour), FileCount: 1,
				Files: []v1alpha1.ExpectedFile{file("REG_1.xml", at(w1, 2*time.Hour))}},
			{Outcome: v1alpha1.OutcomeMet, Window: w2, Time: at(w2, time.Hour), DecidedTime: at(w2, time.Hour), FileCount: 1,
				Files: []v1alpha1.ExpectedFile{file("REG_2.xml", at(w2, time.Hour))}},
			{Outcome: v1alpha1.OutcomeLate, Window: w3, Time: at(w3, 6*time.Hour), DecidedTime: at(w3, 9*time.Hour), FileCount: 1,
				Files: []v1alpha1.ExpectedFile{file("REG_3.xml", at(w3, 6*time.Hour))}},
			{Outcome: v1alpha1.OutcomeMissed, Window: w3, Time: w3.Deadline, DecidedTime: w3.Deadline},
		}
		retired.Status.Missed, retired.Status.LastMetTime = 1, &retired.Status.LastOutcomes[1].Time
		return k8s.Status().Update(ctx, retired)
	}))
	strip := `li[data-expectation="regulator"] .outcomes .badge`
	must(t, chromedp.Do(browser, chromedp.Navigate(uiURL+"/expectations"), chromedp.WaitVisible(chromedp.CSS(strip))))
	badges, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+strip+`')].map(b => b.textContent)`))
	must(t, err)
	if strings.Join(badges, ",") != "Missed,Late,Met,Not processed" {
		t.Errorf("the strip shows %v, want the outcomes oldest first, each in words", badges)
	}
	title, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector('li[data-expectation="regulator"] .outcomes li:nth-child(2)').title`))
	must(t, err)
	if !strings.HasPrefix(title, "Late: the window ") || !strings.Contains(title, "decided late") {
		t.Errorf("the Late badge's title is %q", title)
	}
	testwebui.CheckPage(t, browser, "expectations (outcomes)")
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`a[href="/expectations/regulator"][aria-label]`)),
		chromedp.WaitVisible(chromedp.CSS("table.history"))))
	history, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS("table.history")))
	must(t, err)
	if rows := count(t, browser, "table.history tbody tr"); rows != 4 || strings.Count(history, "decided late") != 1 ||
		!strings.Contains(history, "REG_3.xml") || !strings.Contains(history, "4.0 KiB") {
		t.Errorf("the history has %d rows: %s", rows, history)
	}
	testwebui.CheckPage(t, browser, "expectation (history)")

	// A viewer sees both, with no way to add or delete one, and is
	// refused when they post.
	viewer := newClient(t)
	viewer.SignUp(t)
	verifyEmail(t, viewer.Email)
	addMember(t, owner.ui, "person", viewer.Email, "viewer")
	if status, _ := viewer.Form(t, "/teams", url.Values{"namespace": {owner.ns}}); status != http.StatusOK {
		t.Fatalf("the viewer switches to the team: %d", status)
	}
	for _, page := range []string{"/expectations", "/expectations/regulator"} {
		status, body := viewer.Get(t, page)
		if status != http.StatusOK || !strings.Contains(body, "regulator") || strings.Contains(body, `href="/expectations/new"`) ||
			strings.Contains(body, "/delete") {
			t.Errorf("a viewer's %s: %d, or it offers to add or delete", page, status)
		}
	}
	if _, body := viewer.Get(t, "/connections/"+owner.uiConn); strings.Contains(body, "Expect files here") {
		t.Error("a viewer's connection page offers to expect files")
	}
	for what, status := range map[string]int{
		"open the form": first(viewer.Get(t, "/expectations/new")),
		"add one": first(viewer.Form(t, "/expectations", url.Values{"connection": {owner.uiConn}, "path": {"/"}, "include": {"*"},
			"minCount": {"1"}, "opens": {"0 0 * * *"}, "timeZone": {"UTC"}, "deadline": {"1h"}, "name": {"by-a-viewer"}})),
		"delete one": first(viewer.Form(t, "/expectations/partner-report/delete", nil)),
	} {
		if status != http.StatusForbidden {
			t.Errorf("a viewer may %s: %d, want 403", what, status)
		}
	}
	var list v1alpha1.FileExpectationList
	must(t, k8s.List(ctx, &list, client.InNamespace(owner.ns)))
	if len(list.Items) != 2 {
		t.Errorf("the team has %d expectations after the viewer's posts, want 2", len(list.Items))
	}

	// The editor deletes one, after the page that asks.
	must(t, chromedp.Do(browser, chromedp.Navigate(uiURL+"/expectations/partner-report"),
		chromedp.Click(chromedp.CSS(`.heading a.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/expectations/partner-report/delete"]`))))
	testwebui.CheckPage(t, browser, "delete an expectation")
	must(t, chromedp.Do(browser, chromedp.Click(chromedp.CSS(`form[action="/expectations/partner-report/delete"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".alert.ok"))))
	if n := count(t, browser, `li[data-expectation="partner-report"]`); n != 0 {
		t.Error("the deleted expectation is still listed")
	}
	testkit.EventuallyFound(t, "the expectation is gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&made), &v1alpha1.FileExpectation{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
