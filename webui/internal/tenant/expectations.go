package tenant

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/calendar"
	"github.com/sftpgate/sftpgate/internal/words"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// The Expectations page: a team's FileExpectations, which files must
// arrive in a folder by when, and what the worker decided of each window
// (docs/expectation.md). The worker decides; these pages show its
// status, and make and delete the objects.

// expectationView is an expectation as its pages show it.
type expectationView struct {
	Name string
	// Folder is connection:path.
	Folder string
	// Files says which files count, in words.
	Files string
	// When says when windows open and close, and when files must be
	// gone, in words; Opens is the cron expression, Zone its time zone.
	When, Opens, Zone, Deadline string
	// PickUp is how soon each file must be gone, in words ("" when not
	// asked).
	PickUp string
	Sink   string
	// NextDeadline is the next deadline in the expectation's zone, with
	// how far ahead it is; Window the window being decided.
	NextDeadline, Window string
	// State is "testing" (not evaluated yet), "ready" or "failed".
	State, Headline, Message string
	// Strip is the last outcomes, oldest first (at most stripLength);
	// Outcomes all of them, newest first.
	Strip, Outcomes []outcomeView
	Missed          int
	LastMet         string
	Pending         int32
	LastError       string
}

// outcomeView is one decided window.
type outcomeView struct {
	// Outcome is the outcome in words, Class its name for the page's
	// styles.
	Outcome, Class string
	// Window is when it opened and its deadline; Time when the outcome
	// happened by the rules, Decided when the worker decided it.
	Window, Time, Decided string
	// DecidedLate says the worker decided it more than a poll interval
	// after it happened (down, or the folder not listed meanwhile).
	DecidedLate bool
	// Detail says the window and its times in a line; Label the outcome
	// too, for the strip's title.
	Detail, Label string
	Files         []expectedFileView
	FileCount     int
	// More is how many counted files are not named.
	More int
}

// expectedFileView is a file a window counted.
type expectedFileView struct {
	Name, Size, Came, Gone string
}

// stripLength is how many outcomes the list shows of each expectation.
const stripLength = 10

// expectationHeadlines say in words what an expectation's Ready reason
// means.
var expectationHeadlines = map[string]string{
	v1alpha1.ReasonExpecting:           "Expecting the files",
	v1alpha1.ReasonFirstPoll:           "Looking at the folder for the first time…",
	v1alpha1.ReasonConnectionNotReady:  "The connection is not ready",
	v1alpha1.ReasonPathNotFound:        "The folder does not exist on the server",
	v1alpha1.ReasonDirectoryTooLarge:   "The folder holds too many files to check",
	v1alpha1.ReasonCalendarNotFound:    "Its holiday calendar is missing",
	v1alpha1.ReasonSinkNotFound:        "The webhook's address is not known",
	v1alpha1.ReasonSinkNotAllowed:      "This address is not allowed from here",
	v1alpha1.ReasonSinkUnreachable:     "The webhook does not answer",
	v1alpha1.ReasonDeliveryFailing:     "The webhook does not take the outcomes",
	v1alpha1.ReasonStateBudgetExceeded: "This team stores too much to keep track of the folder",
	v1alpha1.ReasonInvalidSpec:         "The settings cannot work",
	v1alpha1.ReasonOverQuota:           "Over a limit on expectations, this team's or the service's",
}

// outcomeWords say an outcome as the pages do.
var outcomeWords = map[v1alpha1.ExpectationOutcome]string{
	v1alpha1.OutcomeMet: "Met", v1alpha1.OutcomeMissed: "Missed", v1alpha1.OutcomeLate: "Late",
	v1alpha1.OutcomeNotProcessed: "Not processed",
}

// defaultPollInterval is an expectation's spec.pollInterval when unset
// (the CRD's default).
const defaultPollInterval = time.Minute

// dayTime is how the pages say a time in an expectation's zone.
const dayTime = "Mon 2 Jan 2006, 15:04 MST"

// zoneOf is the expectation's time zone, UTC when it names none this
// machine knows.
func zoneOf(e *v1alpha1.FileExpectation) *time.Location {
	if loc, err := calendar.Zone(e.Spec.Schedule.TimeZone); err == nil {
		return loc
	}
	return time.UTC
}

