package commands

import (
	"errors"
	"os"
	"path"
	"sync"

	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Writes never destroy what they replace, and never show a file half
// written: a file is written under a temporary name beside it and renamed
// into place once complete. What an operation cut off by a broken
// session leaves behind (a temporary file, a file moved aside, a partial
// new file) is cleaned up by the next session to the same server (Undo).

// Undo is work left for the next session to the same server: undoing what
// an operation that a broken session cut off left half done. It must be
// safe to run whatever happened since. It returns ErrNotDone when it did a
// part of its work, to run again with a later session.
type Undo func(fs *FS) error

// ErrNotDone is an Undo that has more to do.
var ErrNotDone = pool.ErrNotDone

// Leftovers keeps undo work for later sessions to the same server: the
// connection's pool (*pool.Pool).
type Leftovers interface {
	// Later runs fn on the next operation's session, before it.
	Later(fn func(files.Session) error)
	// Background runs fn apart from requests, again while it returns
	// ErrNotDone.
	Background(fn func(files.Session) error)
}

// undo runs u, which undoes what an operation failing with cause left, now
// while the session works, and leaves it to the next session when the
// session broke (then or while u ran).
func (fs *FS) undo(u Undo, cause error) {
	if !files.SessionFailed(cause) {
		if err := u(fs); !files.SessionFailed(err) {
			return
		}
	}
	if fs.Leftovers != nil {
		fs.Leftovers.Later(fs.onSession(u))
	}
}

// onSession is u as work for the pool: run on a later session, as fs's
// root, with a broken session's failure marked as such.
func (fs *FS) onSession(u Undo) func(files.Session) error {
	root := fs.Root
	return func(s files.Session) error {
		return u(NewFS(s, root))
	}
}

// filler writes a file's content into f.
type filler func(f files.File) (int64, error)

// bytesFiller writes data; a large one a paced part at a time (each part
// still many SFTP writes in flight).
func (fs *FS) bytesFiller(data []byte) filler {
	return func(f files.File) (int64, error) {
		written := 0
		for {
			if len(data) > budget.SmallHold {
				if err := fs.Pace.Next(); err != nil {
					return int64(written), err
				}
			}
			n, err := f.Write(data[written:min(len(data), written+filePart)])
			written += n
			if err != nil || written == len(data) {
				return int64(written), err
			}
		}
	}
}

// filePart is the most a large JSON read or write moves in one turn of its
// pacing.
const filePart = 1 << 20

// writeFile writes target through a temporary file beside it, renamed
// into place once complete, so that neither a write cut off nor a refused
// check leaves anything at target. check, when set, is the confinement
// check of target not made yet: it is asked together with the open and a
// look at target, and a new file's close together with its rename, so
// that a new small file costs the round trips of a plain open, write and
// close. A file made anew gets mode, or
// else the server's default; one replaced keeps its permissions unless
// mode is given.
func (fs *FS) writeFile(target string, check func() error, mode *os.FileMode, overwrite bool, fill filler) (int64, error) {
	if target == fs.Root {
		// Its temporary file would be made outside the root.
		return 0, fail("is_a_directory", files.FxFileIsADirectory, fs.Rel(target)+": is a directory")
	}
	if _, whole := fs.Files.(files.Uploader); whole {
		return fs.writeChecked(target, check, mode, overwrite, fill)
	}
	tmp := tempname.In(path.Dir(target))
	if check != nil && !fs.inScope(path.Dir(target)) {
		// A scope's own path: its temporary file is made in the folder
		// above, outside the scope, only once the check allowed it.
		if err := check(); err != nil {
			return 0, err
		}
		check = nil
	}
	removeTmp := removeTemporary(tmp)
	var (
		f                 files.File
		existing          os.FileInfo
		openErr, lstatErr error
		asked             sync.WaitGroup
	)
	// Unlike Checked's operations this one makes something, which a
	// refused check removes; and it cannot hold the server up as an open
	// of a FIFO would: the name is new, made create-exclusive.
	asked.Go(func() { f, openErr = fs.Files.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL) })
	asked.Go(func() { existing, lstatErr = fs.Files.Lstat(target) })
	var err error
	if check != nil {
		err = check()
	}
	asked.Wait()
	switch {
	case err == nil && openErr == nil && lstatErr != nil && !errors.Is(lstatErr, os.ErrNotExist):
		// Not known to be missing: it may be there, to keep.
		err = serverFailure(lstatErr, fs.Rel(target))
	case err == nil:
		err = openErr
	}
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		if openErr == nil || files.SessionFailed(openErr) {
			// Made (or maybe made, its answer lost): nothing stays.
			fs.undo(removeTmp, err)
		}
		return 0, err
	}
	if existing != nil && (!existing.Mode().IsRegular() || !overwrite) {
		// A directory, a symlink written through, or a refusal: the
		// checks of replace, on a file of its own.
		_ = f.Close()
		fs.undo(removeTmp, nil)
		return fs.replaceExisting(target, existing, mode, overwrite, fill)
	}
	if existing != nil && mode == nil {
		mode = fs.keptMode(existing)
	}
	n, err := fillOpen(f, mode, fill)
	if err != nil {
		_ = f.Close()
		fs.undo(removeTmp, err)
		return 0, err
	}
	if existing != nil {
		// Renamed over the file once closed, never before: a close that
		// fails leaves the file as it was.
		if err = f.Close(); err == nil {
			err = fs.settle(tmp, target, target, true)
		}
		if err != nil {
			fs.undo(removeTmp, err)
			return 0, err
		}
		return n, nil
	}
	// A new file: the rename (refused if another client made target
	// meanwhile) goes with the close, since nothing was there to keep.
	// Every write was acknowledged by then: a close that fails after the
	// rename leaves the file in place, whole as far as the server said,
	// and the answer says the close failed.
	var closeErr error
	asked.Go(func() { closeErr = f.Close() })
	err = fs.Files.Rename(tmp, target)
	asked.Wait()
	switch {
	case err != nil && !files.SessionFailed(err) && closeErr == nil:
		err = fs.settle(tmp, target, target, overwrite)
	case err == nil && closeErr != nil:
		return 0, closeErr
	case err == nil:
		return n, nil
	}
	if err == nil {
		err = closeErr
	}
	if err != nil {
		fs.undo(removeTmp, err)
		return 0, err
	}
	return n, nil
}

