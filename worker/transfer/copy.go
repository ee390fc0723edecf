package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
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

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Job is one file to copy.
type Job struct {
	// Src and Dst are the source file's and the target's server paths.
	Src, Dst string
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
	// Fresh says no earlier try can have left a partial copy (the file's
	// first try in the transfer's first run): none is looked for.
	Fresh bool
	// Progress is told the bytes written at the destination as they go.
	Progress func(n int64)
	// Stall ends a copy that made no progress for this long, by calling
	// Abort (which closes the sessions: a request to a server that never
	// answers cannot be stopped otherwise).
	Stall time.Duration
	Abort func()
	// Made is the folders known to exist at the destination, shared by the
	// transfer's copies.
	Made *Folders
}

// Result is how a copy ended.
type Result struct {
	// State is Done or Skipped.
	State FileState
	// Size and ModTime are the source file's as copied.
	Size, ModTime int64
	// From is where the copy resumed; Sent what this try wrote.
	From, Sent int64
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

// ErrStalled is a copy that made no progress for Job.Stall.
var ErrStalled = errors.New("the copy made no progress")

// SFTP status codes that say the destination is full (draft-ietf-secsh-
// filexfer-13: NO_SPACE_ON_FILESYSTEM, QUOTA_EXCEEDED).
const (
	fxNoSpace       = 14
	fxQuotaExceeded = 15
)

// fail types err by what happens next: what the servers refuse for good
// is not tried again.
func fail(err error, what string) error {
	var typed *Error
	if errors.As(err, &typed) {
		return err
	}
	var status *sftp.StatusError
	e := &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s: %w", what, err)}
	switch {
	case errors.Is(err, fs.ErrPermission):
		e.Reason, e.Permanent = v1alpha1.ReasonPermissionDenied, true
	case errors.As(err, &status) && (status.Code == fxNoSpace || status.Code == fxQuotaExceeded):
		e.Reason = v1alpha1.ReasonDestinationFull
	}
	return e
}

// tailCheck is how much of a partial copy's end is compared with the
// source before the copy continues from it.
const tailCheck = 1 << 20

// Copy copies j's file from src to dst: under its temporary name (from
// what it holds already, when its end matches the source), then verified,
// renamed over the target, and with Move the source removed.
func Copy(ctx context.Context, src, dst *sftp.Client, j Job) (Result, error) {
	var r Result
	sfi, err := src.Stat(j.Src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, &Error{Reason: v1alpha1.ReasonSourceNotFound, Permanent: true, Err: fmt.Errorf("%s is no longer on the source server", j.Src)}
	case err != nil:
		return r, fail(err, "reading the source file")
	case !sfi.Mode().IsRegular():
		return r, &Error{Reason: v1alpha1.ReasonSourceNotFound, Permanent: true, Err: fmt.Errorf("%s is not a file", j.Src)}
	}
	r.Size, r.ModTime = sfi.Size(), sfi.ModTime().Unix()
	replace, done, err := j.decide(src, dst, r)
	if err != nil || done != Waiting {
		r.State = done
		if err == nil && done == Done && j.Move {
			err = removeSource(src, j.Src)
		}
		return r, err
	}
	if err := j.Made.make(dst, path.Dir(j.Dst)); err != nil {
		return r, fail(err, "making the destination folder")
	}
	tmp := tempname.For(path.Dir(j.Dst), j.Seed)
	if !j.Fresh {
		if r.From, err = resumeFrom(src, dst, j.Src, tmp, r.Size); err != nil {
			return r, err
		}
	}
	if r.From > 0 && j.Progress != nil {
		j.Progress(r.From)
	}
	srcSum, err := j.copy(ctx, src, dst, tmp, &r)
	if err != nil {
		return r, err
	}
	if err := dst.Chtimes(tmp, sfi.ModTime(), sfi.ModTime()); err != nil {
		return r, fail(err, "setting the copy's modification time")
	}
	if err := j.verify(src, dst, tmp, r.Size, srcSum); err != nil {
		_ = dst.Remove(tmp)
		return r, err
	}
	if now, err := src.Stat(j.Src); err != nil || now.Size() != r.Size || now.ModTime().Unix() != r.ModTime {
		return r, &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s changed while it was copied", j.Src)}
	}
	if err := rename(dst, tmp, j.Dst, replace); err != nil {
		if !replace && exists(dst, j.Dst) {
			// Another writer made the target meanwhile: Never leaves it.
			_ = dst.Remove(tmp)
			r.State = Skipped
			return r, nil
		}
		return r, fail(err, "renaming the copy into place")
	}
	r.State = Done
	if j.Move {
		return r, removeSource(src, j.Src)
	}
	return r, nil
}

// decide reads the target: done when it is the source's copy already,
// Skipped when the overwrite policy keeps it, and otherwise whether it is
// replaced.
func (j *Job) decide(src, dst *sftp.Client, r Result) (replace bool, done FileState, err error) {
	tfi, err := dst.Stat(j.Dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, Waiting, nil
	case err != nil:
		return false, Waiting, fail(err, "reading the target")
	case tfi.IsDir():
		return false, Waiting, &Error{Reason: v1alpha1.ReasonFilesFailed, Permanent: true, Err: fmt.Errorf("%s is a folder at the destination", j.Dst)}
	}
	same := tfi.Size() == r.Size && tfi.ModTime().Unix() == r.ModTime
	if same && (j.Overwrite != v1alpha1.OverwriteAlways || j.Resumed) {
		if j.Verify != v1alpha1.VerifySHA256 {
			return false, Done, nil
		}
		a, err := digest(src, j.Src)
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

// resumeFrom is where the copy to tmp continues: the size of what tmp
// holds when its last part matches the source's, else 0 (tmp is started
// over).
func resumeFrom(src, dst *sftp.Client, srcPath, tmp string, size int64) (int64, error) {
	pfi, err := dst.Stat(tmp)
	if err != nil || pfi.Size() == 0 || pfi.Size() > size {
		return 0, nil
	}
	have := pfi.Size()
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

func readAt(c *sftp.Client, name string, off, n int64) ([]byte, error) {
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

// smallFile is the size up to which a file is read whole into memory and
// written in one go: fewer round trips than streaming, for the most
// common files; at most this much per copy.
const smallFile = 256 << 10

// copy copies the source from r.From on into tmp, and returns the source's
// digest when it read all of it and j verifies by digest.
func (j *Job) copy(ctx context.Context, src, dst *sftp.Client, tmp string, r *Result) ([]byte, error) {
	in, err := src.Open(j.Src)
	if err != nil {
		return nil, fail(err, "opening the source file")
	}
	defer func() { _ = in.Close() }()
	flags := os.O_WRONLY | os.O_CREATE
	if r.From == 0 {
		flags |= os.O_TRUNC
	}
	out, err := dst.OpenFile(tmp, flags)
	if err != nil {
		return nil, fail(err, "creating the temporary copy")
	}
	defer func() { _ = out.Close() }()
	if _, err := in.Seek(r.From, io.SeekStart); err != nil {
		return nil, fail(err, "reading the source file")
	}
	if _, err := out.Seek(r.From, io.SeekStart); err != nil {
		return nil, fail(err, "writing the copy")
	}
	var sum hash.Hash
	if j.Verify == v1alpha1.VerifySHA256 && r.From == 0 {
		sum = sha256.New()
	}
	if r.From == 0 && r.Size <= smallFile {
		return j.copySmall(in, out, r, sum)
	}
	pr, pw := io.Pipe()
	progress := &counter{report: j.Progress, sum: sum}
	stop := j.watch(ctx, progress)
	defer stop()
	readErr := make(chan error, 1)
	go func() {
		_, err := in.WriteTo(pw)
		_ = pw.CloseWithError(err)
		readErr <- err
	}()
	n, err := out.ReadFromWithConcurrency(io.TeeReader(pr, progress), copyConcurrency)
	_ = pr.CloseWithError(errors.New("the copy ended"))
	rerr := <-readErr
	r.Sent = n
	switch {
	case progress.stalled.Load():
		return nil, &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%w for %s", ErrStalled, j.Stall)}
	case rerr != nil:
		return nil, fail(rerr, "reading the source file")
	case err != nil:
		return nil, fail(err, "writing the copy")
	}
	if err := out.Close(); err != nil {
		return nil, fail(err, "writing the copy")
	}
	if r.From+n != r.Size {
		return nil, &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s changed while it was copied", j.Src)}
	}
	if sum == nil {
		return nil, nil
	}
	return sum.Sum(nil), nil
}

// copySmall copies a small file whole: one read, one write (each split
// into concurrent requests by pkg/sftp).
func (j *Job) copySmall(in, out *sftp.File, r *Result, sum hash.Hash) ([]byte, error) {
	buf := make([]byte, r.Size)
	if _, err := io.ReadFull(in, buf); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) && r.Size > 0 {
		return nil, &Error{Reason: v1alpha1.ReasonFilesFailed, Err: fmt.Errorf("%s changed while it was copied", j.Src)}
	} else if err != nil {
		return nil, fail(err, "reading the source file")
	}
	if _, err := out.Write(buf); err != nil {
		return nil, fail(err, "writing the copy")
	}
	if err := out.Close(); err != nil {
		return nil, fail(err, "writing the copy")
	}
	r.Sent = r.Size
	if j.Progress != nil {
		j.Progress(r.Size)
	}
	if sum == nil {
		return nil, nil
	}
	sum.Write(buf)
	return sum.Sum(nil), nil
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

// counter counts the bytes of a copy as they pass, and hashes them.
type counter struct {
	n       atomic.Int64
	stalled atomic.Bool
	report  func(int64)
	sum     hash.Hash
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
// (srcSum when the copy computed it).
func (j *Job) verify(src, dst *sftp.Client, tmp string, size int64, srcSum []byte) error {
	fi, err := dst.Stat(tmp)
	if err != nil {
		return fail(err, "reading the copy")
	}
	if fi.Size() != size {
		return &Error{Reason: v1alpha1.ReasonVerificationFailed, Err: fmt.Errorf("the copy of %s holds %d bytes, not %d", j.Src, fi.Size(), size)}
	}
	if j.Verify != v1alpha1.VerifySHA256 {
		return nil
	}
	if srcSum == nil {
		if srcSum, err = digest(src, j.Src); err != nil {
			return fail(err, "reading the source file")
		}
	}
	dstSum, err := digest(dst, tmp)
	if err != nil {
		return fail(err, "reading the copy")
	}
	if !bytes.Equal(srcSum, dstSum) {
		return &Error{Reason: v1alpha1.ReasonVerificationFailed, Err: fmt.Errorf("the copy of %s differs from it (SHA-256)", j.Src)}
	}
	return nil
}

// digest is the SHA-256 of name's content.
func digest(c *sftp.Client, name string) ([]byte, error) {
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

// rename moves tmp to target; replace replaces an existing target in one
// step where the server offers posix-rename, and otherwise removes it
// first.
func rename(c *sftp.Client, tmp, target string, replace bool) error {
	if !replace {
		return c.Rename(tmp, target) // SFTP's rename refuses an existing target
	}
	if _, ok := c.HasExtension("posix-rename@openssh.com"); ok {
		return c.PosixRename(tmp, target)
	}
	if err := c.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return c.Rename(tmp, target)
}

func exists(c *sftp.Client, name string) bool {
	_, err := c.Lstat(name)
	return err == nil
}

func removeSource(c *sftp.Client, name string) error {
	if err := c.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(err, "removing the source file (its copy is in place)")
	}
	return nil
}

// Folders is the folders a transfer's copies know exist at the
// destination, so that each is made (and asked about) once.
type Folders struct {
	mu   sync.Mutex
	made map[string]bool
}

func (f *Folders) make(c *sftp.Client, dir string) error {
	if f == nil {
		return c.MkdirAll(dir)
	}
	f.mu.Lock()
	known := f.made[dir]
	f.mu.Unlock()
	if known {
		return nil
	}
	if err := c.MkdirAll(dir); err != nil {
		return err
	}
	f.mu.Lock()
	if f.made == nil {
		f.made = map[string]bool{}
	}
	f.made[dir] = true
	f.mu.Unlock()
	return nil
}
