package watches

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/tracing"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// watcher runs one watch: it polls, delivers and writes, then waits for
// the next poll, the next try of a delivery, or a change of the watch.
type watcher struct {
	r   *Runner
	uid types.UID
	key client.ObjectKey
	// place says whether the watch waits for a place: its namespace, or
	// the cluster, runs as many watches as it may, and this one is not
	// among the first.
	place tasks.Place
	// pendingCount is len(state.Outbox), for the metric.
	pendingCount atomic.Int64

	tracker watch.Tracker
	state   *watch.State // nil until loaded
	version statestore.Version
	dirty   bool
	// polledGeneration is the generation last polled (by this replica, or
	// by the one before as its status says); nextPoll when the next poll
	// is due; nextTry when the outbox's head may be tried again.
	polledGeneration  int64
	nextPoll, nextTry time.Time
	lastPoll          time.Time
	lastSave          time.Time
	lastStatus        time.Time
	// known is the generation this watcher last saw, and since when: a
	// generation not polled yet writes no status for firstPollQuiet.
	known struct {
		generation int64
		since      time.Time
	}
	// behind is a resourceVersion the cache must move past before the
	// next status write: the one the last write replaced, or one a write
	// found stale. A write from it would only conflict.
	behind  string
	lastErr string
	// overBudget says why the state was last refused, until it is stored.
	overBudget string
	// tracked is the files this watch counts in the replica's held files;
	// atCapacity says why it waits for room there.
	tracked    int
	atCapacity string
	// polled is what the last poll found wrong, for the generation it
	// polled: it holds until the next poll.
	polled struct {
		generation                    int64
		tooLarge, pathMissing, failed string
	}
	// failing says why the outbox's head waits, until it is delivered or
	// given up; unreachable that its sink did not answer.
	failing     string
	unreachable bool
	// sinkURI and deadLetterURI are the sinks resolved, for the status.
	sinkURI, deadLetterURI string
	// started is the id of the outbox's head once its Transfer is made;
	// atLimit says why it waits for the namespace's Transfers.
	started, atLimit string
}

// settings are a watch's spec, read and checked.
type settings struct {
	interval, minAge time.Duration
	filter           watch.Filter
	report           map[v1alpha1.WatchEvent]bool
	delivery         deliver.Settings
}

// Step polls, delivers and writes what is due; a watch's work never ends.
func (w *watcher) Step(ctx context.Context) (time.Duration, bool) { return w.step(ctx), false }

// Stop writes what the watcher holds, for the replica that takes the watch
// next, and forgets it.
func (w *watcher) Stop(ctx context.Context) {
	w.save(ctx, true)
	w.forget()
}

// idle is how long a watcher that cannot work waits before it looks again;
// settleEvery how often it looks for the end of the Transfers it made;
// shortest the least wait between two steps.
const (
	idle        = 10 * time.Second
	settleEvery = time.Second
	shortest    = 10 * time.Millisecond
)

// firstPollQuiet bounds how long a watch whose current generation waits
// for its first poll writes no status: a watch then starts with one status
// write (Watching) rather than two (FirstPoll, then Watching), and when a
// replica starts, most of a namespace's watches do wait for its polls.
// Past it the status says FirstPoll, so that a watch whose first poll does
// not come (its server never lists, or its namespace's polls are all held)
// is not hidden.
const firstPollQuiet = 30 * time.Second

