package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Job is one file to copy.
type Job struct {
	// Src and Dst are the source file's and the target's server paths.
	Src, Dst string
	// Size and ModTime (Unix seconds) are the source file's as the plan
	// has them: a file that changed since fails its try, and its next
	// one copies it as it is then.
	Size, ModTime int64
	// Seed names the file's temporary copy (tempname.For): the transfer's
	// uid and the file's path, so that a resumed transfer finds it.
	Seed      string
	Overwrite v1alpha1.OverwritePolicy
	Verify    v1alpha1.VerifyMethod
	Move      bool
	// Resumed says an earlier run of the transfer may have copied the file
	// already: a target of the source's size and modification time is
	// taken as its copy, even with Overwrite Always.
	Resumed bool
	// Fresh says no earlier try can have left a partial copy or put the
	// file in place (the file's first try in the transfer's first run):
	// none is looked for, and the target is looked up in its folder's
	// listing, read once for all the transfer's files.
	Fresh bool
	// Progress is told the bytes written at the destination as they go;
	// Kept the bytes an earlier try's copy holds that this one continues
	// from (written before, by this replica or another).
	Progress, Kept func(n int64)
	// Stall ends a copy that made no progress for this long, by calling
	// Abort (which closes the sessions: a request to a server that never
	// answers cannot be stopped otherwise).
	Stall time.Duration
	Abort func()
	// Held reports whether the replica still holds the transfer: one
	// whose hold lapsed (another replica may run it now) renames nothing
	// into place and removes no source. Nil: always.
	Held func() bool
	// Made is what the transfer knows of the destination's folders,
	// shared by its copies.
	Made *Folders
	// Transform, when set, rewrites the content on its way (OpenPGP):
	// the copy is what it wrote, so the target's size is not the
	// source's, and a cut copy starts over.
	Transform Transform
	// Upload, to a destination whose files appear whole
	// (files.Uploader), is the upload an earlier try left to continue;
	// Uploading is told the id of the upload this try sends, as soon as
	// it has one, for the plan.
	Upload    string
	Uploading func(id string)
	// Ranges is how many ranges of a large file (RangedFile and up) are
	// copied at once, each on a pair of sessions of its own (one SSH
	// channel's window bounds what one stream has in flight); <= 1 copies
	// it as one stream. Only from a server to a server, untransformed.
	Ranges int
	// Sessions runs fn on a fresh pair of sessions, source and
	// destination (abort closes both), for more ranges at once; or
	// answers ErrNoSessions at once when none is free.
	Sessions func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error
	// Done is the bytes of each range an earlier try copied (from the
	// plan: File.Ranges), checked before they are kept; RangeDone is told
	// each range's progress as it goes: what is sure to be written (less
	// what may still be in flight).
	Done      []int64
	RangeDone func([]int64)
}

// Transform writes to dst what src's content becomes (name is the source
// file's); its error, when the content is at fault, is a *TransformError.
type Transform func(dst io.Writer, src io.Reader, name string) error

// TransformError is content a Transform refused: the file fails with
// Reason, for good (the same content fails the same way).
type TransformError struct {
	Reason string
	Err    error
}

func (e *TransformError) Error() string { return e.Err.Error() }
func (e *TransformError) Unwrap() error { return e.Err }

// Result is how a copy ended.
type Result struct {
	// State is Done or Skipped.
	State FileState
	// Size and ModTime are the source file's as copied, or as found when
	// it changed.
	Size, ModTime int64
	// From is where the copy resumed; Sent what this try wrote.
	From, Sent int64
	// SHA256 is the hex SHA-256 of the file's content, when verification
	// computed it (spec.verify SHA256, on a copy to a server).
	SHA256 string
}

