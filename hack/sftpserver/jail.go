package sftpserver

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/internal/recovery"
)

// Jailed serves SFTP inside root: an os.Root, so no path or symlink
// reaches outside it (pkg/sftp's sftp.NewServer serves the whole
// filesystem, whatever its working directory). Paths are as in a chroot:
// "/" is root, and an absolute symlink target means a path inside it.
//
// It implements what OpenSSH's sftp-server does that the gateway uses:
// lstat, realpath that follows symlinks, posix-rename@openssh.com,
// statvfs@openssh.com and append mode. A panic in a handler fails that
// request, never the process.
func Jailed(root *os.Root) func(ssh.Channel) error { return Serving(Handlers(root)) }

// Serving serves SFTP with handlers: Server's SFTP.
func Serving(handlers sftp.Handlers) func(ssh.Channel) error {
	return func(ch ssh.Channel) error { return sftp.NewRequestServer(ch, handlers).Serve() }
}

// Handlers are Jailed's handlers of pkg/sftp's request server.
func Handlers(root *os.Root) sftp.Handlers {
	j := &jail{root: root}
	return sftp.Handlers{FileGet: j, FilePut: j, FileCmd: j, FileList: j}
}

// inServer names the in-process SFTP server in the log of a panic.
const inServer = "the in-process SFTP server"

// panics is where the in-process server logs the panics it recovers, with
// their stacks: standard error, the output of the test or of sftpgate-dev
// that runs it (it is tooling, and serves no component).
var panics = slog.New(slog.NewTextHandler(os.Stderr, nil))

// jail serves SFTP requests inside root.
type jail struct{ root *os.Root }

// name maps an absolute SFTP path, already resolved, to one inside the
// root.
func name(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

// maxLinks bounds the symlinks one path may go through, as Linux does.
const maxLinks = 40

// errEscapes is a symlink that leads above the root, which os.Root refuses
// to follow.
var errEscapes = &fs.PathError{Op: "realpath", Err: os.ErrPermission}

// resolve follows the symlinks in p, inside the root, as OpenSSH's
// realpath does: the last name may be missing (a file about to be made),
// no other. It answers realpath, and it is where every operation that
// follows symlinks acts: an absolute link target is taken inside the root,
// as in a chroot, which os.Root would otherwise refuse to follow.
func (j *jail) resolve(p string) (string, error) {
	parts := split(path.Clean("/" + p))
	resolved := "/"
	for links := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == ".." {
			if resolved == "/" {
				return "", errEscapes
			}
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, part)
		fi, err := j.root.Lstat(name(next))
		switch {
		case errors.Is(err, fs.ErrNotExist) && len(parts) == 0:
			return next, nil
		case errors.Is(err, syscall.ENOTDIR):
			// A file on the way: OpenSSH answers "no such file" too.
			return "", &fs.PathError{Op: "realpath", Path: p, Err: fs.ErrNotExist}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "realpath", Path: p, Err: syscall.ELOOP}
		}
		target, err := j.root.Readlink(name(next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			resolved = "/"
		}
		parts = append(split(target), parts...)
	}
	return resolved, nil
}

// split lists the names of a path, keeping "..".
func split(p string) []string {
	var parts []string
	for part := range strings.SplitSeq(p, "/") {
		if part != "" && part != "." {
			parts = append(parts, part)
		}
	}
	return parts
}

// follow is the name inside the root that p leads to.
func (j *jail) follow(p string) (string, error) {
	real, err := j.resolve(p)
	return name(real), err
}

// parentFollowed is the name inside the root of p itself, with the
// symlinks on the way to it followed: for operations on a name (lstat,
// remove, rename, symlink), never on what it points to.
func (j *jail) parentFollowed(p string) (string, error) {
	p = path.Clean("/" + p)
	if p == "/" {
		return ".", nil
	}
	dir, err := j.resolve(path.Dir(p))
	return name(path.Join(dir, path.Base(p))), err
}