// step does what is due and says how long until something else is.
func (w *watcher) step(ctx context.Context) (wait time.Duration) {
	var wt v1alpha1.SftpWatch
	if err := w.r.Cache.Get(ctx, w.key, &wt); err != nil || wt.UID != w.uid {
		return idle // gone: the next sync stops this watcher
	}
	now := time.Now()
	if wt.Generation != w.known.generation {
		w.known.generation, w.known.since = wt.Generation, now
		if w.polledGeneration == 0 && polledBefore(&wt) {
			// Taken over from a replica that polled this generation: its
			// state holds that poll, and saying FirstPoll until the next
			// would cost two status writes and an event for nothing.
			w.polledGeneration = wt.Generation
		}
	}
	f := facts{polled: w.polledGeneration == wt.Generation}
	defer func() {
		// A status not written yet is tried again when it may be, not at
		// the next poll.
		if again := w.report(ctx, &wt, f); !again.IsZero() {
			wait = max(min(wait, time.Until(again)), shortest)
		}
	}()
	set, err := readSettings(ctx, w.r.Client, &wt)
	switch {
	case err != nil:
		f.invalid = err.Error()
		return time.Minute
	case w.place.Get() != tasks.Runs:
		f.overQuota = w.r.overQuota(w.place.Get())
		return time.Minute
	}
	conn, why := ends.Get(ctx, w.r.Cache, wt.Namespace, wt.Spec.ConnectionRef)
	if why != "" {
		f.connection = why
		return idle
	}
	sink := ""
	if wt.Spec.Sink != nil {
		if sink, err = deliver.Resolve(ctx, w.r.Client, wt.Namespace, *wt.Spec.Sink); err != nil {
			f.sink = err.Error()
			return idle
		}
	}
	w.sinkURI = sink
	deadLetter := ""
	if dls := wt.Spec.Delivery.DeadLetterSink; dls != nil && sink != "" {
		if deadLetter, err = deliver.Resolve(ctx, w.r.Client, wt.Namespace, *dls); err != nil {
			f.sink = "the dead-letter sink: " + err.Error()
			return idle
		}
	}
	w.deadLetterURI = deadLetter
	if err := w.load(ctx, &wt, conn, set); errors.Is(err, errAtCapacity) {
		f.atCapacity = w.atCapacity
		return idle
	} else if err != nil {
		f.pollFailed = "reading the watch's stored state: " + err.Error()
		return idle
	}
	// A state the namespace's budget refused grows no more: no poll
	// until it is stored.
	if !now.Before(w.nextPoll) && w.overBudget == "" {
		// The next poll is an interval away, unless this one found the
		// namespace's polls all in flight and set it a second away.
		w.nextPoll = now.Add(set.interval)
		w.lastPolled(&f, wt.Generation) // for a status written while it lists
		w.poll(ctx, &wt, conn, set, f)
		w.retryAfter(ctx, &wt, conn)
	}
	w.lastPolled(&f, wt.Generation)
	w.settle(ctx, &wt, conn)
	w.deliver(ctx, &wt, conn, set, sink, deadLetter, &f)
	f.delivery, f.unreachable, f.transfersAtLimit = w.failing, w.unreachable, w.atLimit
	w.save(ctx, false)
	f.overBudget, f.atCapacity = w.overBudget, w.atCapacity
	switch {
	case w.state == nil:
		return time.Second // another replica stored a newer state: read it first
	case w.overBudget != "":
		return idle // no poll until the state is stored (save tries again)
	}
	wait = time.Until(w.nextPoll)
	if len(w.state.Outbox) > 0 && f.sinkDenied == "" {
		wait = min(wait, time.Until(w.nextTry))
	}
	if w.dirty {
		wait = min(wait, time.Until(w.lastSave.Add(w.r.Limits.WriteEvery)))
	}
	if len(w.state.Running) > 0 {
		// A Transfer's end is looked for in the cache: no request.
		wait = min(wait, settleEvery)
	}
	return max(wait, shortest)
}

// lastPolled sets f from the last poll of generation: whether there was
// one, and what it found wrong, which holds until the next poll ends.
func (w *watcher) lastPolled(f *facts, generation int64) {
	f.polled = w.polledGeneration == generation
	if p := w.polled; p.generation == generation {
		f.tooLarge, f.pathMissing, f.pollFailed = p.tooLarge, p.pathMissing, p.failed
	}
}

// readSettings reads and checks what the API server's validation could
// not: globs, durations, the signing Secret.
func readSettings(ctx context.Context, c client.Reader, wt *v1alpha1.SftpWatch) (settings, error) {
	s := settings{interval: 30 * time.Second, minAge: 10 * time.Second,
		filter: watch.Filter{Include: wt.Spec.Include, Exclude: wt.Spec.Exclude}, report: map[v1alpha1.WatchEvent]bool{}}
	if d := wt.Spec.PollInterval; d != nil && d.Duration >= 5*time.Second {
		s.interval = d.Duration
	}
	if d := wt.Spec.Stability.MinAge; d != nil && d.Duration >= 0 {
		s.minAge = d.Duration
	}
	if err := s.filter.Check(); err != nil {
		return s, err
	}
	events := wt.Spec.Events
	if len(events) == 0 {
		events = []v1alpha1.WatchEvent{v1alpha1.WatchCreated}
	}
	for _, e := range events {
		s.report[e] = true
	}
	var err error
	if s.delivery, err = deliver.ReadSettings(ctx, c, wt.Namespace, wt.Spec.Delivery, wt.Spec.SigningSecretRef); err != nil {
		return s, err
	}
	if tr := wt.Spec.Transfer; tr != nil && tr.Destination.ConnectionRef == wt.Spec.ConnectionRef && inside(tr.Destination.Path, wt.Spec.Path) {
		return s, fmt.Errorf("transfer: its destination %s is inside the watched folder %s, where what it writes would be reported again", tr.Destination.Path, wt.Spec.Path)
	}
	a := wt.Spec.AfterDelivery
	for _, folder := range []string{a.MoveTo, a.FailedTo} {
		if folder != "" && inside(folder, wt.Spec.Path) {
			return s, fmt.Errorf("afterDelivery: %s is inside the watched folder %s, where a moved file would be reported again", folder, wt.Spec.Path)
		}
	}
	return s, nil
}

