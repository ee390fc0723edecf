package commands

// Directories: list, mkdir, rmdir.

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Listing limits: a page holds at most this many entries.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

type listRequest struct {
	Path  string `json:"path"`
	Limit int    `json:"limit,omitempty"`
	// After continues a listing: entries whose name sorts after it.
	After string `json:"after,omitempty"`
}

// ListResult is the result of list: entries sorted by name, and Next,
// the After of the next page, when there is one.
type ListResult struct {
	Path    string     `json:"path"`
	Entries []FileInfo `json:"entries"`
	Next    string     `json:"next,omitempty"`
}

func list(ctx context.Context, fs *FS, req *listRequest) (any, error) {
	if req.Path == "" {
		req.Path = "/"
	}
	limit := req.Limit
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return nil, &BadRequest{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d", MaxListLimit)}
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	// Keep the limit smallest names after req.After (and whether there are
	// more) while the directory streams past: a page costs memory for its
	// own entries only, however large the directory.
	var (
		page = &byNameDesc{}
		more bool
	)
	err = fs.Files.Each(target, func(fi os.FileInfo) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if fi.Name() <= req.After || tempname.Is(fi.Name()) {
			return nil
		}
		if page.Len() == limit {
			more = true
			if fi.Name() >= (*page)[0].Name() {
				return nil
			}
			heap.Pop(page)
		}
		heap.Push(page, fi)
		return nil
	})
	if stop := ctx.Err(); stop != nil {
		return nil, stop
	}
	if big, ok := errors.AsType[*files.TooLargeError](err); ok {
		return nil, tooLarge(fs, big)
	}
	if err != nil {
		return nil, notADirectory(fs, err, target)
	}
	if page.Len() == 0 && files.HasPrefixFolders(fs.Files) {
		// Nothing under the prefix: a folder only if it is one.
		if err := isFolder(fs, target); err != nil {
			return nil, err
		}
	}
	entries := []os.FileInfo(*page)
	slices.SortFunc(entries, func(a, b os.FileInfo) int { return strings.Compare(a.Name(), b.Name()) })
	res := ListResult{Path: fs.Rel(target), Entries: make([]FileInfo, 0, len(entries))}
	for _, fi := range entries {
		res.Entries = append(res.Entries, info(fs, path.Join(target, fi.Name()), fi))
	}
	if more {
		res.Next = entries[len(entries)-1].Name()
	}
	return res, nil
}

// isFolder refuses target unless it is a folder: missing, or a file.
func isFolder(fs *FS, target string) error {
	fi, err := fs.Files.Stat(target)
	switch {
	case err != nil:
		return serverFailure(err, fs.Rel(target))
	case !fi.IsDir():
		return fail("not_a_directory", files.FxNotADirectory, fs.Rel(target)+": is not a directory")
	}
	return nil
}

// byNameDesc is a max-heap of entries by name.
type byNameDesc []os.FileInfo

func (h byNameDesc) Len() int           { return len(h) }
func (h byNameDesc) Less(i, j int) bool { return h[i].Name() > h[j].Name() }
func (h byNameDesc) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byNameDesc) Push(x any)        { *h = append(*h, x.(os.FileInfo)) } //nolint:forcetypeassert // heap.Push gets what we push
func (h *byNameDesc) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}

// notADirectory says so when a directory operation met a file: SFTP v3
// servers answer it with "no such file" (OpenSSH) or a generic failure.
func notADirectory(fs *FS, err error, target string) error {
	if failure := serverFailure(err, fs.Rel(target)); files.SessionFailed(failure) {
		return failure
	}
	switch fi, statErr := fs.Files.Stat(target); {
	case files.SessionFailed(statErr):
		return statErr
	case statErr == nil && !fi.IsDir():
		return fail("not_a_directory", files.FxNotADirectory, fs.Rel(target)+": not a directory")
	}
	return serverFailure(err, fs.Rel(target))
}

type mkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

