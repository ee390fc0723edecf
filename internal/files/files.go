// Package files is the one way every component touches a file on a
// server: the interface the gateway's commands, the watches and the
// transfers work through, the errors it answers with, and what is built
// on it once for every backend (replacing a file without losing the one
// replaced, telling a broken session from a refused request).
//
// A backend is a package of its own that implements FS; internal/sftpfs
// is the SFTP one, and the only package besides the SFTP dialer and
// directory reader that may speak SFTP (a test in hack/manifests says
// so).
package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"
)

// FS is a session's view of one server's files. Paths are the server's,
// absolute; confining them to a connection's root is the caller's work.
// Errors match fs.ErrNotExist and fs.ErrPermission where they mean that
// (whatever the backend's code for them); another refusal the server gave
// a code for, and a connection lost or closed, is a *StatusError.
type FS interface {
	Stat(name string) (fs.FileInfo, error)
	// Lstat does not follow a symlink at name.
	Lstat(name string) (fs.FileInfo, error)
	ReadLink(name string) (string, error)
	// RealPath is name with every symlink and ".." resolved by the server.
	RealPath(name string) (string, error)

	// Each calls fn for each entry of dir in the server's order, a batch
	// at a time. An error of fn ends the listing and is returned, but
	// Stop, which ends it with none. A directory past the backend's bounds
	// for listing is a *TooLargeError. Every name fn gets is an EntryName:
	// the backend leaves out any other a server sends.
	Each(dir string, fn func(fs.FileInfo) error) error
	// ListsWhole reports whether Each now reads directories whole (the
	// server allowed no more): who reads a directory in parts should read
	// it at once.
	ListsWhole() bool
	// ListsCapped, having asked the server if need be, reports whether Each
	// reads directories whole and so within its bounds: who is about to
	// change a tree can check first that every directory of it fits.
	ListsCapped() (bool, error)

	Open(name string) (File, error)
	// OpenFile opens name with os.OpenFile's flags.
	OpenFile(name string, flag int) (File, error)
	Truncate(name string, size int64) error
	Chmod(name string, mode fs.FileMode) error
	Chtimes(name string, atime, mtime time.Time) error
	Symlink(target, link string) error
	Remove(name string) error
	// Rename refuses a to that exists; ReplaceInto replaces it.
	Rename(from, to string) error
	// PosixRename replaces to in one step, and is ErrUnsupported where
	// HasPosixRename is false.
	PosixRename(from, to string) error
	HasPosixRename() bool
	Mkdir(name string) error
	MkdirAll(name string) error
	RemoveDirectory(name string) error
	// Space is the room of the file system holding name, or
	// ErrUnsupported.
	Space(name string) (Space, error)
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	// WriteTo reads ahead with many requests in flight.
	io.WriterTo
	io.Writer
	io.Seeker
	io.Closer
	Name() string
	Stat() (fs.FileInfo, error)
	Chmod(mode fs.FileMode) error
	// ReadFromWithConcurrency writes what r gives from the file's offset
	// with up to concurrency writes in flight (0: the backend's default).
	// When it fails on a file written in place (SFTP), the offset is left
	// where the first write that failed began: all before it was written.
	ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error)
}

// EntryName reports whether a server's name can be one of a directory's
// own entries: one path element, so that joined to the directory it names
// a file in it. Not "." or "..", and none a broken or hostile server could
// send that would lead elsewhere or be cut short (empty, with a slash or a
// NUL byte).
func EntryName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Owned is the fs.FileInfo.Sys of a backend that knows a file's owner and
// last access.
type Owned interface {
	Owner() (uid, gid uint32)
	Accessed() time.Time
}

// Tagged is the fs.FileInfo.Sys of a backend that tags each version of a
// file's content (an object's ETag): a change shows in the tag even when
// the size and the time, in whole seconds, stay.
type Tagged interface {
	Tag() string
}