// inside reports whether folder is dir or below it.
func inside(folder, dir string) bool {
	folder, dir = path.Clean(folder), path.Clean(dir)
	return folder == dir || strings.HasPrefix(folder, strings.TrimSuffix(dir, "/")+"/")
}

// specKey identifies what the listing depends on: the connection by its
// kind and name, its root, and the watch's path, depth and globs. Not
// the connection's UID: one deleted and made again under its name (a
// kubectl replace --force, an Argo CD Replace) names the same folder, and
// a watch that started over there would take what had landed meanwhile
// as its starting point, never reporting it.
func specKey(wt *v1alpha1.SftpWatch, conn *ends.End) string {
	return keyOf(conn.Ref.String(), conn, wt)
}

// sameFolder says whether a state stored under key lists what wt and conn
// name now: key is specKey's, or the key the releases before stored for
// the same connection object, with its UID in place of its name (taken
// as the same, so that upgrading starts no watch over).
func sameFolder(key string, wt *v1alpha1.SftpWatch, conn *ends.End) bool {
	return key == specKey(wt, conn) || key == keyOf(string(conn.UID), conn, wt)
}

func keyOf(connection string, conn *ends.End, wt *v1alpha1.SftpWatch) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%t\x00%d\x00%q\x00%q", connection, conn.Root,
		wt.Spec.Path, wt.Spec.Recursive, wt.Spec.MaxDepth, wt.Spec.Include, wt.Spec.Exclude))
	return hex.EncodeToString(sum[:8])
}

// load reads the stored state once, and starts over when what the
// listing depends on changed; it sets the tracker from the spec.
func (w *watcher) load(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, set settings) error {
	key := specKey(wt, conn)
	if w.state == nil {
		blob, v, err := w.r.States.Load(ctx, string(w.uid))
		if err != nil {
			return err
		}
		state := &watch.State{}
		if blob != nil {
			s, err := watch.DecodeState(blob)
			if err != nil {
				w.r.log().Warn("a watch's stored state cannot be read; starting over", "namespace", wt.Namespace, "name", wt.Name, "error", err)
			} else {
				state = s
			}
		}
		if !w.roomFor(len(state.Seen)) {
			return errAtCapacity
		}
		w.version, w.state = v, state
		w.tracker.Restore(w.state.Seen)
		w.pendingCount.Store(int64(len(w.state.Outbox)))
	}
	if w.state.SpecKey != key {
		if !sameFolder(w.state.SpecKey, wt, conn) {
			// Another folder, or other files: what was seen says nothing
			// of it. What waits to be delivered still goes.
			w.state.Seen = nil
			w.forget()
		}
		// Not written for the key alone: the state stored under the old
		// one says the same to a replica that reads it (which drops what
		// was seen of another folder, as here), and a new watch's first
		// write is then its first poll's, not an empty state before it.
		w.state.SpecKey = key
	}
	w.tracker.MinAge, w.tracker.Report = set.minAge, set.report
	w.tracker.EmitExisting = wt.Spec.InitialState == v1alpha1.InitialEmitExisting
	return nil
}

