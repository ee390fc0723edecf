package transfers

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/tracing"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/statestore"
	"github.com/sftpgate/sftpgate/worker/tasks"
	"github.com/sftpgate/sftpgate/worker/transfer"
)

// run runs one transfer: it lists the source into a plan (or loads the
// plan an earlier run stored), copies the files, then reports the end.
type run struct {
	r      *Runner
	uid    types.UID
	key    client.ObjectKey
	cancel func()
	// place says whether the transfer waits for a place: its namespace, or
	// the web UI accounts, run as many transfers as they may, and this one
	// is not among the oldest.
	place tasks.Place

	// mu guards plan, dirty and the fields below it while files are
	// copied.
	mu      sync.Mutex
	plan    *transfer.Plan // nil until listed or loaded
	version statestore.Version
	// resumed: the plan was stored by an earlier run.
	resumed bool
	dirty   bool
	// moving is the bytes written of the files under way.
	moving map[int]*atomic.Int64
	// cut is the files whose try a failed session cut off: they may
	// have left a partial copy, though their tries did not count.
	cut      map[int]bool
	retrying string
	lastErr  string
	// overBudget says why the plan was last refused, until it is stored;
	// unstored is that plan, kept to be stored as it is.
	overBudget string
	unstored   *transfer.Plan

	lastSave, lastStatus time.Time
	// behind is a resourceVersion the cache must move past before the
	// next status write: the one the last write replaced, or one a write
	// found stale. A write from it would only conflict.
	behind string
	// rateBytes and rateAt are the bytes done at the last status write.
	rateBytes int64
	rateAt    time.Time
	rate      int64
	made      transfer.Folders
	// nextEvent is when the finishing event is tried again.
	nextEvent time.Time
	// transform is what the files go through (spec.openPGP), its keys
	// read once per run.
	transform transfer.Transform
}

// idle is how long a run that cannot work waits before it looks again.
const idle = 10 * time.Second

// Step does what the transfer needs now (see step).
func (t *run) Step(ctx context.Context) (time.Duration, bool) { return t.step(ctx) }

// Stop stores the plan as it stands, for the replica that takes the
// transfer next.
func (t *run) Stop(ctx context.Context) { t.save(ctx, true) }

// step does what the transfer needs now: it returns when every file ended
// and the end is reported (ended), or when it must wait.
func (t *run) step(ctx context.Context) (wait time.Duration, ended bool) {
	var tr v1alpha1.Transfer
	if err := t.r.Cache.Get(ctx, t.key, &tr); err != nil || tr.UID != t.uid {
		return idle, false // gone: the next sync stops this run
	}
	if tr.Finished() {
		return 0, true
	}
	f := facts{}
	if w := t.place.Get(); w != tasks.Runs {
		t.r.waiting(w, &f)
		t.report(ctx, f)
		return idle, false
	}
	src, dst, why := t.connections(ctx, &tr)
	if why != "" {
		f.connection = why
		t.report(ctx, f)
		return idle, false
	}
	if t.plan == nil {
		// The destination's session is dialled while the source is
		// listed.
		go t.r.Ends.Warm(ctx, dst)
		if wait, ok := t.load(ctx, &tr, src); !ok {
			t.report(ctx, t.facts())
			return wait, false
		}
	}
	if t.plan.Outcome == "" && tr.Spec.OpenPGP != nil && t.transform == nil {
		if t.transform, f.keys = transformOf(ctx, t.r.Client, &tr); f.keys != "" {
			t.report(ctx, f)
			return idle, false
		}
	}
	if t.plan.Outcome == "" {
		t.copyAll(ctx, &tr, src, dst)
		if ctx.Err() != nil {
			return 0, false
		}
		t.mu.Lock()
		if t.plan.Finished() {
			t.plan.Outcome, t.plan.Message = outcome(t.plan)
			t.dirty = true
		}
		t.mu.Unlock()
	}
	// Each step stores what the last could not (the API server was away):
	// an end that is never stored would never be reported.
	t.save(ctx, true)
	if t.plan.Outcome == "" || t.dirty {
		// Not finished, or its end not stored yet: the end is sent only
		// once another replica would come to the same one.
		t.report(ctx, t.facts())
		return time.Second, false
	}
	return t.finish(ctx, &tr)
}

