package expectations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/calendar"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/expect"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// task runs one expectation: it lists the folder when a decision may be
// due, decides, stores, records and announces, then waits for the next
// listing, the next try of a delivery, or a change of the expectation.
type task struct {
	r     *Runner
	uid   types.UID
	key   client.ObjectKey
	place tasks.Place

	tracker expect.Tracker
	state   *stored // nil until loaded
	version statestore.Version
	// saved is the last stored encoding, less the listing's time: a
	// listing that found nothing new writes nothing.
	saved []byte
	// savedListed is the last listing's time as stored.
	savedListed time.Time
	// lost says another replica took the expectation at this step.
	lost bool
	// unrecorded are outcomes decided and not yet stored: recorded in the
	// audit trail and the object's events once they are, so that a
	// replica that lost the expectation before storing them (and the one
	// that decides them again) records each once.
	unrecorded []v1alpha1.ExpectationResult
	generation int64
	// nextList is when the folder is listed next; nextTry when the
	// outbox's head may be tried again.
	nextList, nextTry time.Time
	listed            bool
	listing           struct{ pathMissing, tooLarge, failed string }
	delivery          struct {
		failing             string
		unreachable, denied bool
	}
	overBudget, lastErr string
	sinkURI             string
	lastStatus          time.Time
	behind              string
	metrics             atomic.Pointer[metricValues]
}

// metricValues are what the collector reads of a task.
type metricValues struct {
	last              v1alpha1.ExpectationOutcome
	lastMet, deadline time.Time
	// undecided is a deadline passed whose window has no outcome yet.
	undecided time.Time
	missed    int64
}

// stored is what a task keeps in the worker's namespace, for the replica
// that takes the expectation next.
type stored struct {
	// Folder names the folder the files were seen in: another one starts
	// them over.
	Folder string `json:"folder"`
	// Begun is when a replica first took the expectation: its first
	// window is the first to open after.
	Begun   time.Time    `json:"begun"`
	Tracker expect.State `json:"tracker"`
	// Outbox are the outcomes to announce, oldest first.
	Outbox []announcement `json:"outbox,omitempty"`
	// Outcomes are the last decided, newest first.
	Outcomes []v1alpha1.ExpectationResult `json:"outcomes,omitempty"`
	Missed   int64                        `json:"missed,omitempty"`
	LastMet  time.Time                    `json:"lastMet,omitzero"`
	// Dropped counts outcomes dropped from a full outbox.
	Dropped int64 `json:"dropped,omitempty"`
}

// announcement is an outcome to deliver, with its event's id.
type announcement struct {
	ID       string                     `json:"id"`
	Result   v1alpha1.ExpectationResult `json:"result"`
	Attempts int32                      `json:"attempts,omitempty"`
}

// idle is how long a task that cannot work waits before it looks again;
// shortest the least wait between two steps; eventFiles how many files an
// outcome names (status, events).
const (
	idle       = 10 * time.Second
	shortest   = 10 * time.Millisecond
	eventFiles = 10
)

// Step does what is due; an expectation's work never ends.
func (t *task) Step(ctx context.Context) (time.Duration, bool) { return t.step(ctx), false }

// Stop stores what the task holds, for the replica that takes the
// expectation next.
func (t *task) Stop(ctx context.Context) { t.save(ctx) }