// poll lists the folder and queues the changes due; f is what the step
// found before it, for a status written while the listing runs.
func (w *watcher) poll(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, set settings, f facts) {
	ctx, span := tracing.Tracer().Start(ctx, "poll", trace.WithAttributes(attribute.String("sftpgate.namespace", wt.Namespace),
		attribute.String("sftpgate.watch", wt.Name), attribute.String("sftpgate.connection", conn.Ref.String())))
	defer span.End()
	// A wait for the replica's poll slots counts in the first poll's
	// quiet time too: past it the status says FirstPoll.
	var quiet time.Time
	if !f.polled && time.Now().Before(w.quietEnds()) {
		quiet = w.quietEnds()
	}
	leave, ok := w.r.enterPoll(ctx, wt.Namespace, quiet, func() { w.report(ctx, wt, f) })
	if !ok {
		w.nextPoll = time.Now().Add(time.Second)
		return
	}
	defer leave()
	start := time.Now()
	walk := watch.Walk{Dir: path.Join(conn.Root, wt.Spec.Path), Filter: set.filter, MaxFiles: w.r.Limits.MaxFiles}
	if wt.Spec.Recursive {
		walk.Depth = int(max(wt.Spec.MaxDepth, 1))
	}
	var found []watch.File
	// A listing takes many requests, each bounded by the connection's
	// operationTimeout; the whole by the worker's PollTimeout, which
	// bounds how long a poll holds its slot.
	op := pool.Op{Idempotent: true, Timeout: min(5*conn.OperationTimeout, w.r.Limits.PollTimeout)}
	err := w.meanwhile(ctx, wt, f, func() error {
		return w.do(ctx, conn, op, func(f files.FS, _ func()) error {
			var err error
			found, err = walk.List(ctx, f)
			return err
		})
	})
	w.r.Metrics.PollDuration.Observe(time.Since(start).Seconds())
	var tooMany *watch.ErrTooManyFiles
	var tooLarge *files.TooLargeError
	result := "ok"
	p := &w.polled
	p.generation, p.tooLarge, p.pathMissing, p.failed = wt.Generation, "", "", ""
	switch {
	case err == nil:
	case errors.As(err, &tooMany), errors.As(err, &tooLarge):
		p.tooLarge, result = err.Error(), v1alpha1.ReasonDirectoryTooLarge
	case errors.Is(err, fs.ErrNotExist):
		p.pathMissing, result = fmt.Sprintf("%s is not a folder on the server", wt.Spec.Path), v1alpha1.ReasonPathNotFound
	default:
		p.failed, result = "polling the folder: "+err.Error(), "Failed"
	}
	w.r.Metrics.Polls.WithLabelValues(result).Inc()
	if err != nil {
		w.lastErr = err.Error()
		return
	}
	if !w.roomFor(len(found)) {
		return // the files stay on the server for a later poll
	}
	now := time.Now()
	room := w.r.Limits.MaxPending - len(w.state.Outbox)
	for _, e := range w.tracker.Poll(now, found, room) {
		w.state.Outbox = append(w.state.Outbox, watch.Pending{Event: e, ID: EventID(w.uid, e), Observed: now})
	}
	if w.tracker.TakeChanged() {
		w.state.Seen = w.tracker.Seen()
		w.dirty = true
	}
	w.pendingCount.Store(int64(len(w.state.Outbox)))
	w.lastPoll, w.polledGeneration = now, wt.Generation
	if at, ok := w.tracker.Recheck(now); ok && at.Before(w.nextPoll) {
		w.nextPoll = at
	}
}

// quietEnds is when the status of a generation that waits for its first
// poll is written.
func (w *watcher) quietEnds() time.Time { return w.known.since.Add(firstPollQuiet) }

// meanwhile runs list. When it is the first poll of the watch's
// generation and outlasts firstPollQuiet, the status is written when that
// ends, with list still running on a goroutine of its own (it touches
// nothing of the watcher's): a listing that hangs does not hide the watch.
func (w *watcher) meanwhile(ctx context.Context, wt *v1alpha1.SftpWatch, f facts, list func() error) error {
	quiet := w.quietEnds()
	if f.polled || !time.Now().Before(quiet) {
		return list() // the status says what it waits for already
	}
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err }()
		defer recovery.Error(w.r.Log, &err, "a watch's poll")
		err = list()
	}()
	ends := time.NewTimer(time.Until(quiet))
	defer ends.Stop()
	select {
	case err := <-done:
		return err
	case <-ends.C:
		w.report(ctx, wt, f)
		return <-done
	}
}

// errAtCapacity is a watch that waits for room among the files its
// replica may track.
var errAtCapacity = errors.New("the replica tracks as many files as it may")

