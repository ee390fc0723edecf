package commands

// Symbolic links: symlink, readlink, realpath.

import (
	"errors"
	"os"
	"path"
	"strings"

	"github.com/sftpgate/sftpgate/internal/files"
)

type symlinkRequest struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// SymlinkResult is the result of symlink and readlink.
type SymlinkResult struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// symlink makes path a symlink to target, a path as the client sees it.
// The link stored on the server holds the target's absolute server path,
// inside the root, so that moving it never changes where it leads; where
// the request is confined, the target must lead where linkable allows.
func symlink(fs *FS, req *symlinkRequest) (any, error) {
	if req.Target == "" {
		return nil, &BadRequest{Field: "target", Message: "is required"}
	}
	link, err := fs.ResolveParent(req.Path)
	if err != nil {
		return nil, err
	}
	// A relative target is relative to the link's directory, as on any
	// file system; it too is resolved inside the root.
	target := req.Target
	if !strings.HasPrefix(target, "/") {
		target = path.Join(strings.TrimPrefix(path.Dir(link), strings.TrimSuffix(fs.Root, "/")), target)
	}
	if strings.ContainsRune(target, 0) {
		return nil, &BadRequest{Field: "target", Message: ErrNULInPath.Message}
	}
	resolved, err := Lexical(fs.Root, target)
	if err != nil {
		return nil, err
	}
	if !fs.inScope(resolved) {
		return nil, &PathNotAllowed{Field: "target"}
	}
	if err := fs.linkable(resolved); err != nil {
		return nil, err
	}
	if err := fs.Files.Symlink(resolved, link); err != nil {
		switch _, statErr := fs.Files.Lstat(link); {
		case files.SessionFailed(err), files.SessionFailed(statErr):
			return nil, errors.Join(err, statErr)
		case statErr == nil:
			return nil, fail("already_exists", files.FxFileAlreadyExists, fs.Rel(link)+": already exists")
		}
		return nil, serverFailure(err, fs.Rel(link))
	}
	return SymlinkResult{Path: fs.Rel(link), Target: fs.Rel(resolved)}, nil
}

func readlink(fs *FS, req *pathRequest) (any, error) {
	link, err := fs.ResolveParent(req.Path)
	if err != nil {
		return nil, err
	}
	target, err := fs.Files.ReadLink(link)
	if err != nil {
		switch fi, statErr := fs.Files.Lstat(link); {
		case files.SessionFailed(err), files.SessionFailed(statErr):
			return nil, errors.Join(err, statErr)
		case statErr == nil && fi.Mode()&os.ModeSymlink == 0:
			return nil, fail("failure", files.FxFailure, fs.Rel(link)+": not a symlink")
		}
		return nil, serverFailure(err, fs.Rel(link))
	}
	if !strings.HasPrefix(target, "/") {
		// Relative to where the link really is: its directory may itself
		// be reached through a symlink.
		dir, err := fs.Files.RealPath(path.Dir(link))
		if err != nil {
			return nil, serverFailure(err, fs.Rel(link))
		}
		target = path.Join(dir, target)
	}
	switch target = path.Clean(target); {
	case !within(fs.Root, target):
		// Say nothing of the server outside the root.
		return nil, ErrOutsideRoot
	case !fs.inScope(target):
		return nil, &PathNotAllowed{Field: "target"}
	}
	return SymlinkResult{Path: fs.Rel(link), Target: fs.Rel(target)}, nil
}

func realpath(fs *FS, req *pathRequest) (any, error) {
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	// Where a name is its own path (folders are key prefixes), a server's
	// rule holds still: the folder it is in must exist.
	if err := fs.folderFor(target); err != nil {
		return nil, err
	}
	real, err := fs.Files.RealPath(target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	if real = path.Clean(real); fs.inside(real) != nil {
		return nil, fs.inside(real) // changed since Resolve checked it
	}
	return PathResult{Path: fs.Rel(real)}, nil
}
