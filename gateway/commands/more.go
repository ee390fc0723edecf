package commands

import (
	"crypto/md5"  //nolint:gosec // asked for by name, to compare with checksums users have
	"crypto/sha1" //nolint:gosec // likewise
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

type twoPathRequest struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// TwoPathResult is the result of rename and copy.
type TwoPathResult struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Bytes *int64 `json:"bytesCopied,omitempty"`
}

func (req *twoPathRequest) resolve(fs *FS) (from, to string, err error) {
	if req.From == "" {
		return "", "", &BadRequest{Field: "from", Message: "is required"}
	}
	if req.To == "" {
		return "", "", &BadRequest{Field: "to", Message: "is required"}
	}
	if from, err = fs.ResolveParent(req.From); err == nil {
		to, err = fs.ResolveParent(req.To)
	}
	if err == nil && (from == fs.Root || to == fs.Root) {
		err = &BadRequest{Field: "from", Message: "cannot be the connection's root directory, nor can to"}
	}
	return from, to, err
}

// rename moves a file, directory or symlink (the name itself, never what a
// symlink points to). With overwrite it replaces an existing target
// (posix-rename@openssh.com); without, an existing target fails.
func rename(fs *FS, req *twoPathRequest) (any, error) {
	from, to, err := req.resolve(fs)
	if err != nil {
		return nil, err
	}
	if !req.Overwrite {
		switch _, statErr := fs.Client.Lstat(to); {
		case SessionFailed(statErr):
			return nil, statErr
		case statErr == nil:
			return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(to)+": already exists and overwrite is false")
		}
	}
	if err := fs.rename(from, to, req.Overwrite); err != nil {
		return nil, serverFailure(err, fs.Rel(from))
	}
	return TwoPathResult{From: fs.Rel(from), To: fs.Rel(to)}, nil
}

// copyFile copies a file's content through the gateway (SFTP version 3
// has no server-side copy that pkg/sftp speaks).
func copyFile(fs *FS, req *twoPathRequest) (any, error) {
	switch {
	case req.From == "":
		return nil, &BadRequest{Field: "from", Message: "is required"}
	case req.To == "":
		return nil, &BadRequest{Field: "to", Message: "is required"}
	}
	// Both ends are followed (and so checked where they lead) on opening.
	src, fi, err := OpenRead(fs, req.From)
	if err != nil {
		return nil, err
	}
	defer func() { _ = src.Close() }()
	from := src.Name()
	if real, err := fs.Client.RealPath(from); err == nil {
		if toReal, err := fs.Client.RealPath(path.Join(fs.Root, path.Clean("/"+req.To))); err == nil && toReal == real {
			// Opening the target would truncate the source before it is read.
			return nil, &BadRequest{Field: "to", Message: "is the same file as from"}
		}
	}
	to, err := fs.Resolve(req.To)
	if err != nil {
		return nil, err
	}
	mode := fi.Mode().Perm()
	n, err := fs.writeFile(to, &mode, req.Overwrite, fi.Size(), func(dst *sftp.File) (int64, error) {
		n, err := io.Copy(dst, src) // src.WriteTo: concurrent reads
		if err == nil && n < fi.Size() {
			err = ConfirmEnd(src, n) // a copy cut short is not a copy
		}
		return n, err
	})
	if err != nil {
		return nil, notAFile(fs, err, to)
	}
	return TwoPathResult{From: fs.Rel(from), To: fs.Rel(to), Bytes: &n}, nil
}

type chmodRequest struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