// roomFor takes room for the watch to track n files among the replica's
// held files, or says why it waits (atCapacity).
func (w *watcher) roomFor(n int) bool {
	if w.r.held.resize(&w.tracked, w.key.Namespace, n) {
		w.atCapacity = ""
		return true
	}
	w.atCapacity = fmt.Sprintf("this worker replica's watches track as many files as they may (%d in all, --max-held-files; %d of one namespace's, --max-held-files-per-namespace); the watch, of %d files, waits for room",
		w.r.Limits.MaxHeldFiles, w.r.Limits.MaxHeldFilesPerNamespace, n)
	return false
}

// forget drops the files the watch tracks, and their count.
func (w *watcher) forget() {
	w.tracker.Restore(nil)
	w.r.held.resize(&w.tracked, w.key.Namespace, 0)
}

// do runs fn on conn's files; a listing streams, on a session of its own.
func (w *watcher) do(ctx context.Context, conn *ends.End, op pool.Op, fn func(files.FS, func()) error) error {
	op.Stream = true
	return w.r.Ends.Do(ctx, conn, op, fn)
}

// deliver sends the outbox's events in order, while this replica holds the
// watch, until one fails or the namespace's share of deliveries is spent.
func (w *watcher) deliver(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, set settings, sink, deadLetter string, f *facts) {
	defer func() { w.pendingCount.Store(int64(len(w.state.Outbox))) }()
	for len(w.state.Outbox) > 0 && ctx.Err() == nil {
		if !w.r.Shard.Holds(string(w.uid)) || time.Now().Before(w.nextTry) {
			return
		}
		if ok, after := w.r.events.Allow(wt.Namespace); !ok {
			w.nextTry = time.Now().Add(after)
			return
		}
		head := &w.state.Outbox[0]
		if wt.Spec.Transfer != nil && head.Type != v1alpha1.WatchDeleted && w.started != head.ID {
			why, atLimit := w.start(ctx, wt, *head)
			if why != "" {
				w.failing, w.atLimit, w.unreachable = why, "", false
				if atLimit {
					w.failing, w.atLimit = "", why
				}
				w.nextTry = time.Now().Add(idle)
				return
			}
			w.started = head.ID
		}
		if sink == "" {
			w.finish(ctx, wt, conn, *head, true)
			continue
		}
		ce, err := CloudEvent(wt, conn, *head)
		if err != nil {
			w.r.log().Error("making an event", "error", err)
			return
		}
		res := w.r.Sender.Try(ctx, w.key.Namespace, deliver.Targets{Sink: sink, DeadLetter: deadLetter}, ce, set.delivery, head.Attempts)
		if res.Verdict == deliver.Denied {
			f.sinkDenied = "the sink's address is one the worker may not reach: " + res.Err.Error()
			w.lastErr = f.sinkDenied
			return
		}
		if res.Attempts > head.Attempts {
			w.state.Failed += int64(res.Attempts - head.Attempts)
			head.Attempts, w.dirty = res.Attempts, true
			w.lastErr = res.Err.Error()
		}
		switch res.Verdict {
		case deliver.Delivered:
			w.r.Metrics.DeliveryLatency.Observe(time.Since(head.Observed).Seconds())
			w.state.Delivered++
		case deliver.DeadLettered:
			w.state.DeadLettered++
		}
		if res.Ended() {
			w.finish(ctx, wt, conn, *head, res.Verdict == deliver.Delivered)
			continue
		}
		w.failing, w.unreachable = res.Err.Error(), res.Unreachable
		w.nextTry = res.RetryAt
		return
	}
	w.nextTry = time.Time{}
	w.failing, w.unreachable, w.atLimit = "", false, ""
}

// finish takes the outbox's head, p, out after its event was delivered (ok)
// or given up: what afterDelivery says is done with its file now, or once
// its Transfer finished.
func (w *watcher) finish(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, p watch.Pending, ok bool) {
	w.state.Outbox = w.state.Outbox[1:]
	w.nextTry = time.Time{}
	w.failing, w.unreachable, w.atLimit = "", false, ""
	w.dirty = true
	if w.started == p.ID {
		w.state.Running = append(w.state.Running, watch.Running{Event: p.Event, ID: p.ID, Made: time.Now(), Failed: !ok})
		return
	}
	w.after(ctx, wt, conn, p.Event, ok)
}