// connections reads the transfer's two ends; why says why one cannot be
// used now.
func (t *run) connections(ctx context.Context, tr *v1alpha1.Transfer) (src, dst *ends.End, why string) {
	if src, why = ends.Get(ctx, t.r.Cache, tr.Namespace, tr.Spec.Source.ConnectionRef); why != "" {
		return nil, nil, why
	}
	if dst, why = ends.Get(ctx, t.r.Cache, tr.Namespace, tr.Spec.Destination.ConnectionRef); why != "" {
		return nil, nil, why
	}
	return src, dst, ""
}

// load reads the plan an earlier run stored, or lists the source and
// stores the plan before any file is copied.
func (t *run) load(ctx context.Context, tr *v1alpha1.Transfer, src *ends.End) (time.Duration, bool) {
	blob, v, err := t.r.States.Load(ctx, string(t.uid))
	if err != nil {
		t.retrying = "reading the transfer's plan: " + err.Error()
		return idle, false
	}
	if blob != nil {
		p, err := transfer.DecodePlan(blob)
		if err != nil {
			t.retrying = err.Error()
			return idle, false
		}
		t.plan, t.version, t.resumed = p, v, true
		return 0, true
	}
	// A plan listed before but not stored (the namespace's budget
	// refused it) is stored as it was: its files are checked as they are
	// copied.
	p := t.unstored
	if p == nil {
		err = t.r.Ends.Do(ctx, src, pool.Op{Idempotent: true, Stream: true, Timeout: t.r.Limits.StallTimeout}, func(f files.FS, _ func()) error {
			var err error
			p, err = transfer.List(ctx, f, src.Root, tr.Spec.Source, t.r.Limits.MaxFiles)
			return err
		})
	}
	var typed *transfer.Error
	switch {
	case errors.As(err, &typed) && typed.Permanent:
		p = &transfer.Plan{Outcome: typed.Reason, Message: typed.Error()}
	case err != nil:
		t.retrying = "listing the source: " + err.Error()
		return idle, false
	}
	t.plan, t.version, t.dirty, t.retrying = p, v, true, ""
	t.save(ctx, true)
	if t.dirty {
		// Not stored: no file is copied before it is.
		t.plan, t.unstored = nil, p
		return idle, false
	}
	t.unstored = nil
	return 0, true
}

// settings are a transfer's retry policy, read.
func retryOf(tr *v1alpha1.Transfer) (limit int32, backoff time.Duration) {
	limit, backoff = 3, 10*time.Second
	if l := tr.Spec.Retry.Limit; l != nil {
		limit = *l
	}
	if b := tr.Spec.Retry.Backoff; b != nil && b.Duration > 0 {
		backoff = b.Duration
	}
	return limit, backoff
}

// copyAll copies the plan's waiting files, a few at a time, until every
// one ended or ctx ends; it stores the plan and writes the status as it
// goes.
func (t *run) copyAll(ctx context.Context, tr *v1alpha1.Transfer, src, dst *ends.End) {
	q := newQueue()
	t.mu.Lock()
	for i := range t.plan.Files {
		if t.plan.Files[i].State == transfer.Waiting {
			q.ready = append(q.ready, i)
		}
	}
	t.moving, t.cut = map[int]*atomic.Int64{}, map[int]bool{}
	t.mu.Unlock()
	if len(q.ready) == 0 {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ticker := make(chan struct{})
	go func() {
		defer close(ticker)
		tick := time.NewTicker(t.r.Limits.WriteEvery)
		defer tick.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-tick.C:
				// Not cut by the end of the copies: a save the API
				// server took but the worker did not hear of would
				// make the next one conflict.
				t.save(context.WithoutCancel(cctx), false)
				t.report(cctx, t.facts())
			}
		}
	}()
	workers := min(int(max(tr.Spec.Parallelism, 1)), t.r.Limits.StreamsPerNamespace)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i, ok := q.next(cctx)
				if !ok {
					return
				}
				leave, ok := t.r.enterStream(cctx, tr.Namespace, true)
				if !ok {
					q.end(i, nil)
					return
				}
				t.copyOnStream(cctx, tr, src, dst, q, i)
				leave()
			}
		})
	}
	wg.Wait()
	cancel()
	<-ticker
}