func chmod(fs *FS, req *chmodRequest) (any, error) {
	if req.Mode == "" {
		return nil, &BadRequest{Field: "mode", Message: "is required"}
	}
	mode, err := parseMode(&req.Mode)
	if err != nil {
		return nil, err
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if err := fs.Client.Chmod(target, *mode); err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

type chtimesRequest struct {
	Path     string     `json:"path"`
	Modified *time.Time `json:"modified"`
	Accessed *time.Time `json:"accessed,omitempty"`
}

func chtimes(fs *FS, req *chtimesRequest) (any, error) {
	if req.Modified == nil {
		return nil, &BadRequest{Field: "modified", Message: "is required (RFC 3339)"}
	}
	accessed := req.Modified
	if req.Accessed != nil {
		accessed = req.Accessed
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if err := fs.Client.Chtimes(target, *accessed, *req.Modified); err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}

type symlinkRequest struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// SymlinkResult is the result of symlink and readlink.
type SymlinkResult struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// symlink makes path a symlink to target, a path as the client sees it:
// the link stored on the server points inside the root, never outside.
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
	if err := fs.Client.Symlink(resolved, link); err != nil {
		switch _, statErr := fs.Client.Lstat(link); {
		case SessionFailed(err), SessionFailed(statErr):
			return nil, errors.Join(err, statErr)
		case statErr == nil:
			return nil, fail("already_exists", fxFileAlreadyExists, fs.Rel(link)+": already exists")
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
	target, err := fs.Client.ReadLink(link)
	if err != nil {
		switch fi, statErr := fs.Client.Lstat(link); {
		case SessionFailed(err), SessionFailed(statErr):
			return nil, errors.Join(err, statErr)
		case statErr == nil && fi.Mode()&os.ModeSymlink == 0:
			return nil, fail("failure", fxFailure, fs.Rel(link)+": not a symlink")
		}
		return nil, serverFailure(err, fs.Rel(link))
	}
	if !strings.HasPrefix(target, "/") {
		// Relative to where the link really is: its directory may itself
		// be reached through a symlink.
		dir, err := fs.Client.RealPath(path.Dir(link))
		if err != nil {
			return nil, serverFailure(err, fs.Rel(link))
		}
		target = path.Join(dir, target)
	}
	if target = path.Clean(target); !within(fs.Root, target) {
		// Say nothing of the server outside the root.
		return nil, ErrOutsideRoot
	}
	return SymlinkResult{Path: fs.Rel(link), Target: fs.Rel(target)}, nil
}

func realpath(fs *FS, req *pathRequest) (any, error) {
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	real, err := fs.Client.RealPath(target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	if real = path.Clean(real); !within(fs.Root, real) {
		return nil, ErrOutsideRoot // changed since Resolve checked it
	}
	return PathResult{Path: fs.Rel(real)}, nil
}

// StatvfsResult is the result of statvfs: the file system's space.
type StatvfsResult struct {
	Path           string `json:"path"`
	BlockSize      uint64 `json:"blockSize"`
	TotalBytes     uint64 `json:"totalBytes"`
	FreeBytes      uint64 `json:"freeBytes"`
	AvailableBytes uint64 `json:"availableBytes"`
	Files          uint64 `json:"files"`
	FreeFiles      uint64 `json:"freeFiles"`
}

func statvfs(fs *FS, req *pathRequest) (any, error) {
	if req.Path == "" {
		req.Path = "/"
	}
	target, err := fs.Resolve(req.Path)
	if err != nil {
		return nil, err
	}
	if _, ok := fs.Client.HasExtension("statvfs@openssh.com"); !ok {
		return nil, fail("unsupported", fxOpUnsupported, "the server does not report file system space (statvfs@openssh.com)")
	}
	v, err := fs.Client.StatVFS(target)
	if err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return StatvfsResult{
		Path: fs.Rel(target), BlockSize: v.Frsize,
		TotalBytes: v.Blocks * v.Frsize, FreeBytes: v.Bfree * v.Frsize, AvailableBytes: v.Bavail * v.Frsize,
		Files: v.Files, FreeFiles: v.Ffree,
	}, nil
}

type hashRequest struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm,omitempty"`
}

// HashResult is the result of hash.
type HashResult struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Hash      string `json:"hash"`
	Size      int64  `json:"size"`
}

var hashes = map[string]func() hash.Hash{"sha256": sha256.New, "sha1": sha1.New, "md5": md5.New}

// hashFile streams a file through a hash, in the gateway.
func hashFile(fs *FS, req *hashRequest) (any, error) {
	algorithm := req.Algorithm
	if algorithm == "" {
		algorithm = "sha256"
	}
	newHash, ok := hashes[algorithm]
	if !ok {
		return nil, &BadRequest{Field: "algorithm", Message: `must be "sha256", "sha1" or "md5"`}
	}
	f, fi, err := OpenRead(fs, req.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := newHash()
	n, err := f.WriteTo(h)
	if err == nil && n < fi.Size() {
		err = ConfirmEnd(f, n) // a hash of a part is not the file's
	}
	if err != nil {
		return nil, serverFailure(err, fs.Rel(f.Name()))
	}
	return HashResult{Path: fs.Rel(f.Name()), Algorithm: algorithm, Hash: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}