// Error is a file's failed try, with the reason reported for it.
type Error struct {
	Reason string
	// Permanent failures are not tried again.
	Permanent bool
	Err       error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// SessionFailed says a copy that stalled, or whose session broke, leaves
// its session for none: a stalled one may hang the next operation too.
func (e *Error) SessionFailed() bool {
	return errors.Is(e.Err, ErrStalled) || files.SessionFailed(e.Err)
}

// ErrStalled is a copy that made no progress for Job.Stall.
var ErrStalled = errors.New("the copy made no progress")

// ErrNotHeld is a copy stopped before its rename because the replica no
// longer holds the transfer: not the file's failure.
var ErrNotHeld = errors.New("this replica no longer holds the transfer")

// fail types err by what happens next: what the servers refuse for good
// is not tried again.
func fail(err error, what string) error {
	var typed *Error
	if errors.As(err, &typed) {
		return err
	}
	var refused *TransformError
	if errors.As(err, &refused) {
		return &Error{Reason: refused.Reason, Permanent: true, Err: fmt.Errorf("%s: %w", what, err)}
	}
	code, answered := files.Status(err)
	if files.SessionFailed(err) || !answered && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, fs.ErrNotExist) {
		// No answer of the server's about the file: the connection
		// failed, which does not count as the file's try.
		return fmt.Errorf("%s: %w", what, err)
	}
	e := &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s: %w", what, err)}
	switch {
	case errors.Is(err, fs.ErrPermission):
		e.Reason, e.Permanent = v1alpha1.ReasonPermissionDenied, true
	case code == files.FxNoSpace || code == files.FxQuotaExceeded:
		e.Reason = v1alpha1.ReasonDestinationFull
	}
	return e
}

// tailCheck is how much of a partial copy is compared with the source
// before the copy continues from it; inFlight is what a copy may have had
// in flight when it was cut (pkg/sftp's 64 writes of 32 KiB), which is
// written again.
const (
	tailCheck = 1 << 20
	inFlight  = 64 * 32 << 10
)

// Copy copies j's file from src to dst: under its temporary name (from
// what it holds already, when its end matches the source), then verified,
// renamed over the target, and with Move the source removed.
func Copy(ctx context.Context, src, dst files.FS, j Job) (Result, error) {
	r := Result{Size: j.Size, ModTime: j.ModTime}
	if j.Abort != nil {
		// A copy stopped (its replica gives the transfer back) ends now,
		// even in the middle of reading a large file for its digest.
		defer context.AfterFunc(ctx, j.Abort)()
	}
	target, err := j.Made.target(dst, j.Dst, j.Fresh, r.ModTime)
	if err != nil {
		return r, fail(err, "reading the destination folder")
	}
	replace, done, err := j.decide(src, dst, target, &r)
	if err != nil || done != Waiting {
		r.State = done
		if err == nil && !j.Fresh && (j.Held == nil || j.Held()) {
			// An earlier try's copy, never to be continued now (by this
			// replica: one that no longer holds the transfer leaves the
			// names to the one that does).
			j.RemoveTemporaries(dst)
		}
		if err == nil && done == Done && j.Move {
			err = removeSource(src, j.Src)
		}
		return r, err
	}
	if up, ok := dst.(files.Uploader); ok {
		return j.upload(ctx, src, dst, up, replace, r)
	}
	tmp := tempname.For(path.Dir(j.Dst), j.Seed)
	if j.ranged() {
		tmp = j.rangedTemp()
	} else if !j.Fresh && j.Transform == nil {
		if r.From, err = resumeFrom(src, dst, j.Src, tmp, r.Size); err != nil {
			return r, err
		}
		if r.From == 0 && r.Size >= RangedFile {
			// An earlier try's copy in ranges, under its own name.
			_ = dst.Remove(j.rangedTemp())
		}
	}
	j.kept(r.From)
	var (
		srcSum []byte
		size   = r.Size
	)
	switch {
	case j.Transform != nil:
		if size, srcSum, err = j.copyThrough(ctx, src, dst, tmp, &r); err != nil {
			// Never continued: what it holds is of no use, and may be
			// clear text of a message that failed its checks.
			_ = dst.Remove(tmp)
		}
	case j.ranged():
		err = j.copyRanges(ctx, src, dst, tmp, &r)
	default:
		srcSum, err = j.copy(ctx, src, dst, tmp, &r)
	}
	if err != nil {
		return r, err
	}
	// The copy's modification time is set while it is verified: neither
	// depends on the other.
	var (
		timed    sync.WaitGroup
		timedErr error
	)
	timed.Go(func() {
		modTime := time.Unix(r.ModTime, 0)
		timedErr = dst.Chtimes(tmp, modTime, modTime)
	})
	sum, err := j.verify(src, dst, tmp, size, srcSum)
	timed.Wait()
	if err != nil {
		_ = dst.Remove(tmp)
		return r, err
	}
	if timedErr != nil {
		return r, fail(timedErr, "setting the copy's modification time")
	}
	if j.Held != nil && !j.Held() {
		return r, ErrNotHeld
	}
	// The target is never lost: a server without posix-rename has it
	// moved aside and back (files.ReplaceInto). Should the session
	// break in between, the copy's next try writes the target anew, and
	// the old one stays aside under a temporary name.
	leftover, err := files.ReplaceInto(dst, tmp, j.Dst, replace)
	if leftover != nil {
		_ = leftover(dst)
	}
	if err != nil {
		if !replace && exists(dst, j.Dst) {
			// Another writer made the target meanwhile: Never leaves it.
			_ = dst.Remove(tmp)
			r.State = Skipped
			return r, nil
		}
		return r, fail(err, "renaming the copy into place")
	}
	r.State = Done
	if sum != nil {
		r.SHA256 = hex.EncodeToString(sum)
	}
	if j.Move {
		return r, removeSource(src, j.Src)
	}
	return r, nil
}