// smallPerStream is how many small files one stream copies at once.
const smallPerStream = 4

// copyOnStream copies file i, taken from q, on a stream of the
// namespace's share. A small file's stream carries more small files ready
// now, up to smallPerStream (and the transfer's parallelism) at once:
// their requests go on the same sessions, in flight together, so that
// over a long link one file's round trips overlap with the others'. The
// stream is given back once they all ended, so that other transfers and
// tenants waiting for one get their turns as before.
func (t *run) copyOnStream(ctx context.Context, tr *v1alpha1.Transfer, src, dst *ends.End, q *queue, i int) {
	small := func(i int) bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.plan.Files[i].Size <= transfer.SmallFile
	}
	batch := []int{i}
	if small(i) {
		for len(batch) < min(smallPerStream, int(max(tr.Spec.Parallelism, 1))) {
			j, ok := q.take(small)
			if !ok {
				break
			}
			batch = append(batch, j)
		}
	}
	var files sync.WaitGroup
	for _, i := range batch {
		files.Go(func() { q.end(i, t.copyOne(ctx, tr, src, dst, i)) })
	}
	files.Wait()
}

// sessions runs fn on a session of src's server and one of dst's (abort
// closes both); on one session when they are the same server, since two
// waits on one pool could hold each other up.
func (t *run) sessions(src, dst *ends.End, op pool.Op) func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
	return func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
		if src.UID == dst.UID {
			return t.r.Ends.Do(ctx, src, op, func(f files.FS, abort func()) error { return fn(f, f, abort) })
		}
		return t.r.Ends.Do(ctx, src, op, func(sf files.FS, abortSrc func()) error {
			return t.r.Ends.Do(ctx, dst, op, func(df files.FS, abortDst func()) error {
				return fn(sf, df, func() { abortSrc(); abortDst() })
			})
		})
	}
}