// after does what afterDelivery says with e's file: ok, its event was
// delivered (and its transfer succeeded). One that fails is kept, to be
// tried again at each poll (retryAfter), within MaxPending.
func (w *watcher) after(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, p watch.Event, ok bool) {
	if w.afterAction(ctx, wt, conn, p, ok) == nil {
		return
	}
	if len(w.state.Unsettled) >= w.r.Limits.MaxPending {
		w.lastErr = fmt.Sprintf("after delivering the event of %s: not tried again, %d files' afterDelivery wait already", p.Path, len(w.state.Unsettled))
		return
	}
	w.state.Unsettled = append(w.state.Unsettled, watch.Unsettled{Event: p, OK: ok})
	w.dirty = true
}

// retryAfter tries again the afterDelivery actions that failed.
func (w *watcher) retryAfter(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End) {
	if w.state == nil {
		return
	}
	kept := w.state.Unsettled[:0]
	for _, u := range w.state.Unsettled {
		if w.afterAction(ctx, wt, conn, u.Event, u.OK) != nil {
			kept = append(kept, u)
		}
	}
	if len(kept) != len(w.state.Unsettled) {
		clear(w.state.Unsettled[len(kept):])
		w.state.Unsettled = kept
		w.dirty = true
	}
}

// afterAction does what afterDelivery says with p's file, and says
// whether it failed.
func (w *watcher) afterAction(ctx context.Context, wt *v1alpha1.SftpWatch, conn *ends.End, p watch.Event, ok bool) error {
	if p.Type == v1alpha1.WatchDeleted {
		return nil
	}
	a := wt.Spec.AfterDelivery
	to := ""
	switch {
	case !ok:
		to = a.FailedTo
	case a.Action == v1alpha1.AfterDeliveryMove:
		to = a.MoveTo
	case a.Action != v1alpha1.AfterDeliveryDelete:
		return nil
	}
	if !ok && to == "" {
		return nil
	}
	root := conn.Root
	from := path.Join(root, wt.Spec.Path, p.Path)
	record := audit.Record{Action: "watch.delete", Actor: audit.Actor{Kind: audit.ActorWatch, Name: wt.Name}, Namespace: wt.Namespace,
		Connection: conn.Ref.String(), Paths: []string{path.Join(wt.Spec.Path, p.Path)}}
	err := w.do(ctx, conn, pool.Op{Timeout: conn.OperationTimeout}, func(f files.FS, _ func()) error {
		if to == "" {
			return f.Remove(from)
		}
		dest := path.Join(root, to, p.Path)
		record.Action, record.Paths = "watch.move", append(record.Paths[:1], path.Join(to, p.Path))
		if err := f.MkdirAll(path.Dir(dest)); err != nil {
			return err
		}
		// Never over a file already there: beside it, under a new name.
		if _, err := f.Lstat(dest); err == nil {
			dest = path.Join(path.Dir(dest), strings.TrimPrefix(tempname.In(""), "/")+"-"+path.Base(dest))
			record.Paths[1] = path.Join(path.Dir(record.Paths[1]), path.Base(dest))
		}
		return f.Rename(from, dest)
	})
	record.Result = audit.ResultOf(err)
	w.r.Audit.Record(ctx, record)
	switch {
	case errors.Is(err, fs.ErrNotExist) && wt.Spec.Transfer != nil:
		// Moved by its Transfer (mode Move), or by someone else.
	case errors.Is(err, fs.ErrNotExist):
		// Gone meanwhile: nothing left to do with it.
		return nil
	case err != nil:
		w.lastErr = fmt.Sprintf("after delivering the event of %s: %v", p.Path, err)
		return err
	}
	// Its going is no event: the watch moved it.
	w.tracker.Forget(p.Path)
	w.state.Seen = w.tracker.Seen()
	return nil
}

// save writes the state when it changed, at most once per WriteEvery
// unless now.
func (w *watcher) save(ctx context.Context, now bool) {
	if w.state == nil || !w.dirty || !now && time.Since(w.lastSave) < w.r.Limits.WriteEvery {
		return
	}
	if !w.r.Shard.Holds(string(w.uid)) && !now {
		return
	}
	blob, err := w.state.Encode()
	if err == nil {
		err = w.r.States.Save(ctx, string(w.uid), w.key.Namespace, blob, &w.version)
	}
	switch {
	case errors.Is(err, statestore.ErrConflict):
		// Another replica took the watch: what it holds is newer.
		w.state, w.dirty = nil, false
		w.forget()
		return
	case errors.Is(err, statestore.ErrTooLarge):
		w.lastErr = "the watch's state is larger than it may be stored: " + err.Error()
	case errors.As(err, new(*storedbytes.ExceededError)):
		w.overBudget, w.lastSave = err.Error(), time.Now()
		return
	case err != nil:
		w.lastErr = "storing the watch's state: " + err.Error()
		return
	}
	w.dirty, w.lastSave, w.overBudget = false, time.Now(), ""
}