func mkdir(fs *FS, req *mkdirRequest) (any, error) {
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if req.Parents {
		err = fs.Files.MkdirAll(target)
	} else if err = fs.Files.Mkdir(target); err != nil {
		switch _, statErr := fs.Files.Lstat(target); {
		case files.SessionFailed(statErr):
			return nil, statErr
		case statErr == nil:
			return nil, fail("already_exists", files.FxFileAlreadyExists, fs.Rel(target)+": already exists")
		}
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

type rmdirRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

func rmdir(fs *FS, req *rmdirRequest) (any, error) {
	target, err := fs.ResolveParent(req.Path)
	if err != nil {
		return nil, err
	}
	if target == fs.Root {
		return nil, &BadRequest{Field: "path", Message: "is the connection's root directory, which cannot be removed"}
	}
	fi, err := fs.Files.Lstat(target)
	switch {
	case err != nil:
		return nil, serverFailure(err, fs.Rel(target))
	case !fi.IsDir():
		return nil, fail("not_a_directory", files.FxNotADirectory, fs.Rel(target)+": not a directory; use unlink")
	case req.Recursive:
		err = fs.removeTree(target)
	default:
		err = fs.Files.RemoveDirectory(target)
		if err != nil {
			names, readErr := fs.names(target, 1)
			// Too large to read whole is not empty either.
			_, full := errors.AsType[*files.TooLargeError](readErr)
			switch {
			case files.SessionFailed(readErr):
				return nil, readErr
			case readErr == nil && len(names) > 0, full:
				return nil, fail("not_empty", files.FxDirNotEmpty, fs.Rel(target)+`: directory is not empty; use "recursive": true`)
			}
		}
	}
	if big, ok := errors.AsType[*files.TooLargeError](err); ok {
		return nil, tooLarge(fs, big)
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

// tooLarge is the failure of a directory too large to read whole (a
// *files.TooLargeError), named as the client sees it. It has no SFTP
// status: the server refused nothing.
func tooLarge(fs *FS, err *files.TooLargeError) *Failure {
	named := *err
	named.Dir = fs.Rel(err.Dir)
	return &Failure{Code: "too_large", Message: named.Error()}
}

// removeTree removes the tree at p. It first moves the tree aside under a
// temporary name, so that a removal cut off halfway leaves nothing half
// removed under p: the next session removes the rest. Where the server
// refuses to remove a part, what is left goes back under p.
//
// A tree with a directory too large to read whole (where the server allows
// one channel, see sftpdir.Limits) is refused before anything in it is
// removed: it goes back under p untouched, and the error, a
// *files.TooLargeError, names that directory under p. (Only a tree that
// grows under its temporary name during the removal, or a server that
// refuses a channel it allowed at the check, could still meet such a
// directory midway; what is left then goes back, as for any refusal.)
func (fs *FS) removeTree(p string) error {
	if files.HasPrefixFolders(fs.Files) {
		// A folder of keys cannot be moved aside in one step: its objects
		// are removed where they are, and a removal cut off halfway
		// leaves the rest there.
		return fs.removeAll(p, nil)
	}
	tmp := tempname.In(path.Dir(p))
	if err := fs.Files.Rename(p, tmp); err != nil {
		return err
	}
	putBack := func(fs *FS) error { return files.IgnoreMissing(fs.Files.Rename(tmp, p)) }
	if err := fs.readable(tmp); err != nil {
		// Nothing is removed yet: the tree goes back whole, now or, when
		// the session broke, with the next one.
		fs.undo(putBack, err)
		return underName(err, tmp, p)
	}
	err := fs.removeAll(tmp, nil)
	switch {
	case err == nil:
		return nil
	case files.SessionFailed(err):
		// The rest goes in the background, a part at a time.
		if fs.Leftovers != nil {
			fs.Leftovers.Background(fs.onSession(func(fs *FS) error {
				budget := removeBatch
				return files.IgnoreMissing(fs.removeAll(tmp, &budget))
			}))
		}
	default:
		fs.undo(putBack, nil)
	}
	return underName(err, tmp, p)
}

// readable checks, where the Reader reads directories whole and so within
// its limits, that it can read every directory of the tree at p, without
// which removeAll would stop midway. It trusts readdir's attributes for
// which entries are directories (removeAll lstat's each one): a symlink a
// server reports as a directory costs a read, never a removal. Elsewhere
// it reads nothing.
func (fs *FS) readable(p string) error {
	switch capped, err := fs.Files.ListsCapped(); {
	case err != nil:
		return err
	case !capped:
		return nil
	}
	var dirs []string
	err := fs.Files.Each(p, func(fi os.FileInfo) error {
		mode := fi.Mode()
		if mode == 0 {
			// No attributes from the server: ask for the type.
			st, err := fs.Files.Lstat(path.Join(p, fi.Name()))
			if err != nil {
				return files.IgnoreMissing(err)
			}
			mode = st.Mode()
		}
		if mode.IsDir() {
			dirs = append(dirs, fi.Name())
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range dirs {
		if err := files.IgnoreMissing(fs.readable(path.Join(p, name))); err != nil {
			return err
		}
	}
	return nil
}

// underName names a directory too large to read, found under the
// temporary name tmp, by its place under p, where the client knows it.
func underName(err error, tmp, p string) error {
	big, ok := errors.AsType[*files.TooLargeError](err)
	if !ok {
		return err
	}
	named := *big
	if rest, found := strings.CutPrefix(big.Dir, tmp); found {
		named.Dir = p + rest
	}
	return &named
}

// removeAll removes a tree. Unlike pkg/sftp's RemoveAll it lstat's every
// entry rather than trusting readdir's attributes, so a symlink to a
// directory is unlinked, never followed, whatever the server reports.
// With a budget, it removes at most that many names, and then returns
// ErrNotDone.
func (fs *FS) removeAll(p string, budget *int) error {
	if budget != nil {
		if *budget == 0 {
			return ErrNotDone
		}
		*budget--
	}
	fi, err := fs.Files.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fs.Files.Remove(p)
	}
	// A batch at a time, each read afresh: memory stays bounded, and
	// nothing is removed under an open directory handle. Where the server
	// allows no second channel, a directory is read whole anyway: then all
	// at once, rather than whole again for each batch.
	for {
		batch := removeBatch
		if fs.Files.ListsWhole() {
			batch = math.MaxInt
		}
		names, err := fs.names(p, batch)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := fs.removeAll(path.Join(p, name), budget); err != nil {
				return err
			}
		}
		if len(names) < batch {
			return fs.Files.RemoveDirectory(p)
		}
	}
}

// removeBatch is how many entries removeAll reads before removing them.
const removeBatch = 256

// names returns up to n names of the entries of dir.
func (fs *FS) names(dir string, n int) ([]string, error) {
	var names []string
	err := fs.Files.Each(dir, func(fi os.FileInfo) error {
		names = append(names, fi.Name())
		if len(names) == n {
			return files.Stop
		}
		return nil
	})
	return names, err
}