// removeNew undoes the making of target, a file that did not exist: it
// removes it, unless it is larger than the write could have made it (by
// then another client has written it).
func removeNew(target string, size int64) Undo {
	return func(fs *FS) error {
		fi, err := fs.Files.Lstat(target)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > size {
			return files.IgnoreMissing(err)
		}
		return files.IgnoreMissing(fs.Files.Remove(target))
	}
}

// fillFile fills f, just opened, as fillOpen does, and closes it.
func fillFile(f files.File, mode *os.FileMode, fill filler) (int64, error) {
	n, err := fillOpen(f, mode, fill)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	return n, err
}

// fillOpen applies mode to f, just opened, before any data arrives (so a
// private file is never readable with default permissions), and fills it.
func fillOpen(f files.File, mode *os.FileMode, fill filler) (int64, error) {
	if mode != nil {
		if err := f.Chmod(*mode); err != nil {
			return 0, err
		}
	}
	return fill(f)
}

// replace writes target through a temporary file beside it, renamed into
// place once complete: a write cut off halfway leaves the file as it was.
// A symlink (inside the root) is written through, as an ordinary write
// would.
func (fs *FS) replace(target string, mode *os.FileMode, overwrite bool, fill filler) (int64, error) {
	existing, err := fs.Files.Lstat(target)
	if err != nil {
		existing = nil
	}
	return fs.replaceExisting(target, existing, mode, overwrite, fill)
}

// replaceExisting is replace of target, which lstat described as existing
// (nil: it did not exist).
func (fs *FS) replaceExisting(target string, existing os.FileInfo, mode *os.FileMode, overwrite bool, fill filler) (int64, error) {
	dest, mode, err := fs.destination(target, existing, mode, overwrite)
	if err != nil {
		return 0, err
	}
	if _, whole := fs.Files.(files.Uploader); whole {
		return fs.writeWhole(dest, target, mode, overwrite, fill)
	}
	tmp := tempname.In(path.Dir(dest))
	f, err := fs.Files.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		if files.SessionFailed(err) {
			// Maybe made, its answer lost (chaos seed 2, a link cut).
			fs.undo(removeTemporary(tmp), err)
		}
		return 0, serverFailure(err, fs.Rel(target))
	}
	n, err := fillFile(f, mode, fill)
	if err == nil {
		err = fs.settle(tmp, dest, target, overwrite)
	}
	if err != nil {
		fs.undo(removeTemporary(tmp), err)
		return 0, err
	}
	return n, nil
}