func (t *task) step(ctx context.Context) (wait time.Duration) {
	var e v1alpha1.FileExpectation
	if err := t.r.Cache.Get(ctx, t.key, &e); err != nil || e.UID != t.uid {
		return idle
	}
	edited := e.Generation != t.generation
	if edited {
		if t.generation == 0 {
			t.listed = expectingBefore(&e) // taken over: no FirstPoll for nothing
		}
		t.generation, t.nextList = e.Generation, time.Time{} // a new schedule may open earlier
	}
	var f facts
	defer func() {
		if t.lost {
			t.lost = false
			return // another replica holds it: its status is that one's to write
		}
		if again := t.report(ctx, &e, f); !again.IsZero() {
			wait = max(min(wait, time.Until(again)), shortest)
		}
	}()
	set, err := readSettings(ctx, t.r.Cache, t.r.Client, &e)
	var missing *calendarMissing
	switch {
	case errors.As(err, &missing):
		f.calendar = err.Error()
		return idle
	case err != nil:
		f.invalid = err.Error()
		return time.Minute
	case t.place.Get() != tasks.Runs:
		f.overQuota = t.r.overQuota(t.place.Get())
		return time.Minute
	}
	conn, why := ends.Get(ctx, t.r.Cache, e.Namespace, e.Spec.ConnectionRef)
	if why != "" {
		f.connection = why
		return idle
	}
	sink, deadLetter := "", ""
	if e.Spec.Sink != nil {
		if sink, err = deliver.Resolve(ctx, t.r.Client, e.Namespace, *e.Spec.Sink); err == nil && e.Spec.Delivery.DeadLetterSink != nil {
			deadLetter, err = deliver.Resolve(ctx, t.r.Client, e.Namespace, *e.Spec.Delivery.DeadLetterSink)
		}
		if err != nil {
			f.sink = err.Error()
			return idle
		}
	}
	t.sinkURI = sink
	now := t.r.now()
	if err := t.load(ctx, &e, conn, set, now, edited); err != nil {
		f.listFailed = "reading the expectation's stored state: " + err.Error()
		return idle
	}
	// A state the namespace's budget refused grows no more: no listing
	// until it is stored.
	if !now.Before(t.nextList) && t.overBudget == "" {
		t.list(ctx, &e, conn)
	}
	if sink == "" {
		t.state.Outbox = nil // a sink removed takes its pending outcomes with it
	}
	t.decide(now, sink != "", set)
	t.save(ctx)
	t.record(ctx, &e)
	// Only what is stored is announced: a replica that takes over finds
	// it, and announces nothing it would decide otherwise.
	if sink != "" && t.stored() {
		t.deliver(ctx, &e, conn, set, deliver.Targets{Sink: sink, DeadLetter: deadLetter})
		t.save(ctx)
	}
	if t.state == nil {
		t.lost = true
		return idle // another replica holds it now
	}
	t.publish(now)
	f.listed, f.overBudget = t.listed, t.overBudget
	if t.overBudget != "" {
		return idle // nothing to do until the namespace has room
	}
	f.pathMissing, f.tooLarge, f.listFailed = t.listing.pathMissing, t.listing.tooLarge, t.listing.failed
	if len(t.state.Outbox) > 0 {
		f.delivery, f.unreachable, f.sinkDenied = t.delivery.failing, t.delivery.unreachable, t.delivery.denied
	}
	// Never longer than an interval: the clock may jump (a host's
	// suspend, a test's clock), and the plan with it.
	wait = min(t.nextList.Sub(t.r.now()), set.interval)
	if len(t.state.Outbox) > 0 && !t.delivery.denied {
		wait = min(wait, time.Until(t.nextTry))
	}
	return max(wait, shortest)
}

// load reads the stored state, the first time, and sets the tracker to
// the current spec.
func (t *task) load(ctx context.Context, e *v1alpha1.FileExpectation, conn *ends.End, set settings, now time.Time, edited bool) error {
	// The folder and which files count: another starts the files over.
	files := e.Spec.Files
	folder := fmt.Sprintf("%s:%s:%s:%q:%v:%v", conn.Ref, conn.Root, path.Clean(e.Spec.Path), files.Include, ptrValue(files.MinSize), ptrValue(files.MaxSize))
	if t.state == nil {
		blob, v, err := t.r.States.Load(ctx, string(t.uid))
		if err != nil {
			return err
		}
		st := &stored{Folder: folder, Begun: now}
		if blob != nil {
			if err := json.Unmarshal(blob, st); err != nil {
				t.r.log().Warn("an expectation's stored state cannot be read; starting over", "namespace", e.Namespace, "name", e.Name, "error", err)
				st = &stored{Folder: folder, Begun: now}
			}
		}
		t.state, t.version, t.tracker.State = st, v, st.Tracker
		t.saved, t.savedListed = t.encodeUnlisted(), st.Tracker.Listed
		// Outcomes decided before a lost write that in fact was stored
		// are recorded now; the others will be decided again.
		t.unrecorded = slices.DeleteFunc(t.unrecorded, func(r v1alpha1.ExpectationResult) bool {
			return !slices.ContainsFunc(st.Outcomes, func(o v1alpha1.ExpectationResult) bool {
				return o.Outcome == r.Outcome && o.Window.Opens.Equal(&r.Window.Opens)
			})
		})
	}
	if t.state.Folder != folder {
		// What was seen says nothing of another folder, or of other
		// files: the next listing is a baseline. The window and its
		// outcomes hold.
		t.tracker.State.Files, t.tracker.State.Listed, t.state.Folder = nil, time.Time{}, folder
	}
	if w := t.tracker.State.Window; edited && !w.IsZero() && now.Before(w.Opens) {
		// A window not opened yet is the new schedule's to say.
		t.tracker.State.Window = set.windows.After(now)
	}
	t.tracker.Windows, t.tracker.Rule, t.tracker.Settle, t.tracker.Hold = set.windows, set.rule, set.settle, set.settle+set.interval
	return nil
}