// copyOne copies file i, and records how it ended; it returns when to try
// it again, or nil.
func (t *run) copyOne(ctx context.Context, tr *v1alpha1.Transfer, src, dst *ends.End, i int) *time.Time {
	t.mu.Lock()
	f := t.plan.Files[i]
	target := t.plan.Target(&f)
	renamed := tr.Spec.TargetName(path.Base(target))
	target = path.Join(path.Dir(target), renamed)
	moving := &atomic.Int64{}
	t.moving[i] = moving
	resumed, fresh := t.resumed, !t.resumed && f.Tries == 0 && !t.cut[i]
	t.mu.Unlock()
	job := transfer.Job{
		Src: path.Join(src.Root, f.Path), Dst: path.Join(dst.Root, tr.Spec.Destination.Path, target),
		Size: f.Size, ModTime: f.ModTime,
		Seed: string(t.uid) + "\x00" + f.Path, Overwrite: tr.Spec.Overwrite, Verify: tr.Spec.Verify,
		Move: tr.Spec.Mode == v1alpha1.TransferMove, Resumed: resumed, Fresh: fresh,
		Progress: func(n int64) { moving.Add(n); t.r.Metrics.TransferBytes.Add(float64(n)) },
		Kept:     func(n int64) { moving.Add(n) },
		Stall:    t.r.Limits.StallTimeout, Made: &t.made,
		Held:      func() bool { return t.r.Shard.Holds(string(t.uid)) },
		Transform: t.transform,
		Upload:    f.Upload,
		Uploading: func(id string) {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.plan.Files[i].Upload, t.dirty = id, true
		},
		Ranges: rangesTo(dst, t.r.Limits.RangesPerFile),
		Done:   slices.Clone(f.Ranges),
		RangeDone: func(done []int64) {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.plan.Files[i].Ranges, t.dirty = done, true
		},
	}
	// A large file has sessions of its own, as the gateway's streams do;
	// small ones share them, their requests sent and answered together.
	op := pool.Op{Stream: f.Size > transfer.SmallFile}
	var res transfer.Result
	var err error
	ctx, span := tracing.Tracer().Start(ctx, "copy", tracing.LinkTo(tr.Annotations[v1alpha1.AnnotationTraceParent]),
		trace.WithAttributes(attribute.String("sftpgate.namespace", tr.Namespace), attribute.String("sftpgate.transfer", tr.Name),
			attribute.Int("sftpgate.file", i), attribute.Int64("sftpgate.file.size", f.Size)))
	defer func() {
		span.SetAttributes(attribute.Int64("sftpgate.file.resumed_from", res.From), attribute.Int64("sftpgate.file.written", res.Sent))
		var typed *transfer.Error
		switch {
		case errors.As(err, &typed):
			span.SetStatus(codes.Error, typed.Reason)
		case err != nil:
			span.SetStatus(codes.Error, "a server failed")
		}
		span.End()
	}()
	switch {
	case renamed == "." || renamed == "..":
		err = &transfer.Error{Reason: v1alpha1.ReasonInvalidSpec, Permanent: true,
			Err: fmt.Errorf("spec.openPGP.rename names %s %q, which is no file's name", f.Path, renamed)}
	case src.UID == dst.UID && job.Src == job.Dst:
		err = &transfer.Error{Reason: v1alpha1.ReasonInvalidSpec, Permanent: true,
			Err: fmt.Errorf("%s would be copied onto itself: the destination folder is its own", f.Path)}
	default:
		// The file's sessions; and more for a large file's ranges
		// (transfer.Job.Ranges), each pair only while it holds a stream
		// of the namespace's share and one of the replica's, and only
		// sessions at hand or dialed at once: none of it waited for.
		// Whatever keeps a pair from starting means fewer ranges at once.
		extra := t.sessions(src, dst, pool.Op{Stream: true, NoWait: true})
		job.Sessions = func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
			leave, ok := t.r.enterStream(ctx, tr.Namespace, false)
			if !ok {
				return transfer.ErrNoSessions
			}
			defer leave()
			started := false
			err := extra(ctx, func(sf, df files.FS, abort func()) error {
				started = true
				return fn(sf, df, abort)
			})
			if err != nil && !started {
				return transfer.ErrNoSessions
			}
			return err
		}
		err = t.sessions(src, dst, op)(ctx, func(sf, df files.FS, abort func()) error {
			job.Abort = abort
			var err error
			res, err = transfer.Copy(ctx, sf, df, job)
			return err
		})
	}
	if err != nil && job.Transform != nil && dst.LeavesPartialFiles() {
		// What a transformed copy left may be clear text not yet
		// verified, and is never continued: removed, on a session of
		// its own should the copy's have broken. (An upload's parts
		// never show, and the copy aborted them.)
		tmp := tempname.For(path.Dir(job.Dst), job.Seed)
		_ = t.r.Ends.Do(context.WithoutCancel(ctx), dst, pool.Op{Timeout: dst.OperationTimeout}, func(f files.FS, _ func()) error {
			return files.IgnoreMissing(f.Remove(tmp))
		})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.moving, i)
	if err != nil && ctx.Err() != nil {
		return nil // stopped: the file is still waiting, for the next run
	}
	defer t.audit(ctx, tr, src, dst, f.Path, job.Dst, res, err)
	file := &t.plan.Files[i]
	t.dirty = true
	if res.ModTime != 0 && (err == nil || errors.Is(err, transfer.ErrSourceChanged)) {
		// As copied, or as found when it changed since the listing (a
		// try cut otherwise keeps the plan's, which names its partial
		// copy).
		if file.Size != res.Size || file.ModTime != res.ModTime {
			file.Ranges = nil // of another content
		}
		file.Size, file.ModTime = res.Size, res.ModTime
	}
	if err == nil {
		// Files copy again: whatever failed before is no longer the news.
		t.retrying = ""
		file.State, file.Reason, file.Message, file.Upload, file.Ranges = res.State, "", "", "", nil
		t.r.Metrics.TransferFiles.WithLabelValues(map[transfer.FileState]string{transfer.Done: "done", transfer.Skipped: "skipped"}[res.State]).Inc()
		return nil
	}
	limit, backoff := retryOf(tr)
	var typed *transfer.Error
	if !errors.As(err, &typed) {
		// The session's failure or a dial's, not the file's: tried again
		// without counting.
		t.cut[i] = true
		t.retrying = "a server failed; retrying: " + err.Error()
		at := time.Now().Add(backoff)
		return &at
	}
	file.Tries++
	file.Reason, file.Message = typed.Reason, statuspatch.Cut(typed.Error(), 512)
	t.lastErr = f.Path + ": " + typed.Error()
	if typed.Permanent || file.Tries > limit {
		file.State, file.Ranges = transfer.Failed, nil
		// Its parts, or its partial copy, would never be used.
		id := file.Upload
		file.Upload = ""
		if id != "" || dst.LeavesPartialFiles() {
			go func() {
				_ = t.r.Ends.Do(context.WithoutCancel(ctx), dst, pool.Op{Timeout: dst.OperationTimeout}, func(f files.FS, _ func()) error {
					switch {
					case id != "":
						return transfer.AbortUpload(f, job.Dst, id)
					case t.r.Shard.Holds(string(t.uid)):
						// Not a replica's that lost the transfer: the one
						// holding it may be writing under the same names.
						job.RemoveTemporaries(f)
					}
					return nil
				})
			}()
		}
		t.r.Metrics.TransferFiles.WithLabelValues("failed").Inc()
		return nil
	}
	t.r.Metrics.TransferFiles.WithLabelValues("retried").Inc()
	t.retrying = fmt.Sprintf("%s failed (try %d of %d); retrying: %s", f.Path, file.Tries, limit+1, typed.Error())
	at := time.Now().Add(transfer.Backoff(backoff, file.Tries))
	return &at
}

