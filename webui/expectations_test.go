package webui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestExpectationPages: the form, opened from a watched folder's link,
// makes a FileExpectation of the team's connection and says in its own
// words what it refuses; the list and the history show what the
// worker wrote in its status; another account can neither see nor
// delete it; deleting it asks first. (No worker runs here: the status
// written stays as written.)
func TestExpectationPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, other := newClient(t), newClient(t)
	c.SignUp(t)
	other.SignUp(t)
	if status, _ := c.Form(t, "/connections", url.Values{"name": {"partner"}, "host": {"127.0.0.1"}, "port": {"2"},
		"username": {"u"}, "auth": {"password"}, "password": {"secret"}, "trust": {"first-use"}}); status != http.StatusOK {
		t.Fatalf("adding a connection: %d", status)
	}
	if status, page := c.Get(t, "/expectations"); status != http.StatusOK || !strings.Contains(page, "No expectations yet") ||
		!strings.Contains(page, `href="/expectations/new"`) || !strings.Contains(page, `<a href="/expectations">Expectations</a>`) {
		t.Errorf("the empty Expectations page: %d", status)
	}
	status, page := c.Get(t, "/expectations/new?connection=partner&path=%2Fincoming")
	if status != http.StatusOK || !strings.Contains(page, `<option value="partner" selected>partner (SFTP)</option>`) ||
		!strings.Contains(page, `value="/incoming"`) || !strings.Contains(page, `value="UTC"`) {
		t.Errorf("the form opened from a watched folder is not filled: %d %s", status, page)
	}

	valid := url.Values{"connection": {"partner"}, "path": {"/incoming"}, "include": {"report-*.csv"}, "minCount": {"1"},
		"opens": {"0 0 * * *"}, "timeZone": {"Europe/Berlin"}, "deadline": {"6h"}, "url": {"https://example.com/hooks"}}
	with := func(changes ...string) url.Values {
		v := url.Values{}
		for k, vs := range valid {
			v[k] = vs
		}
		for i := 0; i < len(changes); i += 2 {
			v.Set(changes[i], changes[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		values url.Values
		field  string
	}{
		{with("connection", "someone-elses"), "connection"},
		{with("connection", "ObjectStore/partner"), "connection"},
		{with("opens", "daily at six"), "opens"},
		{with("timeZone", "Mars/Olympus"), "timeZone"},
		{with("deadline", "soon"), "deadline"},
	} {
		status, body := c.Form(t, "/expectations", tc.values)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, `id="`+tc.field+`-error"`) ||
			!strings.Contains(body, html.EscapeString(tc.values.Get(tc.field))) || !strings.Contains(body, `value="report-*.csv"`) {
			t.Errorf("%s=%q: %d, want 422 with the field marked and the form filled", tc.field, tc.values.Get(tc.field), status)
		}
	}
	if status, page := c.Form(t, "/expectations", with("name", "daily-report", "minCount", "3", "pickUpWithin", "1h")); status != http.StatusOK ||
		!strings.Contains(page, `href="/expectations/daily-report"`) || !strings.Contains(page, "partner:/incoming") ||
		!strings.Contains(page, "Open every day at 00:00 (Europe/Berlin), the files due 6 hours after and picked up within 1 hour of coming") ||
		!strings.Contains(page, "at least 3 files matching report-*.csv") || !strings.Contains(page, "Waiting for the worker") {
		t.Fatalf("adding an expectation: %d %s", status, page)
	}
	var list v1alpha1.FileExpectationList
	must(t, k8s.List(ctx, &list))
	var e *v1alpha1.FileExpectation
	for i := range list.Items {
		if list.Items[i].Name == "daily-report" && list.Items[i].Spec.ConnectionRef.Name == "partner" {
			e = &list.Items[i]
		}
	}
	if e == nil || e.Spec.Path != "/incoming" || e.Spec.Files.MinCount != 3 || e.Spec.Schedule.TimeZone != "Europe/Berlin" ||
		e.Spec.Schedule.Deadline.Duration != 6*time.Hour || e.Spec.PickUpWithin == nil || e.Spec.Sink == nil || e.Spec.Sink.URI != "https://example.com/hooks" {
		t.Fatalf("the form made %+v", e)
	}

	// What the worker writes: Ready, the next deadline, and outcomes.
	window := func(day int) v1alpha1.ExpectationWindow {
		opens := time.Date(2026, 11, day, 0, 0, 0, 0, time.UTC).Add(-time.Hour) // 00:00 in Berlin
		return v1alpha1.ExpectationWindow{Opens: metav1.Time{Time: opens}, Deadline: metav1.Time{Time: opens.Add(6 * time.Hour)}}
	}
	deadline := metav1.NewTime(time.Now().Add(3 * time.Hour).Truncate(time.Second))
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(e), e))
		met := window(28)
		late := window(29)
		e.Status = v1alpha1.FileExpectationStatus{ObservedGeneration: e.Generation, NextDeadline: &deadline, Missed: 1,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonExpecting,
				Message: "listing the folder", ObservedGeneration: e.Generation, LastTransitionTime: metav1.Now()}},
			LastOutcomes: []v1alpha1.ExpectationResult{
				{Outcome: v1alpha1.OutcomeLate, Window: late, Time: metav1.NewTime(late.Deadline.Add(2 * time.Hour)),
					DecidedTime: metav1.NewTime(late.Deadline.Add(4 * time.Hour)), FileCount: 3, Files: []v1alpha1.ExpectedFile{
						{Name: "report-29.csv", Size: 2048, Came: metav1.NewTime(late.Deadline.Add(2 * time.Hour))}}},
				{Outcome: v1alpha1.OutcomeMissed, Window: late, Time: late.Deadline, DecidedTime: late.Deadline},
				{Outcome: v1alpha1.OutcomeMet, Window: met, Time: metav1.NewTime(met.Opens.Add(time.Hour)), DecidedTime: metav1.NewTime(met.Opens.Add(time.Hour)),
					FileCount: 1, Files: []v1alpha1.ExpectedFile{{Name: "report-28.csv", Size: 10, Came: metav1.NewTime(met.Opens.Add(time.Hour))}}},
			}}
		return k8s.Status().Update(ctx, e)
	}))
	_, page = c.Get(t, "/expectations")
	met, missed, late := strings.Index(page, `outcome met">Met<`), strings.Index(page, `outcome missed">Missed<`), strings.Index(page, `outcome late">Late<`)
	if met < 0 || missed < met || late < missed || !strings.Contains(page, "Expecting the files") || !strings.Contains(page, "(in 2 hours)") ||
		!strings.Contains(page, `title="Late: the window Sun 29 Nov 2026, 00:00–06:00 CET; late at Sun 29 Nov 2026, 08:00 CET, decided late at`) {
		t.Errorf("the list does not show the outcomes oldest first, each with its word and window, and Ready's headline: %s", page)
	}
	status, page = c.Get(t, "/expectations/daily-report")
	if status != http.StatusOK || strings.Count(page, "decided late") != 1 || !strings.Contains(page, "<code>report-29.csv</code>") ||
		!strings.Contains(page, "2.0 KiB") || !strings.Contains(page, "and 2 more") || !strings.Contains(page, "1 window") ||
		strings.Index(page, `outcome late">Late<`) > strings.Index(page, `outcome met">Met<`) {
		t.Errorf("the history: %d %s", status, page)
	}

	// Another account's pages know nothing of it.
	if _, page := other.Get(t, "/expectations"); strings.Contains(page, "daily-report") {
		t.Error("another account lists the expectation")
	}
	for _, path := range []string{"/expectations/daily-report", "/expectations/daily-report/delete"} {
		if status, _ := other.Get(t, path); status != http.StatusNotFound {
			t.Errorf("another account opens %s: %d, want 404", path, status)
		}
	}
	if status, _ := other.Form(t, "/expectations/daily-report/delete", nil); status != http.StatusNotFound {
		t.Errorf("another account deletes it: %d, want 404", status)
	}
	if status, page := other.Form(t, "/expectations", valid); status != http.StatusUnprocessableEntity || !strings.Contains(page, `This team has no connection &#34;partner&#34;.`) {
		t.Errorf("another account names the first's connection: %d", status)
	}

	// Deleting asks first.
	if status, page := c.Get(t, "/expectations/daily-report/delete"); status != http.StatusOK || !strings.Contains(page, "Delete the expectation daily-report?") ||
		!strings.Contains(page, `action="/expectations/daily-report/delete"`) {
		t.Errorf("asking before deleting: %d", status)
	}
	if status, page := c.Form(t, "/expectations/daily-report/delete", nil); status != http.StatusOK ||
		!strings.Contains(page, "The expectation daily-report is deleted.") || strings.Contains(page, `href="/expectations/daily-report"`) {
		t.Errorf("deleting: %d, or not said, or still listed", status)
	}
}
