package commands

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/gateway/sftpdir"
)

// FileInfo describes a file in results.
type FileInfo struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Type     string    `json:"type"`
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"`
	Modified time.Time `json:"modified"`
}

// StatResult is the result of stat.
type StatResult struct {
	FileInfo
	UID      uint32    `json:"uid"`
	GID      uint32    `json:"gid"`
	Accessed time.Time `json:"accessed"`
}

func fileType(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// unixMode is a mode as "ls -l" users know it: octal permissions with the
// setuid, setgid and sticky bits.
func unixMode(m os.FileMode) string {
	bits := uint32(m.Perm())
	for flag, bit := range map[os.FileMode]uint32{os.ModeSetuid: 0o4000, os.ModeSetgid: 0o2000, os.ModeSticky: 0o1000} {
		if m&flag != 0 {
			bits |= bit
		}
	}
	return fmt.Sprintf("%04o", bits)
}

func info(fs *FS, p string, fi os.FileInfo) FileInfo {
	return FileInfo{
		Name:     path.Base(fs.Rel(p)),
		Path:     fs.Rel(p),
		Type:     fileType(fi.Mode()),
		Size:     fi.Size(),
		Mode:     unixMode(fi.Mode()),
		Modified: fi.ModTime().UTC(),
	}
}

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

func list(fs *FS, req *listRequest) (any, error) {
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
	err = fs.Dirs.Each(target, func(fi os.FileInfo) error {
		if fi.Name() <= req.After || isTemp(fi.Name()) {
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
	if err != nil {
		return nil, notADirectory(fs, err, target)
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
	if failure := serverFailure(err, fs.Rel(target)); SessionFailed(failure) {
		return failure
	}
	switch fi, statErr := fs.Client.Stat(target); {
	case SessionFailed(statErr):
		return statErr
	case statErr == nil && !fi.IsDir():
		return fail("not_a_directory", fxNotADirectory, fs.Rel(target)+": not a directory")
	}
	return serverFailure(err, fs.Rel(target))
}

type statRequest struct {
	Path           string `json:"path"`
	FollowSymlinks *bool  `json:"followSymlinks,omitempty"`
}

func stat(fs *FS, req *statRequest) (any, error) {
	follow := req.FollowSymlinks == nil || *req.FollowSymlinks
	resolve, statFn := fs.Resolve, fs.Client.Stat
	if !follow {
		resolve, statFn = fs.ResolveParent, fs.Client.Lstat
	}
	target, err := resolve(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := statFn(target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	res := StatResult{FileInfo: info(fs, target, fi)}
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		res.UID, res.GID = st.UID, st.GID
		res.Accessed = time.Unix(int64(st.Atime), 0).UTC()
	}
	return res, nil
}

type pathRequest struct {
	Path string `json:"path"`
}

func exists(fs *FS, req *pathRequest) (any, error) {
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	_, err = fs.Client.Stat(target)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, serverFailure(err, fs.Rel(target))
}

// PathResult is the result of commands that act on one path.
type PathResult struct {
	Path string `json:"path"`
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
		err = fs.Client.MkdirAll(target)
	} else if err = fs.Client.Mkdir(target); err != nil {
		switch _, statErr := fs.Client.Lstat(target); {
		case SessionFailed(statErr):
			return nil, statErr
		case statErr == nil:
			return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(target)+": already exists")
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
	fi, err := fs.Client.Lstat(target)
	switch {
	case err != nil:
		return nil, serverFailure(err, fs.Rel(target))
	case !fi.IsDir():
		return nil, fail("not_a_directory", fxNotADirectory, fs.Rel(target)+": not a directory; use unlink")
	case req.Recursive:
		err = fs.removeTree(target)
	default:
		err = fs.Client.RemoveDirectory(target)
		if err != nil {
			switch names, readErr := fs.names(target, 1); {
			case SessionFailed(readErr):
				return nil, readErr
			case readErr == nil && len(names) > 0:
				return nil, fail("not_empty", fxDirNotEmpty, fs.Rel(target)+`: directory is not empty; use "recursive": true`)
			}
		}
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

// removeTree removes the tree at p. It first moves the tree aside under a
// temporary name, so that a removal cut off halfway leaves nothing half
// removed under p: the next session removes the rest. Where the server
// refuses to remove a part, what is left goes back under p.
func (fs *FS) removeTree(p string) error {
	tmp := tempName(path.Dir(p))
	if err := fs.Client.Rename(p, tmp); err != nil {
		return err
	}
	err := fs.removeAll(tmp, nil)
	switch {
	case err == nil:
		return nil
	case SessionFailed(err):
		// The rest goes in the background, a part at a time.
		if fs.Leftovers != nil {
			fs.Leftovers.Background(fs.onSession(func(fs *FS) error {
				budget := removeBatch
				return ignoreMissing(fs.removeAll(tmp, &budget))
			}))
		}
	default:
		fs.undo(func(fs *FS) error { return ignoreMissing(fs.Client.Rename(tmp, p)) }, nil)
	}
	return err
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
	fi, err := fs.Client.Lstat(p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fs.Client.Remove(p)
	}
	// A batch at a time, each read afresh: memory stays bounded, and
	// nothing is removed under an open directory handle. Where the server
	// allows no second channel, a directory is read whole anyway: then all
	// at once, rather than whole again for each batch.
	for {
		batch := removeBatch
		if fs.Dirs.ReadsWhole() {
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
			return fs.Client.RemoveDirectory(p)
		}
	}
}

// removeBatch is how many entries removeAll reads before removing them.
const removeBatch = 256

// names returns up to n names of the entries of dir.
func (fs *FS) names(dir string, n int) ([]string, error) {
	var names []string
	err := fs.Dirs.Each(dir, func(fi os.FileInfo) error {
		names = append(names, fi.Name())
		if len(names) == n {
			return sftpdir.Stop
		}
		return nil
	})
	return names, err
}

func unlink(fs *FS, req *pathRequest) (any, error) {
	target, err := fs.ResolveParent(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := fs.Client.Lstat(target)
	if err == nil && fi.IsDir() {
		return nil, fail("is_a_directory", fxFileIsADirectory, fs.Rel(target)+": is a directory; use rmdir")
	}
	if err == nil {
		err = fs.Client.Remove(target)
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

type pingRequest struct{}

// PingResult is the result of ping.
type PingResult struct {
	OK            bool    `json:"ok"`
	RoundTripMs   float64 `json:"roundTripMs"`
	ServerVersion string  `json:"serverVersion"`
}

func ping(fs *FS, _ *pingRequest) (any, error) {
	start := time.Now()
	if _, err := fs.Client.Stat(fs.Root); err != nil {
		return nil, serverFailure(err, "/")
	}
	return PingResult{
		OK:            true,
		RoundTripMs:   float64(time.Since(start).Microseconds()) / 1000,
		ServerVersion: fs.ServerVersion,
	}, nil
}