// audit records a file's try that wrote or removed something, or failed
// for good: its source and target as connection:path.
func (t *run) audit(ctx context.Context, tr *v1alpha1.Transfer, src, dst *ends.End, from, to string, res transfer.Result, err error) {
	var typed *transfer.Error
	result := audit.ResultOK
	switch {
	case err == nil && res.State == transfer.Skipped:
		return // nothing written
	case errors.As(err, &typed) && typed.Permanent:
		result = typed.Reason
	case err != nil:
		return // tried again: the try that ends it is recorded
	}
	action := "transfer.copy"
	if tr.Spec.Mode == v1alpha1.TransferMove {
		action = "transfer.move"
	}
	t.r.Audit.Record(ctx, audit.Record{Action: action, Actor: audit.Actor{Kind: audit.ActorTransfer, Name: tr.Name}, Namespace: tr.Namespace,
		Connection: dst.Ref.String(), Paths: []string{src.Ref.String() + ":" + from, dst.Ref.String() + ":" + strings.TrimPrefix(to, strings.TrimSuffix(dst.Root, "/"))},
		Bytes: res.Sent, SHA256: res.SHA256, Result: result})
}

// facts are what the run knows now, for the status.
func (t *run) facts() facts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return facts{plan: t.plan, retrying: t.retrying, overBudget: t.overBudget, rate: t.rate}
}