// RemoveTemporaries removes what an earlier try of j may have left under
// its temporary names.
func (j *Job) RemoveTemporaries(dst files.FS) {
	_ = dst.Remove(tempname.For(path.Dir(j.Dst), j.Seed))
	if j.ranged() {
		_ = dst.Remove(j.rangedTemp())
	}
}

// decide reads the target: done when it is the source's copy already,
// Skipped when the overwrite policy keeps it, and otherwise whether it is
// replaced.
func (j *Job) decide(src, dst files.FS, tfi *entry, r *Result) (replace bool, done FileState, err error) {
	switch {
	case tfi == nil:
		return false, Waiting, nil
	case tfi.dir:
		return false, Waiting, &Error{Reason: v1alpha1.ReasonFilesFailed, Permanent: true, Err: fmt.Errorf("%s is a folder at the destination", j.Dst)}
	}
	if _, writeTimes := src.(files.ListsWriteTimes); (writeTimes || files.CoarseTimes(src)) && tfi.modTime != r.ModTime {
		// The listing gave when the source was written, or its time
		// coarsely; the target has its own time, which a stat of the
		// source gives.
		if fi, err := src.Stat(j.Src); err == nil && fi.Size() == r.Size {
			r.ModTime = fi.ModTime().Unix()
		}
	}
	if files.CoarseTimes(dst) && tfi.size == r.Size && tfi.modTime != r.ModTime {
		if fi, err := dst.Stat(j.Dst); err == nil && fi.Size() == tfi.size {
			tfi.modTime = fi.ModTime().Unix()
		}
	}
	if j.Transform != nil {
		return j.decideTransformed(tfi, *r)
	}
	same := tfi.size == r.Size && tfi.modTime == r.ModTime
	if same && (j.Overwrite != v1alpha1.OverwriteAlways || j.Resumed) {
		if j.Verify != v1alpha1.VerifySHA256 {
			return false, Done, nil
		}
		a, err := digest(src, j.Src)
		if errors.Is(err, fs.ErrNotExist) && j.Move {
			// Moved by an earlier run that was cut before it recorded it.
			return false, Done, nil
		}
		if err != nil {
			return false, Waiting, fail(err, "reading the source file")
		}
		b, err := digest(dst, j.Dst)
		if err != nil {
			return false, Waiting, fail(err, "reading the target")
		}
		if bytes.Equal(a, b) {
			return false, Done, nil
		}
	}
	if j.Overwrite == v1alpha1.OverwriteNever {
		return false, Skipped, nil
	}
	return true, Waiting, nil
}