// expectationOf makes e's view, at now.
func expectationOf(e *v1alpha1.FileExpectation, now time.Time) expectationView {
	loc := zoneOf(e)
	sched := e.Spec.Schedule
	v := expectationView{Name: e.Name, Folder: e.Spec.ConnectionRef.String() + ":" + cmp.Or(e.Spec.Path, "/"),
		Files: filesWords(e.Spec.Files),
		Opens: sched.Opens, Zone: cmp.Or(sched.TimeZone, "UTC"), Deadline: durationWords(sched.Deadline.Duration),
		State: "testing", Headline: "Waiting for the worker…",
		Missed: int(min(e.Status.Missed, 1<<30)), Pending: e.Status.Pending, LastError: e.Status.LastError}
	if p := e.Spec.PickUpWithin; p != nil {
		v.PickUp = durationWords(p.Duration)
	}
	v.When = whenWords(v, scheduleWords(sched.Opens))
	if s := e.Spec.Sink; s != nil {
		v.Sink = cmp.Or(e.Status.SinkURI, s.URI)
		if v.Sink == "" && s.Ref != nil {
			v.Sink = s.Ref.Kind + " " + s.Ref.Name
		}
	}
	if d := e.Status.NextDeadline; d != nil {
		v.NextDeadline = d.In(loc).Format(dayTime) + " (" + untilWords(d.Time, now) + ")"
	}
	if w := e.Status.CurrentWindow; w != nil {
		v.Window = windowWords(*w, loc)
	}
	if t := e.Status.LastMetTime; t != nil {
		v.LastMet = t.In(loc).Format(dayTime)
	}
	interval := defaultPollInterval
	if p := e.Spec.PollInterval; p != nil {
		interval = p.Duration
	}
	for _, res := range e.Status.LastOutcomes {
		v.Outcomes = append(v.Outcomes, outcomeOf(res, loc, interval))
	}
	for i := min(len(v.Outcomes), stripLength) - 1; i >= 0; i-- {
		v.Strip = append(v.Strip, v.Outcomes[i])
	}
	if ready := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionReady); ready != nil && ready.ObservedGeneration == e.Generation {
		v.Headline, v.Message = cmp.Or(expectationHeadlines[ready.Reason], ready.Reason), ready.Message
		switch ready.Status {
		case metav1.ConditionTrue:
			v.State, v.Message = "ready", ""
		case metav1.ConditionFalse:
			v.State = "failed"
		}
	}
	return v
}

// whenWords says when v's windows open, in its zone, and when their files
// are due (and gone); opens is the schedule in words, "" when it has none.
func whenWords(v expectationView, opens string) string {
	s := "Open at the times of its cron schedule"
	if opens != "" {
		s = "Open " + opens
	}
	s += " (" + v.Zone + "), the files due " + v.Deadline + " after"
	if v.PickUp != "" {
		s += " and picked up within " + v.PickUp + " of coming"
	}
	return s
}

// outcomeOf is res as the pages show it, its times in loc; interval is
// the expectation's poll interval, past which a decision was late.
func outcomeOf(res v1alpha1.ExpectationResult, loc *time.Location, interval time.Duration) outcomeView {
	o := outcomeView{Outcome: cmp.Or(outcomeWords[res.Outcome], string(res.Outcome)), Class: strings.ToLower(string(res.Outcome)),
		Window: windowWords(res.Window, loc), Time: res.Time.In(loc).Format(dayTime), Decided: res.DecidedTime.In(loc).Format(dayTime),
		DecidedLate: res.DecidedTime.Sub(res.Time.Time) > interval, FileCount: int(res.FileCount)}
	for _, f := range res.Files {
		fv := expectedFileView{Name: f.Name, Size: web.Size(f.Size), Came: f.Came.In(loc).Format(dayTime)}
		if f.Gone != nil {
			fv.Gone = f.Gone.In(loc).Format(dayTime)
		}
		o.Files = append(o.Files, fv)
	}
	o.More = max(o.FileCount-len(o.Files), 0)
	o.Detail = "the window " + o.Window + "; " + strings.ToLower(o.Outcome) + " at " + o.Time
	if o.DecidedLate {
		o.Detail += ", decided late at " + o.Decided
	}
	o.Label = o.Outcome + ": " + o.Detail
	return o
}

// windowWords says a window in loc: one date when it opens and closes on
// the same day.
func windowWords(w v1alpha1.ExpectationWindow, loc *time.Location) string {
	opens, deadline := w.Opens.In(loc), w.Deadline.In(loc)
	if y, m, d := opens.Date(); deadline.Year() == y && deadline.Month() == m && deadline.Day() == d {
		return opens.Format("Mon 2 Jan 2006, 15:04") + "–" + deadline.Format("15:04 MST")
	}
	return opens.Format(dayTime) + " to " + deadline.Format(dayTime)
}

