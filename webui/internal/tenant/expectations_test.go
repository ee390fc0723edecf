package tenant

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// TestScheduleWords: the shapes people write are said in words; any
// other is left to its expression.
func TestScheduleWords(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]string{
		"0 0 * * *":      "every day at 00:00",
		"30 6 * * *":     "every day at 06:30",
		"0 8 * * 1-5":    "Monday to Friday at 08:00",
		"0 8 * * 1,3,5":  "on Mondays, Wednesdays and Fridays at 08:00",
		"0 9 * * 6,0":    "on Saturdays and Sundays at 09:00",
		"0 7 * * 1":      "Mondays at 07:00",
		"15 2 1 * *":     "on day 1 of every month at 02:15",
		"0 * * * *":      "every hour, on the hour",
		"5 * * * *":      "every hour at 5 minutes past",
		"* * * * *":      "every minute",
		"@daily":         "every day at 00:00",
		"@weekly":        "every Sunday at 00:00",
		"*/15 * * * *":   "",
		"0 0 29 2 *":     "",
		"0 8 * * MON":    "",
		"0 8 * * 5-1":    "",
		"0 08 * * *":     "",
		"0 0 1 1 *":      "",
		"0 25 * * *":     "",
		"not a schedule": "",
	} {
		if got := scheduleWords(expr); got != want {
			t.Errorf("%q: %q, want %q", expr, got, want)
		}
	}
}