// decideTransformed is decide for a transformed copy, whose size is its
// own: only its modification time (the source's) tells it. A target with
// the source's time is taken for the copy only when an earlier run of the
// transfer may have written it; else a file someone put there in the same
// second would pass for it, and the new content never be written.
func (j *Job) decideTransformed(tfi *entry, r Result) (replace bool, done FileState, err error) {
	sameTime := tfi.modTime == r.ModTime
	switch {
	case j.Resumed && sameTime:
		return false, Done, nil
	case j.Overwrite == v1alpha1.OverwriteNever, j.Overwrite == v1alpha1.OverwriteIfDifferent && sameTime:
		return false, Skipped, nil
	}
	return true, Waiting, nil
}

// resumeFrom is where the copy to tmp continues: the size of what tmp
// holds less what was in flight (none, where writes land in order), when
// the MiB before that point matches the source's; else 0 (tmp is started
// over).
func resumeFrom(src, dst files.FS, srcPath, tmp string, size int64) (int64, error) {
	pfi, err := dst.Stat(tmp)
	if err != nil || pfi.Size() == 0 || pfi.Size() > size {
		return 0, nil
	}
	// The last writes in flight when the copy was cut may have landed in
	// any order (a server may run them at once): only what lies before
	// them is sure to be whole. A server written in one stream holds a
	// prefix, and takes the rest at its end only.
	have := pfi.Size() - inFlight
	if _, inOrder := dst.(files.WritesInOrder); inOrder {
		have = pfi.Size()
	}
	if have <= 0 {
		return 0, nil
	}
	n := min(have, tailCheck)
	a, err := readAt(src, srcPath, have-n, n)
	if err != nil {
		return 0, fail(err, "reading the source file")
	}
	b, err := readAt(dst, tmp, have-n, n)
	if err != nil || !bytes.Equal(a, b) {
		return 0, nil
	}
	return have, nil
}

func readAt(c files.FS, name string, off, n int64) ([]byte, error) {
	f, err := c.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, off)
	return buf, err
}

// copyConcurrency is how many requests a copy keeps in flight each way.
const copyConcurrency = 64

// copy copies the source from r.From on into tmp, and returns the source's
// digest when it read all of it and j verifies by digest. The source and
// the copy are opened at once, and closed at once, each on its server.
func (j *Job) copy(ctx context.Context, src, dst files.FS, tmp string, r *Result) ([]byte, error) {
	progress := &counter{report: j.Progress}
	if j.Verify == v1alpha1.VerifySHA256 && r.From == 0 {
		progress.sum = sha256.New()
	}
	stop := j.watch(ctx, progress)
	defer stop()
	in, out, err := j.open(src, dst, tmp, r.From == 0, r, progress)
	if in != nil {
		defer func() { _ = in.Close() }()
	}
	if out != nil {
		defer func() { _ = out.Close() }()
	}
	if err != nil {
		return nil, err
	}
	if _, err := in.Seek(r.From, io.SeekStart); err != nil {
		return nil, fail(err, "reading the source file")
	}
	if _, err := out.Seek(r.From, io.SeekStart); err != nil {
		return nil, fail(err, "writing the copy")
	}
	var (
		now  os.FileInfo
		serr error
	)
	if r.From == 0 && r.Size <= SmallFile {
		err = j.copySmall(in, func(b []byte) error { _, err := out.Write(b); return err }, out.Close, r, progress,
			func() { now, serr = in.Stat() })
	} else {
		err = j.copyStream(in, out, out.Close, r, progress)
		if err == nil || errors.Is(err, errChanged) {
			now, serr = in.Stat()
		}
	}
	if err := j.ended(err, now, serr, r, progress); err != nil {
		return nil, err
	}
	if progress.sum == nil {
		return nil, nil
	}
	return progress.sum.Sum(nil), nil
}