// filesWords says which files count.
func filesWords(f v1alpha1.ExpectedFiles) string {
	n := max(f.MinCount, 1)
	s := fmt.Sprintf("at least %s matching %s", words.Count(int64(n), "file", "files"), strings.Join(f.Include, ", "))
	if n == 1 {
		s = "a file matching " + strings.Join(f.Include, ", ")
	}
	if f.MinSize != nil {
		s += ", of " + web.Size(*f.MinSize) + " or more"
	}
	if f.MaxSize != nil {
		s += ", of " + web.Size(*f.MaxSize) + " or less"
	}
	return s
}

// durationWords says d as people do: "6 hours", "1 hour 30 minutes",
// "2 days".
func durationWords(d time.Duration) string {
	if d <= 0 {
		return "no time"
	}
	var parts []string
	for _, unit := range []struct {
		d         time.Duration
		one, many string
	}{{24 * time.Hour, "day", "days"}, {time.Hour, "hour", "hours"}, {time.Minute, "minute", "minutes"}, {time.Second, "second", "seconds"}} {
		if n := d / unit.d; n > 0 {
			parts = append(parts, words.Count(int64(n), unit.one, unit.many))
			d -= n * unit.d
		}
	}
	return strings.Join(parts, " ")
}

// untilWords says how far t is from now: "in 3 hours", or how long ago.
func untilWords(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d < 0:
		return words.Ago(t, now)
	case d < time.Minute:
		return "in less than a minute"
	case d < time.Hour:
		return "in " + words.Count(int64(d/time.Minute), "minute", "minutes")
	case d < 48*time.Hour:
		return "in " + words.Count(int64(d/time.Hour), "hour", "hours")
	}
	return "in " + words.Count(int64(d/(24*time.Hour)), "day", "days")
}

// weekdays name cron's days of the week (0 and 7 are Sunday).
var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// scheduleWords says when a cron expression opens a window, for the
// shapes people write most ("every day at 06:00", "Monday to Friday at
// 08:00"); "" for any other, which the page shows as it is.
func scheduleWords(expr string) string {
	switch strings.TrimSpace(expr) {
	case "@daily", "@midnight":
		return "every day at 00:00"
	case "@hourly":
		return "every hour, on the hour"
	case "@weekly":
		return "every Sunday at 00:00"
	case "@monthly":
		return "on the 1st of every month at 00:00"
	case "@yearly", "@annually":
		return "every 1 January at 00:00"
	}
	f := strings.Fields(expr)
	if len(f) != 5 || f[3] != "*" {
		return ""
	}
	minute, okMinute := cronNumber(f[0], 0, 59)
	hour, okHour := cronNumber(f[1], 0, 23)
	switch {
	case f[0] == "*" && f[1] == "*" && f[2] == "*" && f[4] == "*":
		return "every minute"
	case okMinute && minute == 0 && f[1] == "*" && f[2] == "*" && f[4] == "*":
		return "every hour, on the hour"
	case okMinute && f[1] == "*" && f[2] == "*" && f[4] == "*":
		return fmt.Sprintf("every hour at %s past", words.Count(int64(minute), "minute", "minutes"))
	case !okMinute || !okHour:
		return ""
	}
	at := fmt.Sprintf("at %02d:%02d", hour, minute)
	switch {
	case f[2] == "*" && f[4] == "*":
		return "every day " + at
	case f[4] == "*":
		if day, ok := cronNumber(f[2], 1, 31); ok {
			return fmt.Sprintf("on day %d of every month %s", day, at)
		}
	case f[2] == "*":
		if days := weekdayWords(f[4]); days != "" {
			return days + " " + at
		}
	}
	return ""
}

// cronNumber reads a cron field that is one number from lo to hi.
func cronNumber(field string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(field)
	return n, err == nil && n >= lo && n <= hi && strconv.Itoa(n) == field
}