// ptrValue is *p, or zero.
func ptrValue[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

// expectingBefore says whether e's status shows its current generation
// listed and decided by a replica before: Ready, for that generation,
// Expecting.
func expectingBefore(e *v1alpha1.FileExpectation) bool {
	ready := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionReady)
	return ready != nil && ready.ObservedGeneration == e.Generation && ready.Reason == v1alpha1.ReasonExpecting
}

// list lists the folder at now, and plans the next listing.
func (t *task) list(ctx context.Context, e *v1alpha1.FileExpectation, conn *ends.End) {
	leave, ok := t.r.enterListing(ctx, e.Namespace)
	if !ok {
		t.nextList = t.r.now().Add(time.Second) // the namespace's listings are all in flight
		return
	}
	defer leave()
	// As of when it began, once its slot was held: a file that comes
	// while it runs may show or not.
	began := t.r.now()
	walk := watch.Walk{Dir: path.Join(conn.Root, e.Spec.Path), Filter: watch.Filter{Include: e.Spec.Files.Include}, MaxFiles: t.r.Limits.MaxEntries}
	op := pool.Op{Idempotent: true, Stream: true, Timeout: min(5*conn.OperationTimeout, t.r.Limits.ListTimeout)}
	var found []watch.File
	err := t.r.Ends.Do(ctx, conn, op, func(fsys files.FS, _ func()) error {
		var err error
		found, err = walk.List(ctx, fsys)
		return err
	})
	var tooMany *watch.ErrTooManyFiles
	var tooLarge *files.TooLargeError
	l := &t.listing
	l.pathMissing, l.tooLarge, l.failed = "", "", ""
	switch {
	case err == nil:
	case errors.As(err, &tooMany), errors.As(err, &tooLarge):
		l.tooLarge = err.Error()
	case errors.Is(err, fs.ErrNotExist):
		l.pathMissing = fmt.Sprintf("%s is not a folder on the server", e.Spec.Path)
	default:
		l.failed = "listing the folder: " + err.Error()
	}
	ended := t.r.now()
	if err != nil {
		t.lastErr, t.nextList = err.Error(), ended.Add(pollInterval(e))
		return
	}
	entries := make([]expect.Entry, len(found))
	for i, f := range found {
		// A name that is not UTF-8 is kept as the state stores it (JSON),
		// so that it is the same file after a reload.
		entries[i] = expect.Entry{Name: strings.ToValidUTF8(f.Path, "\uFFFD"), Size: f.Size, ModTime: time.Unix(f.ModTime, 0)}
	}
	t.tracker.Observe(entries, began, ended)
	t.listed, t.lastErr = true, ""
	t.nextList = time.Time{} // planned once decided (plan)
}

// decide takes the outcomes due at now, and plans the next listing.
func (t *task) decide(now time.Time, announce bool, set settings) {
	st := t.state
	// Decided as of the last listing, never past it: a folder that could
	// not be listed over a deadline is not taken for an empty one.
	var decided []expect.Decision
	if listed := t.tracker.State.Listed; !listed.IsZero() {
		if listed.After(now) {
			listed = now
		}
		decided = t.tracker.Decide(listed, st.Begun)
	}
	for _, d := range decided {
		res := v1alpha1.ExpectationResult{Outcome: v1alpha1.ExpectationOutcome(d.Outcome), Window: windowOf(d.Window),
			Time: seconds(d.At), DecidedTime: seconds(now), FileCount: int32(min(len(d.Files), 1<<30))}
		for _, f := range d.Files[:min(len(d.Files), eventFiles)] {
			ef := v1alpha1.ExpectedFile{Name: f.Name, Size: f.Size, Came: seconds(f.Came)}
			if !f.Gone.IsZero() {
				gone := seconds(f.Gone)
				ef.Gone = &gone
			}
			res.Files = append(res.Files, ef)
		}
		st.Outcomes = append([]v1alpha1.ExpectationResult{res}, st.Outcomes[:min(len(st.Outcomes), t.r.Limits.OutcomesKept-1)]...)
		switch d.Outcome {
		case expect.Missed:
			st.Missed++
		case expect.Met:
			st.LastMet = d.At
		}
		if announce {
			st.Outbox = append(st.Outbox, announcement{ID: expect.EventID(string(t.uid), d.Window, d.Outcome), Result: res})
			if over := len(st.Outbox) - t.r.Limits.MaxPending; over > 0 {
				st.Dropped += int64(over)
				st.Outbox = st.Outbox[over:]
			}
		}
		t.unrecorded = append(t.unrecorded, res)
	}
	st.Tracker = t.tracker.State
	if t.nextList.IsZero() {
		t.nextList = t.plan(now, set.interval, set.settle)
	}
}