// open opens the source and the copy (trunc: made anew) at once, each
// on its server.
func (j *Job) open(src, dst files.FS, tmp string, trunc bool, r *Result, progress *counter) (in, out files.File, err error) {
	flags := os.O_WRONLY | os.O_CREATE
	if trunc {
		flags |= os.O_TRUNC
	}
	var (
		outErr error
		opened sync.WaitGroup
	)
	opened.Go(func() { out, outErr = dst.OpenFile(tmp, flags) })
	in, err = src.Open(j.Src)
	if err == nil && files.CoarseTimes(src) {
		// The plan's time is the listing's, coarse: the copy keeps, and
		// checks the source against, the time a stat gives.
		if fi, serr := in.Stat(); serr == nil && fi.Size() == r.Size {
			r.ModTime = fi.ModTime().Unix()
		}
	}
	opened.Wait()
	if err == nil && !progress.version.see(in) {
		// Another range of the copy read another version.
		err = errChanged
	}
	switch {
	case progress.stalled.Load():
		return in, out, &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%w for %s", ErrStalled, j.Stall)}
	case errors.Is(err, fs.ErrNotExist):
		return in, out, j.sourceGone()
	case errors.Is(err, errChanged):
		return in, out, err
	case err != nil:
		return in, out, fail(err, "opening the source file")
	case outErr != nil:
		return in, out, fail(outErr, "creating the temporary copy")
	}
	return in, out, nil
}

// sourceGone is the file's failure when its source is no longer there.
func (j *Job) sourceGone() error {
	return &Error{Reason: v1alpha1.ReasonSourceNotFound, Permanent: true, Err: fmt.Errorf("%s is no longer on the source server", j.Src)}
}

// ended is a copy's end: err from the copy, the source as it is now
// (serr reading it), checked against what the plan has of it.
func (j *Job) ended(err error, now os.FileInfo, serr error, r *Result, progress *counter) error {
	switch {
	case progress.stalled.Load():
		return &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%w for %s", ErrStalled, j.Stall)}
	case err != nil && !errors.Is(err, errChanged):
		return err
	case serr != nil:
		return fail(serr, "reading the source file")
	case err != nil || now.Size() != r.Size || progress.version.changed(now, r.ModTime):
		// Changed since the plan was made: copied again, as it is then.
		r.Size, r.ModTime = now.Size(), now.ModTime().Unix()
		return &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s %w", j.Src, ErrSourceChanged)}
	}
	if own, ok := progress.version.ownTime(); ok {
		r.ModTime = own
	}
	return nil
}

// ErrSourceChanged is a source that changed while it was copied.
var ErrSourceChanged = errors.New("changed while it was copied")

// version is the version of the source a copy read, where its store tags
// versions (an object's ETag): every open of one copy must find the same
// one, and the source after the copy must still be it. Such a store's
// listing gives when an object was written, not the file's own time it
// keeps apart; the version's own time is the copy's.
type version struct {
	mu      sync.Mutex
	seen    bool
	tag     string
	modTime int64
}

// see takes the version an open of the source found (in, when its store
// says); false when another open of the same copy found another.
func (v *version) see(in files.File) bool {
	o, ok := in.(files.Versioned)
	if !ok {
		return true
	}
	fi := o.OpenedInfo()
	tag := tagOf(fi)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.seen {
		v.seen, v.tag, v.modTime = true, tag, fi.ModTime().Unix()
		return true
	}
	return tag == v.tag
}

// changed says whether now is no longer the source the copy read: another
// tag than the one read, or for an untagged source another time than
// planned.
func (v *version) changed(now os.FileInfo, planned int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tag != "" {
		return tagOf(now) != v.tag
	}
	return now.ModTime().Unix() != planned
}