// weekdayWords says a day-of-week field of numbers and ranges ("1-5",
// "1,3,5", "6,0"); "" for any other.
func weekdayWords(field string) string {
	var parts []string
	for _, item := range strings.Split(field, ",") {
		from, to, isRange := strings.Cut(item, "-")
		a, okA := cronNumber(from, 0, 7)
		if !okA {
			return ""
		}
		if !isRange {
			parts = append(parts, weekdays[a]+"s")
			continue
		}
		b, okB := cronNumber(to, 0, 7)
		if !okB || b <= a {
			return ""
		}
		parts = append(parts, weekdays[a]+" to "+weekdays[b])
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "on " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// ListExpectations answers GET /expectations.
func (u *Pages) ListExpectations(w http.ResponseWriter, r *http.Request) error {
	var list v1alpha1.FileExpectationList
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.FileExpectation) int { return strings.Compare(a.Name, b.Name) })
	now := time.Now()
	views := make([]expectationView, 0, len(list.Items))
	for i := range list.Items {
		views = append(views, expectationOf(&list.Items[i], now))
	}
	u.Render(w, r, http.StatusOK, "expectations", web.Page{Title: "Expectations", Data: views,
		Refresh: slices.ContainsFunc(views, func(v expectationView) bool { return v.State == "testing" })})
	return nil
}

// expectationOfPath is the team's expectation the path names.
func (u *Pages) expectationOfPath(r *http.Request) (*v1alpha1.FileExpectation, error) {
	var e v1alpha1.FileExpectation
	return &e, u.teamObject(r, &e)
}

// ShowExpectation answers GET /expectations/{name}: the expectation and
// the outcomes its status keeps.
func (u *Pages) ShowExpectation(w http.ResponseWriter, r *http.Request) error {
	e, err := u.expectationOfPath(r)
	if err != nil {
		return err
	}
	v := expectationOf(e, time.Now())
	u.Render(w, r, http.StatusOK, "expectation", web.Page{Title: e.Name, Data: v, Refresh: v.State == "testing"})
	return nil
}

// expectationFields are the new-expectation form's fields.
var expectationFields = []string{"name", "connection", "path", "include", "minCount", "opens", "timeZone", "deadline", "pickUpWithin", "url"}

// endpointOption is a connection the form offers: Value as a
// ConnectionReference says it, Label in words.
type endpointOption struct{ Value, Label string }

// expectationFormData is what the new-expectation form offers.
type expectationFormData struct {
	Connections []endpointOption
	Zones       []string
}

// commonZones are the time zones the form suggests; any IANA zone is
// taken.
var commonZones = []string{"UTC", "Europe/London", "Europe/Berlin", "Europe/Paris", "America/New_York", "America/Chicago",
	"America/Los_Angeles", "America/Sao_Paulo", "Asia/Kolkata", "Asia/Singapore", "Asia/Tokyo", "Australia/Sydney"}

// NewExpectationForm answers GET /expectations/new, filled from the query
// (?connection=&path=, as a watched folder's "Expect files here" links).
func (u *Pages) NewExpectationForm(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	values := map[string]string{"connection": q.Get("connection"), "path": cmp.Or(q.Get("path"), "/"), "minCount": "1",
		"opens": "0 0 * * *", "timeZone": "UTC", "deadline": "6h"}
	return u.expectationForm(values)(w, r, http.StatusOK, web.Problems{})
}

// expectationForm draws the new-expectation form, filled with values.
func (u *Pages) expectationForm(values map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		ends, err := u.endpoints(r.Context(), web.AccountFrom(r.Context()).Namespace)
		if err != nil {
			return err
		}
		data := expectationFormData{Zones: commonZones}
		for _, e := range ends {
			data.Connections = append(data.Connections, endpointOption{Value: ref(e), Label: e.GetName() + " (" + kindOf(e).Label + ")"})
		}
		u.Render(w, r, status, "expectation_form", web.Page{Title: "Expect files in a folder", Form: values, Error: problem.Form, Errors: problem.Fields, Data: data})
		return nil
	}
}

// CreateExpectation answers POST /expectations: a FileExpectation of the
// team's connection, as the form says.
func (u *Pages) CreateExpectation(w http.ResponseWriter, r *http.Request) error {
	values := map[string]string{}
	for _, field := range expectationFields {
		values[field] = strings.TrimSpace(r.PostFormValue(field))
	}
	ns := web.AccountFrom(r.Context()).Namespace
	mistakes := web.FieldErrors{}
	e := readExpectationForm(ns, values, time.Now(), mistakes)
	if _, ok := mistakes["connection"]; !ok {
		if err := u.ownEndpoint(r, ns, e.Spec.ConnectionRef); err != nil {
			var pe *web.PersonError
			if !errors.As(err, &pe) {
				return err
			}
			mistakes.Add("connection", pe.Msg)
		}
	}
	err := mistakes.Err()
	if err == nil {
		err = u.createNoted(r, "FileExpectation", e)
	}
	if err != nil {
		return web.OnForm(err, u.expectationForm(values))
	}
	u.Notify(w, r, "Files are expected in "+e.Spec.ConnectionRef.String()+":"+e.Spec.Path+" as "+e.Name+".")
	http.Redirect(w, r, "/expectations", http.StatusSeeOther)
	return nil
}