// Versioned is a File of a backend that tags versions: it knows, without
// asking the server again, the version it was opened at (its reads are
// held to it).
type Versioned interface {
	OpenedInfo() fs.FileInfo
}

// ListsWriteTimes is an FS whose listings give when a file was written,
// not the time it keeps as its own (an object store keeps that apart, and
// only a stat gives it).
type ListsWriteTimes interface {
	ListsWriteTimes()
}

// Modeless is an FS that keeps no file modes (FTP, an object store): a
// copy there does not carry its source's, and a mode asked for is
// refused as unsupported.
type Modeless interface {
	Modeless()
}

// WritesInOrder is an FS whose files are written at their end only, one
// stream each (FTP): what a write cut off left is a prefix of what was
// sent, none of it out of order.
type WritesInOrder interface {
	WritesInOrder()
}

// PrefixFolders is an FS whose folders are key prefixes (an object
// store): a listing of a missing folder, or of a file, is empty rather
// than refused, and a write needs no folder to write in. Who needs the
// difference asks with a stat.
type PrefixFolders interface {
	PrefixFolders()
}

// HasPrefixFolders reports whether f's folders are key prefixes.
func HasPrefixFolders(f FS) bool {
	_, ok := f.(PrefixFolders)
	return ok
}

// ListsCoarseTimes is an FS whose listings may give a file's time less
// precisely than a stat does (FTP's LIST: to the minute, or to the day
// for older files): who compares a listed time with a stat's, or with
// another server's, stats the file first. It reports whether the
// session's listings are coarse.
type ListsCoarseTimes interface {
	ListsCoarseTimes() bool
}

// CoarseTimes reports whether f's listings give coarse times.
func CoarseTimes(f FS) bool {
	c, ok := f.(ListsCoarseTimes)
	return ok && c.ListsCoarseTimes()
}

// Space is a file system's room, as statvfs reports it.
type Space struct {
	// BlockSize is the unit of the block counts (statvfs's f_frsize).
	BlockSize                       uint64
	Blocks, BlocksFree, BlocksAvail uint64
	Files, FilesFree                uint64
}

// Stop ends a listing without an error when Each's fn returns it.
var Stop = errors.New("stop listing") //nolint:staticcheck // named like fs.SkipAll, which callbacks return too

// ErrUnsupported is an operation the backend or server does not offer.
var ErrUnsupported = &StatusError{Code: FxOpUnsupported, Err: errors.ErrUnsupported}

// StatusError is a request the server refused, with its SSH_FX status code
// (draft-ietf-secsh-filexfer-13): the codes are SFTP's, and a backend
// that speaks another protocol answers with the code that means the same.
type StatusError struct {
	Code uint32
	// Err is the backend's own error, which errors.Is and As reach.
	Err error
}

func (e *StatusError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *StatusError) Unwrap() error { return e.Err }

// Status is the status code of the refusal err, if it is one.
func Status(err error) (uint32, bool) {
	var s *StatusError
	if errors.As(err, &s) {
		return s.Code, true
	}
	return 0, false
}

// TooLargeError is a directory read whole that passed one of the
// backend's bounds; the read stopped there.
type TooLargeError struct {
	// Dir is the directory as Each was given it.
	Dir string
	// Bytes tells which bound: the bytes of its listing if true, else its
	// entries.
	Bytes bool
	// Max is the bound passed.
	Max int64
	// Why says, in the backend's words, why the directory was read whole
	// and what would let it be read in parts.
	Why string
}

func (e *TooLargeError) Error() string {
	what, flag := fmt.Sprintf("has more than %d entries", e.Max), "--max-directory-entries"
	if e.Bytes {
		what, flag = fmt.Sprintf("takes more than %d bytes to list", e.Max), "--max-directory-bytes"
	}
	why := ""
	if e.Why != "" {
		why = " " + e.Why + ","
	}
	return fmt.Sprintf("%s: %s, more than this gateway reads at once%s or raise %s", e.Dir, what, why, flag)
}