// ownTime is the read version's own time, for a tagged source.
func (v *version) ownTime() (int64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.modTime, v.tag != ""
}

func tagOf(fi os.FileInfo) string {
	if tagged, ok := fi.Sys().(files.Tagged); ok {
		return tagged.Tag()
	}
	return ""
}

// copyThrough copies the whole source through j.Transform into tmp: the
// source read into one buffer, the transform's output written from
// another, many requests in flight each way. It returns the size and,
// verifying by digest, the SHA-256 of what it wrote.
func (j *Job) copyThrough(ctx context.Context, src, dst files.FS, tmp string, r *Result) (int64, []byte, error) {
	progress := &counter{report: j.Progress}
	stop := j.watch(ctx, progress)
	defer stop()
	in, out, err := j.open(src, dst, tmp, true, r, progress)
	if in != nil {
		defer func() { _ = in.Close() }()
	}
	if out != nil {
		defer func() { _ = out.Close() }()
	}
	if err != nil {
		return 0, nil, err
	}
	return j.through(in, out, out.Close, r, progress)
}

// through streams in through j.Transform into out, and closes it with
// closeOut; it returns what copyThrough does.
func (j *Job) through(in files.File, out sink, closeOut func() error, r *Result, progress *counter) (int64, []byte, error) {
	read, made := newBuffer(bufferChunks), newBuffer(bufferChunks)
	readErr, madeErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := in.WriteTo(read)
		read.CloseWithError(err)
		readErr <- err
	}()
	go func() {
		err := j.Transform(made, io.TeeReader(read, progress), path.Base(j.Src))
		read.Close()
		made.CloseWithError(err)
		madeErr <- err
	}()
	written := &counter{}
	if j.Verify == v1alpha1.VerifySHA256 {
		written.sum = sha256.New()
	}
	n, werr := out.ReadFromWithConcurrency(io.TeeReader(made, written), copyConcurrency)
	made.Close()
	rerr, terr := <-readErr, <-madeErr
	r.Sent = n
	var (
		refused *TransformError
		err     error
	)
	switch {
	case rerr != nil && !errors.Is(rerr, io.ErrClosedPipe):
		err = fail(rerr, "reading the source file")
	case errors.As(terr, &refused) && j.sourceChanged(in, r, progress):
		// Cut short or altered because it is being written: copied
		// again, as it is then, not failed for good.
		err = errChanged
	case terr != nil && !errors.Is(terr, io.ErrClosedPipe):
		err = fail(terr, "reading the message")
	case werr != nil:
		err = fail(werr, "writing the copy")
	default:
		if cerr := closeOut(); cerr != nil {
			err = fail(cerr, "writing the copy")
		} else if progress.n.Load() != r.Size {
			err = errChanged
		}
	}
	var (
		now  os.FileInfo
		serr error
	)
	if err == nil || errors.Is(err, errChanged) {
		now, serr = in.Stat()
	}
	if err := j.ended(err, now, serr, r, progress); err != nil {
		return 0, nil, err
	}
	if written.sum == nil {
		return n, nil, nil
	}
	return n, written.sum.Sum(nil), nil
}

// sink is where a copy's content goes: an open file, or an upload.
type sink interface {
	ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error)
}

// copyStream copies the source from r.From on through a buffer, many
// requests in flight each way, then closes the copy with closeOut.
func (j *Job) copyStream(in files.File, out sink, closeOut func() error, r *Result, progress *counter) error {
	buf := newBuffer(bufferChunks)
	readErr := make(chan error, 1)
	go func() {
		_, err := in.WriteTo(buf)
		buf.CloseWithError(err)
		readErr <- err
	}()
	n, err := out.ReadFromWithConcurrency(io.TeeReader(buf, progress), copyConcurrency)
	buf.Close()
	rerr := <-readErr
	r.Sent = n
	switch {
	case rerr != nil && !errors.Is(rerr, io.ErrClosedPipe): // ErrClosedPipe: the writes failed first
		return fail(rerr, "reading the source file")
	case err != nil:
		return fail(err, "writing the copy")
	}
	if err := closeOut(); err != nil {
		return fail(err, "writing the copy")
	}
	if r.From+n != r.Size {
		return errChanged
	}
	return nil
}