// ownEndpoint checks that the team has the object ref names, of a kind
// whose files sftpgate reaches.
func (u *Pages) ownEndpoint(r *http.Request, ns string, ref v1alpha1.ConnectionReference) error {
	e, ok := v1alpha1.NewEndpoint(cmp.Or(ref.Kind, v1alpha1.KindSftpConnection))
	if !ok {
		return &web.PersonError{Msg: fmt.Sprintf("This team has no connection %q.", ref.String())}
	}
	err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: ref.Name}, e)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return err
	case err != nil:
		return &web.PersonError{Msg: fmt.Sprintf("This team has no connection %q.", ref.String())}
	}
	return nil
}

// Bounds of the form's values, as the CRD's.
const (
	maxPatterns     = 16
	maxPatternLen   = 256
	maxMinCount     = 1000
	minDeadline     = time.Minute
	maxExpectedPath = 1024
	maxCronLen      = 256
	maxZoneLen      = 64
	maxSinkURL      = 2048
	// maxExpectationName leaves room for the worker's names made of it.
	maxExpectationName = 63
)

// readExpectationForm checks the form's values, noting each mistake in
// the form's words, and makes the FileExpectation they describe (its
// connection not yet checked to be the team's). now is when the schedule
// must open a window after.
func readExpectationForm(ns string, values map[string]string, now time.Time, mistakes web.FieldErrors) *v1alpha1.FileExpectation {
	e := &v1alpha1.FileExpectation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
	spec := &e.Spec

	connection := values["connection"]
	spec.ConnectionRef = v1alpha1.ParseConnectionReference(connection)
	if connection == "" || len(validation.IsDNS1123Subdomain(spec.ConnectionRef.Name)) > 0 {
		mistakes.Add("connection", "Choose the connection whose folder the files arrive in.")
	}

	name := values["name"]
	switch {
	case name == "":
		prefix := strings.ToLower(spec.ConnectionRef.Name)
		if validation.IsDNS1123Label(prefix) != nil || len(prefix) > 40 {
			prefix = "expectation"
		}
		e.GenerateName = prefix + "-"
	case len(validation.IsDNS1123Label(name)) > 0 || len(name) > maxExpectationName:
		mistakes.Add("name", fmt.Sprintf("%q cannot be a name: use up to %d lower-case letters, digits and dashes, starting and ending with a letter or digit.", name, maxExpectationName))
	case name == "new":
		mistakes.Add("name", `"new" is the name of the page that adds one: choose another.`)
	default:
		e.Name = name
	}

	spec.Path = cmp.Or(values["path"], "/")
	if !cleanPath(spec.Path) || len(spec.Path) > maxExpectedPath {
		mistakes.Add("path", fmt.Sprintf("%q is not a folder of the connection: start it with / (such as /incoming), with no . or .. parts.", spec.Path))
	}

	spec.Files.Include = readPatterns(values["include"], mistakes)
	count, err := strconv.Atoi(values["minCount"])
	if err != nil || count < 1 || count > maxMinCount {
		mistakes.Add("minCount", fmt.Sprintf("Give how many files a window needs, from 1 to %d.", maxMinCount))
	}
	spec.Files.MinCount = int32(min(max(count, 1), maxMinCount))

	readSchedule(values, now, mistakes, &spec.Schedule)

	if v := values["pickUpWithin"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			mistakes.Add("pickUpWithin", fmt.Sprintf("%q is not a time of at least a minute: write it as 30m or 2h, or leave it empty.", v))
		} else {
			spec.PickUpWithin = &metav1.Duration{Duration: d}
		}
	}

	if v := values["url"]; v != "" {
		target, err := url.Parse(v)
		if err != nil || (target.Scheme != "https" && target.Scheme != "http") || target.Host == "" || target.User != nil || len(v) > maxSinkURL {
			mistakes.Add("url", "Give the webhook's address, such as https://example.com/hooks/expectations, or leave it empty.")
		} else {
			spec.Sink = &v1alpha1.Destination{URI: target.String()}
		}
	}
	return e
}