// save writes the plan when it changed, at most once per WriteEvery
// unless now.
func (t *run) save(ctx context.Context, now bool) {
	t.mu.Lock()
	if t.plan == nil || !t.dirty || !now && time.Since(t.lastSave) < t.r.Limits.WriteEvery {
		t.mu.Unlock()
		return
	}
	blob, err := t.plan.Encode()
	t.dirty = false
	version := t.version
	t.mu.Unlock()
	if err == nil {
		err = t.r.States.Save(ctx, string(t.uid), t.key.Namespace, blob, &version)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.version = version
	switch {
	case errors.Is(err, statestore.ErrConflict):
		// Another replica took the transfer: what it holds is newer.
		t.cancel()
	case errors.As(err, new(*storedbytes.ExceededError)):
		t.dirty, t.overBudget = true, err.Error()
	case err != nil:
		t.dirty = true
		t.lastErr = "storing the transfer's plan: " + err.Error()
	default:
		t.lastSave, t.overBudget = time.Now(), ""
	}
}

// report writes the transfer's status from f when it changed, at most
// once per WriteEvery unless its conditions did, and records an event
// when its Ready reason changes. It reports whether the status is
// written.
func (t *run) report(ctx context.Context, f facts) bool {
	var tr v1alpha1.Transfer
	if err := t.r.Cache.Get(ctx, t.key, &tr); err != nil || tr.UID != t.uid {
		return false
	}
	next := tr.DeepCopy()
	t.mu.Lock()
	if f.plan != nil {
		// The bytes of files under way count as done.
		c := *f.plan
		c.Files = append([]transfer.File(nil), f.plan.Files...)
		f.plan = &c
	}
	var moving int64
	for _, m := range t.moving {
		moving += m.Load()
	}
	lastErr := t.lastErr
	t.mu.Unlock()
	setStatus(next, f)
	st := &next.Status
	st.Bytes.Done += moving
	if st.Bytes.Total > 0 {
		st.Bytes.Done = min(st.Bytes.Done, st.Bytes.Total)
	}
	st.Worker = t.r.Shard.Identity
	if st.StartTime == nil {
		st.StartTime = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
	st.LastError = statuspatch.Cut(lastErr, 1024)
	if f.finished {
		st.CompletionTime = &metav1.Time{Time: time.Now().Truncate(time.Second)}
		st.BytesPerSecond, st.EventDelivered = 0, f.eventDelivered
		if f.sinkURI != "" {
			st.SinkURI = f.sinkURI
		}
	}
	if reflect.DeepEqual(next.Status, tr.Status) {
		return true
	}
	conditionsChanged := !reflect.DeepEqual(next.Status.Conditions, tr.Status.Conditions)
	if !conditionsChanged && !f.finished && time.Since(t.lastStatus) < t.r.Limits.WriteEvery {
		return false
	}
	if !f.finished && !t.r.Shard.Holds(string(t.uid)) || tr.ResourceVersion == t.behind {
		// Not ours, or the cache has not caught up with the server yet.
		return false
	}
	t.updateRate(st.Bytes.Done)
	if _, err := t.r.status.Patch(ctx, &tr, next); err != nil {
		switch {
		case apierrors.IsConflict(err):
			// Written since by another replica, or by a write of ours whose
			// answer was lost: wait for the cache to show it.
			t.behind = tr.ResourceVersion
		case !apierrors.IsNotFound(err):
			t.r.log().Info("writing a transfer's status", "namespace", tr.Namespace, "name", tr.Name, "error", err)
		}
		return false
	}
	t.lastStatus, t.behind = time.Now(), tr.ResourceVersion
	return true
}

// updateRate sets the rate from the bytes done since the last write.
func (t *run) updateRate(done int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if !t.rateAt.IsZero() && now.Sub(t.rateAt) > 0 && done >= t.rateBytes {
		t.rate = int64(float64(done-t.rateBytes) / now.Sub(t.rateAt).Seconds())
	}
	t.rateBytes, t.rateAt = done, now
}

// rangesTo is how many ranges of a file are copied at once to dst: one
// where files are written only at their end.
func rangesTo(dst *ends.End, n int) int {
	if !dst.WritesAnywhere() {
		return 1
	}
	return n
}