// sourceChanged reports whether the source is no longer as the plan has
// it (a stat that fails says nothing).
func (j *Job) sourceChanged(in files.File, r *Result, progress *counter) bool {
	now, err := in.Stat()
	return err == nil && (now.Size() != r.Size || progress.version.changed(now, r.ModTime))
}

// errChanged is a source that did not hold the size the plan says.
var errChanged = errors.New("the source file changed")

// SmallFile is the size up to which a file is read whole into memory and
// written in one go: fewer round trips than streaming, for the most
// common files; at most this much per copy.
const SmallFile = 256 << 10

// copySmall copies a small file whole: one read, then write and closeOut
// on the destination while afterRead (the source's fstat) runs on the
// source.
func (j *Job) copySmall(in files.File, write func([]byte) error, closeOut func() error, r *Result, progress *counter, afterRead func()) error {
	buf := make([]byte, r.Size)
	if _, err := io.ReadFull(in, buf); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) && r.Size > 0 {
		afterRead()
		return errChanged
	} else if err != nil {
		return fail(err, "reading the source file")
	}
	var source sync.WaitGroup
	source.Go(afterRead)
	defer source.Wait()
	if err := write(buf); err != nil {
		return fail(err, "writing the copy")
	}
	if err := closeOut(); err != nil {
		return fail(err, "writing the copy")
	}
	r.Sent = r.Size
	_, _ = progress.Write(buf)
	return nil
}

// watch calls j.Abort when c stops moving for j.Stall, until the returned
// func is called.
func (j *Job) watch(ctx context.Context, c *counter) func() {
	if j.Stall <= 0 || j.Abort == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(j.Stall / 4)
		defer t.Stop()
		last, since := c.n.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				c.stalled.Store(true)
				j.Abort()
				return
			case now := <-t.C:
				if n := c.n.Load(); n != last {
					last, since = n, now
				} else if now.Sub(since) >= j.Stall {
					c.stalled.Store(true)
					j.Abort()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// kept tells Kept what the copy continues from, if anything.
func (j *Job) kept(n int64) {
	if n > 0 && j.Kept != nil {
		j.Kept(n)
	}
}

// counter counts the bytes of a copy as they pass, and hashes them.
type counter struct {
	n       atomic.Int64
	stalled atomic.Bool
	report  func(int64)
	sum     hash.Hash
	// version is the source's version the copy's opens found.
	version version
}

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	if c.report != nil {
		c.report(int64(len(p)))
	}
	if c.sum != nil {
		c.sum.Write(p)
	}
	return len(p), nil
}

// verify checks tmp against the source: its size, or both digests
// (srcSum when the copy computed it). A transformed copy is checked
// against what was written: size is its size, srcSum its digest.
func (j *Job) verify(src, dst files.FS, tmp string, size int64, srcSum []byte) ([]byte, error) {
	fi, err := dst.Stat(tmp)
	if err != nil {
		return nil, fail(err, "reading the copy")
	}
	if fi.Size() != size {
		return nil, &Error{Reason: v1alpha1.ReasonVerificationFailed, Err: fmt.Errorf("the copy of %s holds %d bytes, not %d", j.Src, fi.Size(), size)}
	}
	if j.Verify != v1alpha1.VerifySHA256 {
		return nil, nil
	}
	var (
		read    sync.WaitGroup
		readErr error
	)
	if srcSum == nil {
		// Read beside the copy: each is one stream, bounded by its link.
		read.Go(func() { srcSum, readErr = digest(src, j.Src) })
	}
	dstSum, err := digest(dst, tmp)
	read.Wait()
	if readErr != nil {
		return nil, fail(readErr, "reading the source file")
	}
	if err != nil {
		return nil, fail(err, "reading the copy")
	}
	if !bytes.Equal(srcSum, dstSum) {
		return nil, &Error{Reason: v1alpha1.ReasonVerificationFailed, Err: fmt.Errorf("the copy of %s differs from it (SHA-256)", j.Src)}
	}
	return dstSum, nil
}

// digest is the SHA-256 of name's content.
func digest(c files.FS, name string) ([]byte, error) {
	f, err := c.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

func exists(c files.FS, name string) bool {
	_, err := c.Lstat(name)
	return err == nil
}

func removeSource(c files.FS, name string) error {
	if err := c.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err, "removing the source file (its copy is in place)")
	}
	return nil
}