// readPatterns reads the form's comma-separated name patterns.
func readPatterns(field string, mistakes web.FieldErrors) []string {
	var patterns []string
	for _, p := range strings.Split(field, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		switch _, err := path.Match(p, ""); {
		case err != nil:
			mistakes.Add("include", fmt.Sprintf("%q is not a pattern: use * for any characters, ? for one, and [a-z] for one of a set.", p))
		case strings.Contains(p, "/"):
			mistakes.Add("include", fmt.Sprintf("%q holds a /: a pattern is matched against a file's name, not its folder.", p))
		case len(p) > maxPatternLen:
			mistakes.Add("include", fmt.Sprintf("A pattern is at most %d characters.", maxPatternLen))
		}
		patterns = append(patterns, p)
	}
	switch {
	case len(patterns) == 0:
		mistakes.Add("include", "Give the names of the files expected, such as report-*.csv.")
	case len(patterns) > maxPatterns:
		mistakes.Add("include", fmt.Sprintf("Give at most %d patterns.", maxPatterns))
	}
	return patterns
}

// readSchedule reads the form's schedule into s: the cron expression,
// the time zone and the deadline, each checked as the worker reads it,
// and together, that they open a window after now.
func readSchedule(values map[string]string, now time.Time, mistakes web.FieldErrors, s *v1alpha1.ExpectationSchedule) {
	s.Opens, s.TimeZone = values["opens"], cmp.Or(values["timeZone"], "UTC")
	good := true
	if _, err := calendar.Parse(s.Opens, ""); err != nil || len(s.Opens) > maxCronLen || len(strings.Fields(s.Opens)) != 5 || strings.HasPrefix(s.Opens, "@") {
		good = false
		mistakes.Add("opens", fmt.Sprintf("%q is not a cron schedule of five fields: see the examples below.", s.Opens))
	}
	// "Local" is the worker's own zone, whatever it is: not one to read
	// a team's schedule in.
	if _, err := calendar.Zone(s.TimeZone); err != nil || s.TimeZone == "Local" || len(s.TimeZone) > maxZoneLen {
		good = false
		mistakes.Add("timeZone", fmt.Sprintf("%q is not a time zone: give its IANA name, such as Europe/Berlin or America/New_York, or UTC.", s.TimeZone))
	}
	d, err := time.ParseDuration(values["deadline"])
	if err != nil || d < minDeadline || d > calendar.MaxLength {
		good = false
		mistakes.Add("deadline", fmt.Sprintf("%q is not a time from 1 minute to 31 days: write it as 6h, 90m or 48h.", values["deadline"]))
	}
	s.Deadline = metav1.Duration{Duration: d}
	if !good {
		return
	}
	windows, err := calendar.NewWindows(s.Opens, s.TimeZone, d, nil)
	if err != nil {
		mistakes.Add("opens", err.Error())
		return
	}
	if windows.After(now).IsZero() {
		mistakes.Add("opens", fmt.Sprintf("%q never opens a window (such as on 30 February): choose days that come.", s.Opens))
	}
}

// ConfirmDeleteExpectation answers GET /expectations/{name}/delete.
func (u *Pages) ConfirmDeleteExpectation(w http.ResponseWriter, r *http.Request) error {
	e, err := u.expectationOfPath(r)
	if err != nil {
		return err
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Delete the expectation " + e.Name + "?",
		Consequence: "Files are no longer expected in " + e.Spec.ConnectionRef.String() + ":" + cmp.Or(e.Spec.Path, "/") +
			": no window is decided from now on, and its history here goes with it. Outcomes already sent, and the Activity page's records, stay; the folder's files are not touched.",
		Action: r.URL.Path, Button: "Delete the expectation", Back: "/expectations/" + e.Name})
}

// DeleteExpectation deletes one of the team's expectations.
func (u *Pages) DeleteExpectation(w http.ResponseWriter, r *http.Request) error {
	e, err := u.expectationOfPath(r)
	if err != nil {
		return err
	}
	if err := client.IgnoreNotFound(u.Client.Delete(r.Context(), e, client.Preconditions{UID: &e.UID})); err != nil {
		return err
	}
	u.Notify(w, r, "The expectation "+e.Name+" is deleted.")
	http.Redirect(w, r, "/expectations", http.StatusSeeOther)
	return nil
}