func TestDurationWords(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		6 * time.Hour: "6 hours", 90 * time.Minute: "1 hour 30 minutes", time.Minute: "1 minute",
		744 * time.Hour: "31 days", 25*time.Hour + time.Second: "1 day 1 hour 1 second",
	} {
		if got := durationWords(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
	now := time.Now()
	for d, want := range map[time.Duration]string{
		30 * time.Second: "in less than a minute", 5 * time.Minute: "in 5 minutes", 5 * time.Hour: "in 5 hours",
		72 * time.Hour: "in 3 days", -2 * time.Hour: "2 hours ago",
	} {
		if got := untilWords(now.Add(d), now); got != want {
			t.Errorf("%s ahead: %q, want %q", d, got, want)
		}
	}
}

// TestEveryReasonHasAHeadline: each reason docs/expectation.md gives
// Ready is said in words.
func TestEveryReasonHasAHeadline(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{v1alpha1.ReasonExpecting, v1alpha1.ReasonFirstPoll, v1alpha1.ReasonConnectionNotReady,
		v1alpha1.ReasonPathNotFound, v1alpha1.ReasonDirectoryTooLarge, v1alpha1.ReasonCalendarNotFound, v1alpha1.ReasonSinkNotFound,
		v1alpha1.ReasonSinkUnreachable, v1alpha1.ReasonDeliveryFailing, v1alpha1.ReasonStateBudgetExceeded, v1alpha1.ReasonInvalidSpec,
		v1alpha1.ReasonOverQuota, v1alpha1.ReasonSinkNotAllowed} {
		if expectationHeadlines[reason] == "" {
			t.Errorf("no headline for %s", reason)
		}
	}
}

// TestExpectationForm: each mistake is said beside its field, all at
// once; good values make the spec the form describes.
func TestExpectationForm(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	valid := map[string]string{"connection": "partner", "path": "/incoming", "include": "report-*.csv, REPORT-*.CSV", "minCount": "2",
		"opens": "0 6 * * 1-5", "timeZone": "Europe/Berlin", "deadline": "6h", "pickUpWithin": "1h", "url": "https://example.com/hooks"}
	with := func(changes ...string) map[string]string {
		v := map[string]string{}
		for k, s := range valid {
			v[k] = s
		}
		for i := 0; i < len(changes); i += 2 {
			v[changes[i]] = changes[i+1]
		}
		return v
	}
	for _, tc := range []struct {
		values map[string]string
		field  string
		says   string
	}{
		{with("connection", ""), "connection", "Choose the connection"},
		{with("connection", "Bad Name"), "connection", "Choose the connection"},
		{with("path", "incoming"), "path", "start it with /"},
		{with("path", "/in/../etc"), "path", "no . or .. parts"},
		{with("include", " , "), "include", "such as report-*.csv"},
		{with("include", "[a-"), "include", "is not a pattern"},
		{with("include", "in/*.csv"), "include", "holds a /"},
		{with("include", strings.Repeat("a,", 17)), "include", "at most 16"},
		{with("minCount", "0"), "minCount", "from 1 to 1000"},
		{with("minCount", "many"), "minCount", "from 1 to 1000"},
		{with("opens", "every day"), "opens", "is not a cron schedule"},
		{with("opens", "0 0 30 2 *"), "opens", "never opens a window"},
		{with("timeZone", "Mars/Olympus"), "timeZone", "is not a time zone"},
		{with("timeZone", "Local"), "timeZone", "is not a time zone"},
		{with("timeZone", "../../etc/passwd"), "timeZone", "is not a time zone"},
		{with("deadline", "soon"), "deadline", "1 minute to 31 days"},
		{with("deadline", "30s"), "deadline", "1 minute to 31 days"},
		{with("deadline", "745h"), "deadline", "1 minute to 31 days"},
		{with("pickUpWithin", "10s"), "pickUpWithin", "at least a minute"},
		{with("url", "ftp://example.com/h"), "url", "the webhook's address"},
		{with("url", "https://user:pw@example.com/h"), "url", "the webhook's address"},
		{with("name", "Daily Report"), "name", "cannot be a name"},
		{with("name", "new"), "name", "choose another"},
	} {
		mistakes := web.FieldErrors{}
		readExpectationForm("team", tc.values, now, mistakes)
		if len(mistakes) != 1 || !strings.Contains(mistakes[tc.field], tc.says) {
			t.Errorf("%s=%q: %v, want only %s saying %q", tc.field, tc.values[tc.field], mistakes, tc.field, tc.says)
		}
	}
	mistakes := web.FieldErrors{}
	readExpectationForm("team", with("path", "in", "opens", "x", "deadline", "y", "url", "z"), now, mistakes)
	if len(mistakes) != 4 {
		t.Errorf("four mistakes said as %v", mistakes)
	}

	mistakes = web.FieldErrors{}
	e := readExpectationForm("team", valid, now, mistakes)
	want := v1alpha1.FileExpectationSpec{ConnectionRef: v1alpha1.ConnectionReference{Kind: v1alpha1.KindSftpConnection, Name: "partner"},
		Path: "/incoming", Files: v1alpha1.ExpectedFiles{Include: []string{"report-*.csv", "REPORT-*.CSV"}, MinCount: 2},
		Schedule:     v1alpha1.ExpectationSchedule{Opens: "0 6 * * 1-5", TimeZone: "Europe/Berlin", Deadline: metav1.Duration{Duration: 6 * time.Hour}},
		PickUpWithin: &metav1.Duration{Duration: time.Hour}, Sink: &v1alpha1.Destination{URI: "https://example.com/hooks"}}
	if len(mistakes) != 0 || e.Namespace != "team" || e.GenerateName != "partner-" || e.Name != "" ||
		e.Spec.ConnectionRef != want.ConnectionRef || e.Spec.Path != want.Path || strings.Join(e.Spec.Files.Include, "|") != "report-*.csv|REPORT-*.CSV" ||
		e.Spec.Files.MinCount != 2 || e.Spec.Schedule.Opens != want.Schedule.Opens || e.Spec.Schedule.TimeZone != want.Schedule.TimeZone ||
		e.Spec.Schedule.Deadline != want.Schedule.Deadline || *e.Spec.PickUpWithin != *want.PickUpWithin || e.Spec.Sink.URI != want.Sink.URI {
		t.Errorf("the form made %+v (%v), want %+v", e, mistakes, want)
	}
	// Another kind's object, named, with no zone and no webhook.
	e = readExpectationForm("team", with("connection", "ObjectStore/claims", "name", "claims", "timeZone", "", "url", "", "pickUpWithin", ""), now, mistakes)
	if len(mistakes) != 0 || e.Name != "claims" || e.Spec.ConnectionRef.Kind != v1alpha1.KindObjectStore || e.Spec.Schedule.TimeZone != "UTC" ||
		e.Spec.Sink != nil || e.Spec.PickUpWithin != nil {
		t.Errorf("the form made %+v (%v)", e, mistakes)
	}
}

// TestExpectationView: the strip holds the last outcomes oldest first,
// the history newest first, times in the expectation's zone, and an
// outcome decided more than a poll interval late is marked.
func TestExpectationView(t *testing.T) {
	t.Parallel()
	at := func(s string) metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.Time{Time: tm}
	}
	window := v1alpha1.ExpectationWindow{Opens: at("2026-11-29T23:00:00Z"), Deadline: at("2026-11-30T05:00:00Z")}
	e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Name: "daily", Generation: 1},
		Spec: v1alpha1.FileExpectationSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "partner"}, Path: "/in",
			Files:    v1alpha1.ExpectedFiles{Include: []string{"*.csv"}, MinCount: 1},
			Schedule: v1alpha1.ExpectationSchedule{Opens: "0 0 * * *", TimeZone: "Europe/Berlin", Deadline: metav1.Duration{Duration: 6 * time.Hour}}},
		Status: v1alpha1.FileExpectationStatus{LastOutcomes: []v1alpha1.ExpectationResult{
			{Outcome: v1alpha1.OutcomeLate, Window: window, Time: at("2026-11-30T07:12:09Z"), DecidedTime: at("2026-11-30T09:00:00Z"), FileCount: 12,
				Files: []v1alpha1.ExpectedFile{{Name: "report.csv", Size: 48213, Came: at("2026-11-30T07:12:09Z")}}},
			{Outcome: v1alpha1.OutcomeMissed, Window: window, Time: at("2026-11-30T05:00:00Z"), DecidedTime: at("2026-11-30T05:00:30Z")},
		}, Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonExpecting, ObservedGeneration: 1}}}}
	v := expectationOf(e, time.Now())
	if v.State != "ready" || v.Headline != "Expecting the files" || v.Folder != "partner:/in" || v.Files != "a file matching *.csv" ||
		v.When != "Open every day at 00:00 (Europe/Berlin), the files due 6 hours after" {
		t.Errorf("the view: %+v", v)
	}
	if len(v.Strip) != 2 || v.Strip[0].Outcome != "Missed" || v.Strip[1].Outcome != "Late" || v.Outcomes[0].Outcome != "Late" {
		t.Fatalf("the strip %+v and history %+v", v.Strip, v.Outcomes)
	}
	late, missed := v.Outcomes[0], v.Outcomes[1]
	if late.Window != "Mon 30 Nov 2026, 00:00–06:00 CET" || late.Time != "Mon 30 Nov 2026, 08:12 CET" || !late.DecidedLate ||
		late.More != 11 || late.Files[0].Size != "47.1 KiB" || !strings.Contains(late.Label, "Late: the window Mon 30 Nov 2026, 00:00–06:00 CET; late at") ||
		!strings.Contains(late.Label, "decided late") {
		t.Errorf("the late outcome: %+v", late)
	}
	if missed.DecidedLate || missed.Class != "missed" {
		t.Errorf("the missed outcome, decided 30 s after, within a poll interval: %+v", missed)
	}
}
