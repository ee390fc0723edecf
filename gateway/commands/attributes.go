package commands

// Attributes: stat, exists, chmod, chtimes.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/sftpgate/sftpgate/internal/files"
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
	// UID, GID and Accessed are there where the server tells them.
	UID      *uint32    `json:"uid,omitempty"`
	GID      *uint32    `json:"gid,omitempty"`
	Accessed *time.Time `json:"accessed,omitempty"`
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

type statRequest struct {
	Path           string `json:"path"`
	FollowSymlinks *bool  `json:"followSymlinks,omitempty"`
}

func stat(fs *FS, req *statRequest) (any, error) {
	follow := req.FollowSymlinks == nil || *req.FollowSymlinks
	statFn := fs.Files.Stat
	if !follow {
		statFn = fs.Files.Lstat
	}
	var (
		fi      os.FileInfo
		statErr error
	)
	target, err := fs.Checked(req.Path, !follow, func(target string) { fi, statErr = statFn(target) })
	if err != nil {
		return nil, err
	}
	if statErr != nil {
		return nil, serverFailure(statErr, fs.Rel(target))
	}
	res := StatResult{FileInfo: info(fs, target, fi)}
	if o, ok := fi.Sys().(files.Owned); ok {
		uid, gid := o.Owner()
		accessed := o.Accessed().UTC()
		res.UID, res.GID, res.Accessed = &uid, &gid, &accessed
	}
	return res, nil
}

func exists(fs *FS, req *pathRequest) (any, error) {
	var statErr error
	target, err := fs.Checked(req.Path, false, func(target string) { _, statErr = fs.Files.Stat(target) })
	switch {
	case err != nil:
		return nil, err
	case errors.Is(statErr, os.ErrNotExist):
		return false, nil
	}
	return statErr == nil, serverFailure(statErr, fs.Rel(target))
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
	if err := fs.Files.Chmod(target, *mode); err != nil {
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
	if err := fs.Files.Chtimes(target, *accessed, *req.Modified); err != nil {
		return nil, serverFailure(err, fs.Rel(target))
	}
	return PathResult{Path: fs.Rel(target)}, nil
}