func (j *jail) Fileread(r *sftp.Request) (_ io.ReaderAt, err error) {
	defer recovery.Error(panics, &err, inServer)
	p, err := j.follow(r.Filepath)
	if err != nil {
		return nil, err
	}
	return j.root.Open(p)
}

func (j *jail) Filewrite(r *sftp.Request) (_ io.WriterAt, err error) {
	defer recovery.Error(panics, &err, inServer)
	return j.OpenFile(r)
}

// OpenFile opens a file for reading and writing as the request's flags say.
// In append mode every write goes to the end, as SFTP's SSH_FXF_APPEND
// asks: writes arrive here concurrently, so the file is opened without
// O_APPEND (on which Go refuses WriteAt) and each write lands at its
// offset from the end the file had when opened (pkg/sftp's client counts
// from 0 in append mode).
//
// The attributes of an open request are not read: pkg/sftp gives a
// handler the open flags where the attribute flags would be, so they
// cannot be told apart (the gateway sets permissions with a setstat).
func (j *jail) OpenFile(r *sftp.Request) (_ sftp.WriterAtReaderAt, err error) {
	defer recovery.Error(panics, &err, inServer)
	f := r.Pflags()
	flags := os.O_RDONLY
	switch {
	case f.Read && f.Write:
		flags = os.O_RDWR
	case f.Write:
		flags = os.O_WRONLY
	}
	for _, o := range []struct {
		set  bool
		flag int
	}{{f.Creat, os.O_CREATE}, {f.Trunc, os.O_TRUNC}, {f.Excl, os.O_EXCL}} {
		if o.set {
			flags |= o.flag
		}
	}
	p, err := j.follow(r.Filepath)
	if err != nil {
		return nil, err
	}
	file, err := j.root.OpenFile(p, flags, 0o644)
	if err != nil || !f.Append {
		return file, err
	}
	fi, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return &appending{File: file, end: fi.Size()}, nil
}

// appending is a file opened in append mode.
type appending struct {
	*os.File
	end int64
}

func (a *appending) WriteAt(b []byte, off int64) (_ int, err error) {
	defer recovery.Error(panics, &err, inServer)
	return a.File.WriteAt(b, a.end+off)
}

func (j *jail) Filecmd(r *sftp.Request) (err error) {
	defer recovery.Error(panics, &err, inServer)
	switch r.Method {
	case "Symlink":
		return j.symlink(r.Filepath, r.Target)
	case "Setstat":
		p, err := j.follow(r.Filepath)
		if err != nil {
			return err
		}
		return j.setstat(p, r)
	}
	p, err := j.parentFollowed(r.Filepath)
	if err != nil {
		return err
	}
	switch r.Method {
	case "Rename", "PosixRename", "Link":
		target, err := j.parentFollowed(r.Target)
		switch {
		case err != nil:
			return err
		case r.Method == "Link":
			return j.root.Link(p, target)
		case r.Method == "PosixRename":
			return j.root.Rename(p, target)
		}
		// SFTP's rename does not replace an existing target.
		if _, err := j.root.Lstat(target); err == nil {
			return os.ErrExist
		}
		return j.root.Rename(p, target)
	case "Rmdir":
		if fi, err := j.root.Lstat(p); err == nil && !fi.IsDir() {
			return syscall.ENOTDIR
		}
		return j.root.Remove(p)
	case "Remove":
		if fi, err := j.root.Lstat(p); err == nil && fi.IsDir() {
			return syscall.EISDIR
		}
		return j.root.Remove(p)
	case "Mkdir":
		return j.root.Mkdir(p, 0o755)
	}
	return sftp.ErrSSHFxOpUnsupported
}

// PosixRename replaces an existing target (posix-rename@openssh.com).
func (j *jail) PosixRename(r *sftp.Request) error { return j.Filecmd(r) }