// report writes the watch's status when it changed, at most once per
// WriteEvery unless its conditions did, and records an event when its
// Ready reason changes; nothing while the generation only waits for its
// first poll, for firstPollQuiet. It says when to try again a status not
// written (zero: written, or nothing to write).
func (w *watcher) report(ctx context.Context, wt *v1alpha1.SftpWatch, f facts) (again time.Time) {
	next := wt.DeepCopy()
	setConditions(next, f)
	if quiet := w.quietEnds(); waitsForFirstPoll(next) && time.Now().Before(quiet) {
		return quiet
	}
	st := &next.Status
	st.Worker = w.r.Shard.Identity
	st.SinkURI, st.DeadLetterSinkURI = w.sinkURI, w.deadLetterURI
	if !w.lastPoll.IsZero() {
		st.LastPollTime = &metav1.Time{Time: w.lastPoll.Truncate(time.Second)}
	}
	if w.state != nil {
		st.Files, st.Pending = int32(min(len(w.state.Seen), 1<<30)), int32(min(len(w.state.Outbox), 1<<30))
		st.Delivered, st.Failed, st.DeadLettered = w.state.Delivered, w.state.Failed, w.state.DeadLettered
		st.Transfers = v1alpha1.WatchTransferCounts{Started: w.state.Started, Running: int32(min(len(w.state.Running), 1<<30)),
			Succeeded: w.state.Succeeded, Failed: w.state.TransfersFailed, Last: w.state.LastTransfer}
	}
	st.LastError = statuspatch.Cut(w.lastErr, 1024)
	// A poll that found nothing new writes nothing but its time: that
	// alone is written at most every pollTimeEvery, so that the writes of
	// watches at rest do not grow with their polls.
	if was := wt.Status.LastPollTime; was != nil && st.LastPollTime != nil && st.LastPollTime.Sub(was.Time) < w.pollTimeEvery() {
		polled := st.LastPollTime
		st.LastPollTime = was
		if !reflect.DeepEqual(next.Status, wt.Status) {
			st.LastPollTime = polled
		}
	}
	if reflect.DeepEqual(next.Status, wt.Status) {
		return time.Time{}
	}
	conditionsChanged := !reflect.DeepEqual(next.Status.Conditions, wt.Status.Conditions)
	if wt.ResourceVersion == w.behind || !conditionsChanged && time.Since(w.lastStatus) < w.r.Limits.WriteEvery {
		// The cache has not caught up with the server yet, or this
		// watcher wrote a moment ago.
		return time.Now().Add(w.r.Limits.WriteEvery)
	}
	// Only onto the object read: a watch deleted and made again under its
	// name is another's to report on.
	if _, err := w.r.status.Patch(ctx, wt, next); err != nil {
		switch {
		case apierrors.IsConflict(err):
			// Written since by another replica, or by a write of ours whose
			// answer was lost: wait for the cache to show it.
			w.behind = wt.ResourceVersion
		case !apierrors.IsNotFound(err):
			w.r.log().Info("writing a watch's status", "namespace", wt.Namespace, "name", wt.Name, "error", err)
		}
		return time.Now().Add(w.r.Limits.WriteEvery)
	}
	w.lastStatus, w.behind = time.Now(), wt.ResourceVersion
	return time.Time{}
}

// pollTimeEvery is the least time between two writes of this watch's
// lastPollTime alone: Limits.PollTimeEvery less up to half of it, by the
// watch's UID, so that watches started together (as a replica starts, or
// takes a failed one's over) do not write together ever after.
func (w *watcher) pollTimeEvery() time.Duration {
	every := w.r.Limits.PollTimeEvery
	h := fnv.New64a()
	_, _ = h.Write([]byte(w.uid))
	return every - time.Duration(h.Sum64()%uint64(every/2+1)) //nolint:gosec // every/2+1 is positive, the rest below it
}
