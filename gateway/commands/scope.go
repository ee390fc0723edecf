package commands

// Where a request may go: the connection's root and, within it, an API
// key's paths (its scope).
//
// The gateway asks the server where a path leads (realpath), checks the
// answer, and then acts on the path in a later round trip: SFTP version 3
// cannot open a path without following its symlinks. So that no request
// can change, between another's check and its operation, where a path
// leads, a confined request (a root below "/", or a key with paths) never
// moves a symlink, neither itself nor inside a directory it renames, and
// makes one only with an absolute target, inside its scope, that leads to
// a file or to a directory with no symlink below it. Symlinks that lead
// out then stay where they are, with every directory above them, and a
// path that led inside the scope when checked still does when used. The
// reasoning, and what it leaves to the server's owner, is in
// docs/gateway.md ("What a key's paths guarantee").

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/sftpgate/sftpgate/internal/files"
)

// within reports whether p is root or below it: p starts with root
// (without its trailing slash) and a slash. Compared in place: the prefix
// made with a slash cost an allocation in every request's check.
func within(root, p string) bool {
	dir := strings.TrimSuffix(root, "/")
	return p == root || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// Scope turns an API key's paths (ApiKey.spec.paths: prefixes below the
// connection's root, such as /incoming/) into server paths below root;
// none is no scope.
func Scope(root string, paths []string) []string {
	scope := make([]string, 0, len(paths))
	for _, p := range paths {
		if s, err := Lexical(root, p); err == nil {
			scope = append(scope, s)
		}
	}
	if len(paths) > 0 && len(scope) == 0 {
		// Paths that all fail to parse allow nothing, not everything.
		return []string{"\x00"}
	}
	return scope
}

// confined reports whether some path on the server is out of the
// request's reach: the root is below "/", or its key has paths.
func (fs *FS) confined() bool {
	return fs.Root != "/" || len(fs.Scope) > 0
}

// inScope reports whether server path p is in the request's scope.
func (e *Env) inScope(p string) bool {
	if len(e.Scope) == 0 {
		return true
	}
	for _, s := range e.Scope {
		if within(s, p) {
			return true
		}
	}
	return false
}

// inside checks a path the server resolved: inside the root and the
// request's scope.
func (e *Env) inside(real string) error {
	switch {
	case !within(e.Root, real):
		return ErrOutsideRoot
	case !e.inScope(real):
		return ErrPathNotAllowed
	}
	return nil
}

// Allows checks again, asking no server, a path an earlier request
// resolved (a resumable upload's target): still inside the root and the
// request's scope, which may have narrowed since.
func (e *Env) Allows(resolved string) error { return e.inside(resolved) }

// ErrPathNotAllowed is a path outside the request's scope.
var ErrPathNotAllowed = &PathNotAllowed{Field: "path"}

// PathNotAllowed is a path outside the paths the request's API key may use
// (ApiKey.spec.paths); Field names the request field.
type PathNotAllowed struct{ Field string }

func (e *PathNotAllowed) Error() string {
	return e.Field + ": is outside the paths this API key may use"
}

// SymlinkNotAllowed is a symlink a confined request may not move or make
// (see the top of this file); Field names the request field.
type SymlinkNotAllowed struct{ Field, Message string }

func (e *SymlinkNotAllowed) Error() string { return e.Field + ": " + e.Message }

// whyConfined ends the messages of SymlinkNotAllowed.
const whyConfined = "under a key limited to paths, or on a connection with a root path, symlinks stay where they are (docs/gateway.md)"

// inField says that err, an error about a path, is about the request's
// field instead of "path".
func inField(err error, field string) error {
	var (
		bad     *BadRequest
		outside *PathNotAllowed
		link    *SymlinkNotAllowed
	)
	switch {
	case errors.As(err, &bad):
		return &BadRequest{Field: field, Message: bad.Message}
	case errors.As(err, &outside):
		return &PathNotAllowed{Field: field}
	case errors.As(err, &link):
		return &SymlinkNotAllowed{Field: field, Message: link.Message}
	}
	return err
}

// MaxLinkCheck bounds the entries a confined request reads below a
// directory it renames or links to, looking for symlinks: past it, the
// rename or symlink is refused rather than the walk grown.
const MaxLinkCheck = 10000

// movable checks that renaming p moves no symlink where the request is
// confined: neither p itself nor anything below it. A missing p passes,
// for the rename to fail as the server says.
func (fs *FS) movable(p string) error {
	if !fs.confined() {
		return nil
	}
	fi, err := fs.Files.Lstat(p)
	switch {
	case files.SessionFailed(err):
		return err
	case err != nil:
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		return &SymlinkNotAllowed{Field: "from", Message: fs.Rel(p) + " is a symlink, which cannot be moved: " + whyConfined}
	case fi.IsDir():
		return fs.noLinksBelow(p, "from", "cannot be moved")
	}
	return nil
}

// linkable checks, where the request is confined, that a symlink may lead
// to target, a server path: it resolves inside the scope, to a file, to a
// directory with no symlink below it, or to nothing yet.
func (fs *FS) linkable(target string) error {
	real, err := fs.realIn(target, "")
	if err != nil || real == "" {
		return inField(err, "target")
	}
	fi, err := fs.Files.Stat(real)
	switch {
	case files.SessionFailed(err):
		return err
	case err != nil || !fi.IsDir():
		return nil
	}
	return fs.noLinksBelow(real, "target", "cannot be linked to")
}

// noLinksBelow checks that nothing below dir is a symlink, reading at most
// MaxLinkCheck entries; what says what is refused otherwise.
func (fs *FS) noLinksBelow(dir, field, what string) error {
	queue, seen := []string{dir}, 0
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		var found string
		err := fs.Files.Each(d, func(fi os.FileInfo) error {
			if seen++; seen > MaxLinkCheck {
				return errTooManyToCheck
			}
			p, mode := path.Join(d, fi.Name()), fi.Mode()
			if mode == 0 {
				// No attributes from the server: ask for the type.
				st, err := fs.Files.Lstat(p)
				if err != nil {
					return files.IgnoreMissing(err)
				}
				mode = st.Mode()
			}
			switch {
			case mode&os.ModeSymlink != 0:
				found = p
				return errFoundLink
			case mode.IsDir():
				queue = append(queue, p)
			}
			return nil
		})
		switch {
		case errors.Is(err, errFoundLink):
			return &SymlinkNotAllowed{Field: field, Message: fmt.Sprintf("%s %s: %s below it is a symlink, and %s",
				fs.Rel(dir), what, fs.Rel(found), whyConfined)}
		case errors.Is(err, errTooManyToCheck):
			return &SymlinkNotAllowed{Field: field, Message: fmt.Sprintf("%s %s: it has more than %d entries below it to check for symlinks, and %s",
				fs.Rel(dir), what, MaxLinkCheck, whyConfined)}
		case err != nil:
			if big, ok := errors.AsType[*files.TooLargeError](err); ok {
				return tooLarge(fs, big)
			}
			return serverFailure(files.IgnoreMissing(err), fs.Rel(d))
		}
	}
	return nil
}

var (
	errFoundLink      = errors.New("found a symlink")
	errTooManyToCheck = errors.New("too many entries to check")
)
