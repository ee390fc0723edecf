// Package commands implements the gateway's commands on an SFTP session,
// confined to a connection's root directory. Each command is a typed
// request, decoded strictly from JSON, and a typed result.
package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/gateway/pacing"
	"github.com/sftpgate/sftpgate/internal/files"
)

// Env is what one request brings to the commands it runs, made once per
// request by the gateway, whatever session it runs on.
type Env struct {
	// Memory is the request's share of the gateway's memory budget:
	// commands hold what they read into memory against it. Nil holds
	// nothing.
	Memory *budget.Ledger
	// Pace paces the request's large transfers, so that they yield to
	// small requests. Nil does not pace.
	Pace *pacing.Stream
	// Root is the absolute, resolved root directory (status.rootPath).
	Root string
	// Scope, when set, is where below Root the request may go (an API
	// key's paths, from Scope): every path it names, and where the server
	// resolves it, must be one of them or below one.
	Scope []string
	// Leftovers, when set, keeps work for later sessions to the server:
	// undoing what an operation cut off by a broken session left half
	// done.
	Leftovers Leftovers
	// Named, when set, is told the paths a JSON request names (its path,
	// from and to, in that order) once it is decoded: for its audit
	// record, without decoding the body again.
	Named func(paths []string)
}

// FS is the request's file system on session s.
func (e *Env) FS(s files.Session) *FS {
	return &FS{Env: e, Files: s.FS(), ServerVersion: s.Version()}
}

// FS is a session's files confined to Root: every path a request names is
// resolved inside it, and one that leads outside through a symlink on the
// server is refused.
type FS struct {
	*Env
	Files files.FS
	// ServerVersion is what the server says it is (an SSH version
	// string), for ping.
	ServerVersion string
}

// NewFS is the file system of a session, confined to root, for work
// outside a request.
func NewFS(s files.Session, root string) *FS {
	return (&Env{Root: root}).FS(s)
}

// bulk writes a large transfer to w, paced, until stopped says the
// request's client went away (its context's Err).
type bulk struct {
	stopped func() error
	fs      *FS
	w       io.Writer
}

func (b bulk) Write(p []byte) (int, error) {
	if err := b.stopped(); err != nil {
		return 0, err
	}
	return b.fs.Pace.Writer(b.w).Write(p)
}

// Errors of path resolution.
var (
	ErrNoPath      = &BadRequest{Field: "path", Message: "is required"}
	ErrNULInPath   = &BadRequest{Field: "path", Message: "contains a NUL byte"}
	ErrOutsideRoot = &BadRequest{Field: "path", Message: "leads outside the connection's root directory"}
	// ErrDanglingSymlink is a symlink whose target does not exist: where it
	// leads cannot be checked.
	ErrDanglingSymlink = &BadRequest{Field: "path", Message: "is a symlink whose target does not exist"}
)

// Lexical maps a client path to a server path inside root, without asking
// the server: ".." cannot climb above root, and absolute paths are taken
// relative to it.
func Lexical(root, p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", ErrNULInPath
	}
	return path.Join(root, path.Clean("/"+p)), nil
}

// lexical is Lexical for a path a request must give, which must be in
// the request's scope.
func (fs *FS) lexical(p string) (string, error) {
	if p == "" {
		return "", ErrNoPath
	}
	target, err := Lexical(fs.Root, p)
	if err == nil && !fs.inScope(target) {
		err = ErrPathNotAllowed
	}
	return target, err
}

// Resolve returns the server path for p, which is required, after checking
// on the server that p (or, while it does not exist yet, its nearest
// existing ancestor) does not resolve outside the root through a symlink.
// Below "/" there is no outside, and nothing to check.
func (fs *FS) Resolve(p string) (string, error) {
	target, err := fs.lexical(p)
	if err != nil {
		return "", err
	}
	return target, fs.checkReal(target, "")
}

// ResolveParent is Resolve for operations on a name itself rather than
// what it points to (lstat, unlink, readlink): only the directory holding
// it must resolve inside the root.
func (fs *FS) ResolveParent(p string) (string, error) {
	target, err := fs.lexical(p)
	if err != nil || target == fs.Root {
		return target, err
	}
	return target, fs.checkReal(path.Dir(target), path.Base(target))
}

// Checked runs op on p's server path with Resolve's check of it
// (ResolveParent's, with parent) asked at once: one round trip where one
// after the other would be two, which tells over a long link. Only for
// operations that neither change anything on the server nor can hold it
// up (a stat): when the check refuses, op has run anyway, and the caller
// drops what it got. Never an open: a single-threaded server blocks on
// opening a FIFO (openRead). op is not run for a path refused before any
// request.
func (fs *FS) Checked(p string, parent bool, op func(target string)) (string, error) {
	target, err := fs.lexical(p)
	if err != nil {
		return "", err
	}
	if !fs.confined() || parent && target == fs.Root {
		// Nothing to check: as Resolve and ResolveParent.
		op(target)
		return target, nil
	}
	dir, name := target, ""
	if parent {
		dir, name = path.Dir(target), path.Base(target)
	}
	var ran sync.WaitGroup
	ran.Go(func() { op(target) })
	err = fs.checkReal(dir, name)
	ran.Wait()
	return target, err
}

// checkReal checks where the server resolves p: inside the root, and,
// with name joined to it (a name in directory p, itself not followed), in
// the request's scope.
func (fs *FS) checkReal(p, name string) error {
	_, err := fs.realIn(p, name)
	return err
}

// realIn is where the server resolves p, with name joined to it, once
// checked to be inside the root and the request's scope; "" where nothing
// is confined. A path that does not exist yet resolves as its nearest
// existing ancestor does.
func (fs *FS) realIn(p, name string) (string, error) {
	if !fs.confined() {
		// Wherever a path leads on the server, it is inside "/": asking
		// would only cost round trips (one of a small write's four).
		return "", nil
	}
	for {
		real, err := fs.Files.RealPath(p)
		switch {
		case err == nil:
			real = path.Join(path.Clean(real), name)
			return real, fs.inside(real)
		case !errors.Is(err, os.ErrNotExist) && !isNoSuchFile(err),
			p == fs.Root || !within(fs.Root, p):
			return "", serverFailure(err, fs.Rel(p))
		}
		// Some servers resolve only existing paths. A name that exists but
		// does not resolve is a dangling symlink, which a write would
		// follow wherever it points: refuse it.
		switch _, lerr := fs.Files.Lstat(p); {
		case lerr == nil:
			return "", ErrDanglingSymlink
		case files.SessionFailed(lerr):
			return "", lerr
		}
		// Check the nearest ancestor that exists, where a new file lands.
		p, name = path.Dir(p), path.Join(path.Base(p), name)
	}
}

// isNoSuchFile covers servers that answer realpath of a missing path with
// a plain failure status rather than "no such file".
func isNoSuchFile(err error) bool {
	code, ok := files.Status(err)
	return ok && code == files.FxNoSuchFile
}

// Rel is a server path as the client sees it: relative to the root, with
// a leading slash.
func (fs *FS) Rel(p string) string {
	rel := strings.TrimPrefix(p, strings.TrimSuffix(fs.Root, "/"))
	if rel == "" {
		return "/"
	}
	return rel
}

// BadRequest is a request the gateway refuses before any SFTP operation.
type BadRequest struct {
	Field   string
	Message string
}

func (e *BadRequest) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Message) }