// symlink makes link point to target. pkg/sftp puts the link in Target
// and what it points to in Filepath, kept as given: an absolute target
// stays absolute, a path inside the root as in a chroot (resolve follows
// it there), so that moving the link never changes where it leads. os.Root
// refuses to follow such a link, and need not: every operation acts where
// resolve led.
func (j *jail) symlink(target, link string) error {
	linkName, err := j.parentFollowed(link)
	if err != nil {
		return err
	}
	return j.root.Symlink(target, linkName)
}

func (j *jail) setstat(p string, r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
	if attrs == nil {
		return nil // no attributes to set
	}
	if flags.Size {
		f, err := j.root.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		err = f.Truncate(int64(attrs.Size)) //nolint:gosec // a file size
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return err
		}
	}
	if flags.Permissions {
		if err := j.root.Chmod(p, attrs.FileMode().Perm()); err != nil {
			return err
		}
	}
	if flags.Acmodtime {
		return j.root.Chtimes(p, time.Unix(int64(attrs.Atime), 0), time.Unix(int64(attrs.Mtime), 0))
	}
	return nil
}

func (j *jail) Filelist(r *sftp.Request) (_ sftp.ListerAt, err error) {
	defer recovery.Error(panics, &err, inServer)
	switch r.Method {
	case "List":
		p, err := j.follow(r.Filepath)
		if err != nil {
			return nil, err
		}
		dir, err := j.root.Open(p)
		if err != nil {
			return nil, err
		}
		defer func() { _ = dir.Close() }()
		entries, err := dir.ReadDir(-1)
		if err != nil {
			return nil, err
		}
		infos := make(listerAt, 0, len(entries))
		for _, e := range entries {
			if fi, err := e.Info(); err == nil {
				infos = append(infos, fi)
			}
		}
		return infos, nil
	case "Stat":
		p, err := j.follow(r.Filepath)
		if err != nil {
			return nil, err
		}
		fi, err := j.root.Stat(p)
		return listerAt{fi}, err
	case "Readlink":
		target, err := j.Readlink(r.Filepath)
		return listerAt{linkName(target)}, err
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// Lstat describes a name itself, a symlink as a symlink.
func (j *jail) Lstat(r *sftp.Request) (_ sftp.ListerAt, err error) {
	defer recovery.Error(panics, &err, inServer)
	p, err := j.parentFollowed(r.Filepath)
	if err != nil {
		return nil, err
	}
	fi, err := j.root.Lstat(p)
	return listerAt{fi}, err
}

// Readlink answers what a symlink holds.
func (j *jail) Readlink(p string) (_ string, err error) {
	defer recovery.Error(panics, &err, inServer)
	link, err := j.parentFollowed(p)
	if err != nil {
		return "", err
	}
	return j.root.Readlink(link)
}

// RealPath answers where p leads, its symlinks followed inside the root.
func (j *jail) RealPath(p string) (_ string, err error) {
	defer recovery.Error(panics, &err, inServer)
	return j.resolve(p)
}

// StatVFS describes the file system holding the root.
func (j *jail) StatVFS(r *sftp.Request) (_ *sftp.StatVFS, err error) {
	defer recovery.Error(panics, &err, inServer)
	p, err := j.follow(r.Filepath)
	if err != nil {
		return nil, err
	}
	f, err := j.root.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return statVFS(f)
}

// listerAt lists a slice.
type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, offset int64) (int, error) {
	if offset >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[offset:])
	if n < len(out) {
		return n, io.EOF
	}
	return n, nil
}

// linkName is how readlink answers: a name, the link's target.
type linkName string

func (n linkName) Name() string       { return string(n) }
func (n linkName) Size() int64        { return 0 }
func (n linkName) Mode() fs.FileMode  { return fs.ModeSymlink }
func (n linkName) ModTime() time.Time { return time.Time{} }
func (n linkName) IsDir() bool        { return false }
func (n linkName) Sys() any           { return nil }