// plan is when the folder is listed next: every interval while the
// window waits for files (or for their pick-up), at its deadline, and
// at the next window's opening once it can have no more outcomes.
func (t *task) plan(now time.Time, interval, settle time.Duration) time.Time {
	w := t.tracker.State.Window
	next := now.Add(interval)
	switch {
	case w.IsZero():
		return now.Add(time.Hour) // the schedule opens no window: look again later
	case now.Before(w.Opens):
		next = w.Opens
	case t.tracker.Done():
		if n := t.tracker.Windows.After(w.Opens); !n.IsZero() {
			next = n.Opens
		} else {
			next = now.Add(time.Hour)
		}
	}
	if now.Before(w.Deadline) && w.Deadline.Before(next) {
		next = w.Deadline
	}
	if recheck := now.Add(max(settle, time.Second)); t.tracker.Recheck() && recheck.Before(next) {
		next = recheck
	}
	return next
}

// save stores the state when it changed, but for the listing's time.
func (t *task) save(ctx context.Context) {
	if t.state == nil {
		return
	}
	unlisted := t.encodeUnlisted()
	if bytes.Equal(unlisted, t.saved) && !t.crossed() {
		return
	}
	if !t.r.Shard.Holds(string(t.uid)) {
		return
	}
	blob, err := json.Marshal(t.state)
	if err == nil {
		err = t.r.States.Save(ctx, string(t.uid), t.key.Namespace, blob, &t.version)
	}
	switch {
	case errors.Is(err, statestore.ErrConflict):
		// Another replica took the expectation (what it holds is newer,
		// and it decides and records what this one had not stored), or
		// a write of this one's whose answer was lost: the next step
		// reads it again.
		t.state, t.saved = nil, nil
		return
	case errors.As(err, new(*storedbytes.ExceededError)):
		t.overBudget = err.Error()
		return
	case err != nil:
		t.lastErr = "storing the expectation's state: " + err.Error()
		return
	}
	t.saved, t.savedListed, t.overBudget = unlisted, t.state.Tracker.Listed, ""
}

// crossed says whether the listings passed the current window's opening
// or deadline since the state was stored: the time of the last listing
// is stored then, so that a replica that takes over dates no file by its
// modification time back across listings that saw the folder.
func (t *task) crossed() bool {
	w, listed := t.tracker.State.Window, t.state.Tracker.Listed
	for _, at := range []time.Time{w.Opens, w.Deadline} {
		if !w.IsZero() && t.savedListed.Before(at) && !listed.Before(at) {
			return true
		}
	}
	return false
}

// stored says whether the state is stored as it is, but for the last
// listing's time.
func (t *task) stored() bool { return t.state != nil && bytes.Equal(t.saved, t.encodeUnlisted()) }

// encodeUnlisted is the state's encoding without the last listing's time.
func (t *task) encodeUnlisted() []byte {
	s := *t.state
	s.Tracker.Listed = time.Time{}
	blob, _ := json.Marshal(s) //nolint:errchkjson // plain data: times, strings, numbers
	return blob
}

// record writes the outcomes stored since the last step to the audit
// trail and the object's events.
func (t *task) record(ctx context.Context, e *v1alpha1.FileExpectation) {
	if !t.stored() {
		return // recorded once stored
	}
	for _, res := range t.unrecorded {
		r := audit.Record{Action: "expectation." + outcomeName(res.Outcome), Actor: audit.Actor{Kind: audit.ActorExpectation, Name: e.Name},
			Namespace: e.Namespace, Connection: e.Spec.ConnectionRef.String(), Object: "FileExpectation/" + e.Name,
			Count: int64(res.FileCount), Result: audit.ResultOK}
		if res.Outcome != v1alpha1.OutcomeMet {
			r.Result = outcomeName(res.Outcome)
		}
		for _, f := range res.Files {
			r.Paths = append(r.Paths, path.Join(e.Spec.Path, f.Name))
		}
		t.r.Audit.Record(ctx, r)
		if t.r.Recorder != nil {
			kind := "Warning"
			if res.Outcome == v1alpha1.OutcomeMet {
				kind = "Normal"
			}
			t.r.Recorder.Eventf(e, nil, kind, string(res.Outcome), "Expect", "%s", describe(e, res))
		}
	}
	t.unrecorded = nil
}