// writeChecked is writeFile where files appear whole: the check first,
// then the write.
func (fs *FS) writeChecked(target string, check func() error, mode *os.FileMode, overwrite bool, fill filler) (int64, error) {
	if check != nil {
		if err := check(); err != nil {
			return 0, err
		}
	}
	if err := fs.folderFor(target); err != nil {
		return 0, err
	}
	existing, err := fs.Files.Lstat(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		existing = nil
	case err != nil:
		return 0, serverFailure(err, fs.Rel(target))
	}
	return fs.replaceExisting(target, existing, mode, overwrite, fill)
}

// writeWhole writes dest on a backend whose files appear whole (an object
// store): straight to its name, completed only once filled, and without
// overwrite only where nothing is there by then.
func (fs *FS) writeWhole(dest, target string, mode *os.FileMode, overwrite bool, fill filler) (int64, error) {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flag |= os.O_EXCL
	}
	f, err := fs.Files.OpenFile(dest, flag)
	if err != nil {
		return 0, serverFailure(err, fs.Rel(target))
	}
	n, err := fillOpen(f, mode, fill)
	if err != nil {
		if !discard(f) {
			_ = f.Close()
		}
		return 0, err
	}
	switch err := f.Close(); {
	case errors.Is(err, os.ErrExist) && !overwrite:
		return 0, fail("already_exists", files.FxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
	case err != nil:
		return 0, serverFailure(err, fs.Rel(target))
	}
	return n, nil
}

// discard ends the writing of f keeping nothing of it, where the backend
// can (an object store's, which complete only at Close), and reports
// whether it could.
func discard(f files.File) bool {
	a, ok := f.(interface{ Abort() error })
	if ok {
		_ = a.Abort()
	}
	return ok
}

// removeTemporary undoes the making of tmp, a temporary file of a name
// no other has.
func removeTemporary(tmp string) Undo {
	return func(fs *FS) error { return files.IgnoreMissing(fs.Files.Remove(tmp)) }
}

// settle renames tmp, complete, over dest, the destination of a write of
// target: without overwrite, a file made at dest meanwhile is kept, and
// the refusal says so.
func (fs *FS) settle(tmp, dest, target string, overwrite bool) error {
	err := fs.rename(tmp, dest, overwrite)
	if err != nil && !overwrite && !files.SessionFailed(err) {
		if _, statErr := fs.Files.Lstat(dest); statErr == nil {
			return fail("already_exists", files.FxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
		}
	}
	return err
}

// destination is where a write of target, which lstat described as
// existing (nil: it did not exist), puts the file: target, or where the
// symlink at target leads (inside the root, checked as the first time). It
// refuses a directory, and an existing file unless overwrite; a file that
// replaces another keeps its permissions unless mode is given.
func (fs *FS) destination(target string, existing os.FileInfo, mode *os.FileMode, overwrite bool) (string, *os.FileMode, error) {
	dest := target
	var statErr error
	switch {
	case existing == nil:
		statErr = os.ErrNotExist
	case existing.Mode()&os.ModeSymlink != 0:
		// Written through: to where it leads, which may not exist yet.
		if real, err := fs.Files.RealPath(target); err == nil {
			dest = path.Clean(real)
			if err := fs.inside(dest); err != nil {
				return "", nil, err
			}
		}
		existing, statErr = fs.Files.Stat(dest)
	}
	switch {
	case statErr == nil && existing.IsDir():
		return "", nil, fail("is_a_directory", files.FxFileIsADirectory, fs.Rel(target)+": is a directory")
	case statErr == nil && !overwrite:
		return "", nil, fail("already_exists", files.FxFileAlreadyExists, fs.Rel(target)+": already exists and overwrite is false")
	case statErr == nil && mode == nil:
		mode = fs.keptMode(existing)
	}
	return dest, mode, nil
}

// keptMode is the mode of fi, a file replaced or copied, for its
// replacement or copy to keep; nil where the server keeps no modes.
func (fs *FS) keptMode(fi os.FileInfo) *os.FileMode {
	if _, modeless := fs.Files.(files.Modeless); modeless {
		return nil
	}
	perm := fi.Mode().Perm()
	return &perm
}

// rename moves from to to; with overwrite it replaces to, which is never
// missing for good (files.ReplaceInto); what a broken session left
// aside is put back, or removed, by the next.
func (fs *FS) rename(from, to string, overwrite bool) error {
	leftover, err := files.ReplaceInto(fs.Files, from, to, overwrite)
	if leftover != nil {
		fs.undo(func(fs *FS) error { return leftover(fs.Files) }, err)
	}
	return err
}