// Folders is what a transfer's copies know of the destination's
// folders: those made, and for its first files the entries each held,
// listed once rather than asked file by file.
type Folders struct {
	mu     sync.Mutex
	folder map[string]*folder
	// entries counts the entries held, of every folder: at most
	// maxListed for the transfer.
	entries int
}

// folder is one destination folder, listed once it could be.
type folder struct {
	mu      sync.Mutex
	listed  bool
	entries map[string]entry
	// tooLarge: it holds more entries than the transfer may keep, and
	// its files are asked about one by one.
	tooLarge bool
}

// entry is what a folder holds under a name: as little as decide needs.
type entry struct {
	dir           bool
	size, modTime int64
}

func entryOf(fi os.FileInfo) *entry {
	return &entry{dir: fi.IsDir(), size: fi.Size(), modTime: fi.ModTime().Unix()}
}

// maxListed bounds the entries of destination folders a transfer holds
// in memory (about 100 bytes each); past it, each target is asked about.
const maxListed = 20_000

// target is what the destination holds at name, or nil; it makes name's
// folder when it is missing. From the folder's listing when fresh (no
// earlier try can have put the file there), else asked. A listing that
// failed is tried again by the next file.
func (f *Folders) target(dst files.FS, name string, fresh bool, modTime int64) (*entry, error) {
	dir := path.Dir(name)
	d := f.of(dir)
	d.mu.Lock()
	if !d.listed {
		if err := f.list(d, dst, dir); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		d.listed = true
	}
	if fresh && !d.tooLarge {
		e, ok := d.entries[path.Base(name)]
		d.mu.Unlock()
		switch {
		case !ok:
			return nil, nil
		case e.modTime == modTime:
			return &e, nil
		}
		// Another time than the source's: a listing may not give a
		// file's own time (an object store lists when an object was
		// written, and keeps the file's time apart), a stat does.
	} else {
		d.mu.Unlock()
	}
	fi, err := dst.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return entryOf(fi), nil
}

func (f *Folders) of(dir string) *folder {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.folder == nil {
		f.folder = map[string]*folder{}
	}
	d := f.folder[dir]
	if d == nil {
		d = &folder{}
		f.folder[dir] = d
	}
	return d
}

// list reads dir's entries into d, making dir if it is missing, within
// what the transfer may still hold.
func (f *Folders) list(d *folder, dst files.FS, dir string) error {
	f.mu.Lock()
	room := maxListed - f.entries
	f.mu.Unlock()
	entries := map[string]entry{}
	tooLarge := false
	err := dst.Each(dir, func(fi os.FileInfo) error {
		if len(entries) >= room {
			tooLarge = true
			return files.Stop
		}
		entries[fi.Name()] = *entryOf(fi)
		return nil
	})
	var large *files.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := dst.MkdirAll(dir); err != nil {
			return err
		}
	case errors.As(err, &large):
		tooLarge = true
	case err != nil:
		return err
	}
	if tooLarge {
		d.tooLarge = true
		return nil
	}
	f.mu.Lock()
	f.entries += len(entries)
	f.mu.Unlock()
	d.entries = entries
	return nil
}