// describe is an outcome for people: the object's events.
func describe(e *v1alpha1.FileExpectation, res v1alpha1.ExpectationResult) string {
	w := fmt.Sprintf("the window from %s to %s", res.Window.Opens.UTC().Format(time.RFC3339), res.Window.Deadline.UTC().Format(time.RFC3339))
	switch res.Outcome {
	case v1alpha1.OutcomeMet:
		return fmt.Sprintf("%s was met: %d files came to %s", w, res.FileCount, e.Spec.Path)
	case v1alpha1.OutcomeMissed:
		return fmt.Sprintf("%s was missed: %d of the %d files expected came to %s", w, res.FileCount, max(e.Spec.Files.MinCount, 1), e.Spec.Path)
	case v1alpha1.OutcomeLate:
		return fmt.Sprintf("the files of %s came late, at %s", w, res.Time.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("the files of %s were not picked up in time: one was still in %s at %s", w, e.Spec.Path, res.Time.UTC().Format(time.RFC3339))
}

// deliver sends the outbox's outcomes in order, while this replica holds
// the expectation, until one fails.
func (t *task) deliver(ctx context.Context, e *v1alpha1.FileExpectation, conn *ends.End, set settings, to deliver.Targets) {
	st := t.state
	for len(st.Outbox) > 0 && ctx.Err() == nil {
		if !t.r.Shard.Holds(string(t.uid)) || time.Now().Before(t.nextTry) {
			return
		}
		a := &st.Outbox[0]
		ev, err := cloudEvent(e, conn, a)
		if err != nil {
			t.r.log().Error("making an expectation's event", "namespace", e.Namespace, "name", e.Name, "error", err)
			st.Outbox = st.Outbox[1:]
			continue
		}
		res := t.r.Sender.Try(ctx, e.Namespace, to, ev, set.delivery, a.Attempts)
		t.delivery.denied = res.Verdict == deliver.Denied
		if res.Ended() {
			st.Outbox = st.Outbox[1:]
			t.delivery.failing, t.delivery.unreachable = "", false
			continue
		}
		t.delivery.failing, t.delivery.unreachable = res.Err.Error(), res.Unreachable
		t.lastErr = "delivering an outcome: " + res.Err.Error()
		if res.Verdict == deliver.Denied {
			return // no try until the sink or the policy changes
		}
		a.Attempts, t.nextTry = res.Attempts, res.RetryAt
		return
	}
}

// publish sets what the metrics read.
func (t *task) publish(now time.Time) {
	m := &metricValues{lastMet: t.state.LastMet, missed: t.state.Missed, deadline: t.nextDeadline(now)}
	if w := t.tracker.State.Window; !w.IsZero() && !now.Before(w.Deadline) && len(t.tracker.State.Had) == 0 {
		m.undecided = w.Deadline
	}
	if len(t.state.Outcomes) > 0 {
		m.last = t.state.Outcomes[0].Outcome
	}
	t.metrics.Store(m)
}

// nextDeadline is the first deadline after now; zero for none.
func (t *task) nextDeadline(now time.Time) time.Time {
	w := t.tracker.State.Window
	for range maxWindowsAhead {
		if w.IsZero() || now.Before(w.Deadline) {
			return w.Deadline
		}
		if t.tracker.Windows == nil {
			return time.Time{}
		}
		w = t.tracker.Windows.After(w.Opens)
	}
	return time.Time{}
}

// maxWindowsAhead bounds the windows nextDeadline walks past (those the
// tracker has yet to decide, a worker back after a long time).
const maxWindowsAhead = 1000

// windowOf is w as the API has it.
func windowOf(w calendar.Window) v1alpha1.ExpectationWindow {
	return v1alpha1.ExpectationWindow{Opens: seconds(w.Opens), Deadline: seconds(w.Deadline)}
}

// seconds is t as the API keeps it, to the second in UTC: an outcome
// says the same when first announced and when announced again from the
// stored state.
func seconds(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }
