// Package sftpfs is the SFTP backend of the file layer (internal/files):
// an SFTP session's client and directory reader as a files.FS, its
// errors turned into the file layer's.
package sftpfs

import (
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
)

// New is the files.FS of an SFTP client, listing directories through dirs
// (nil where nothing lists: tests of single files).
func New(c *sftp.Client, dirs *sftpdir.Reader) files.FS {
	return &fsys{c: c, dirs: dirs}
}

// fsys is an SFTP session's files.
type fsys struct {
	c    *sftp.Client
	dirs *sftpdir.Reader
}

var _ files.FS = (*fsys)(nil)

// wrap turns a status the server answered with into a *files.StatusError
// (keeping pkg/sftp's error below it, with its os.ErrNotExist and
// os.ErrPermission); anything else, io.EOF among them, is left as it is.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var status *sftp.StatusError
	switch {
	case errors.As(err, &status):
		return &files.StatusError{Code: status.Code, Err: err}
	case errors.Is(err, sftp.ErrSSHFxConnectionLost):
		return &files.StatusError{Code: files.FxConnectionLost, Err: err}
	case errors.Is(err, sftp.ErrSSHFxNoConnection):
		return &files.StatusError{Code: files.FxNoConnection, Err: err}
	case errors.Is(err, sftp.ErrSSHFxOpUnsupported):
		return &files.StatusError{Code: files.FxOpUnsupported, Err: err}
	}
	return err
}

func (f *fsys) Stat(name string) (fs.FileInfo, error) {
	fi, err := f.c.Stat(name)
	return info(fi), wrap(err)
}

func (f *fsys) Lstat(name string) (fs.FileInfo, error) {
	fi, err := f.c.Lstat(name)
	return info(fi), wrap(err)
}

func (f *fsys) ReadLink(name string) (string, error) {
	s, err := f.c.ReadLink(name)
	return s, wrap(err)
}

func (f *fsys) RealPath(name string) (string, error) {
	s, err := f.c.RealPath(name)
	return s, wrap(err)
}

func (f *fsys) Each(dir string, fn func(fs.FileInfo) error) error {
	return wrap(f.dirs.Each(dir, func(fi fs.FileInfo) error { return fn(info(fi)) }))
}

func (f *fsys) ListsWhole() bool { return f.dirs.ReadsWhole() }

func (f *fsys) ListsCapped() (bool, error) {
	capped, err := f.dirs.Capped()
	return capped, wrap(err)
}

func (f *fsys) Open(name string) (files.File, error) {
	return open(f.c.Open(name))
}

func (f *fsys) OpenFile(name string, flag int) (files.File, error) {
	return open(f.c.OpenFile(name, flag))
}

func open(sf *sftp.File, err error) (files.File, error) {
	if err != nil {
		return nil, wrap(err)
	}
	return &file{sf}, nil
}

func (f *fsys) Truncate(name string, size int64) error    { return wrap(f.c.Truncate(name, size)) }
func (f *fsys) Chmod(name string, mode fs.FileMode) error { return wrap(f.c.Chmod(name, mode)) }
func (f *fsys) Chtimes(name string, atime, mtime time.Time) error {
	return wrap(f.c.Chtimes(name, atime, mtime))
}
func (f *fsys) Symlink(target, link string) error { return wrap(f.c.Symlink(target, link)) }
func (f *fsys) Remove(name string) error          { return wrap(f.c.Remove(name)) }
func (f *fsys) Rename(from, to string) error      { return wrap(f.c.Rename(from, to)) }
func (f *fsys) Mkdir(name string) error           { return wrap(f.c.Mkdir(name)) }
func (f *fsys) MkdirAll(name string) error        { return wrap(f.c.MkdirAll(name)) }
func (f *fsys) RemoveDirectory(name string) error { return wrap(f.c.RemoveDirectory(name)) }

func (f *fsys) PosixRename(from, to string) error {
	if !f.HasPosixRename() {
		return files.ErrUnsupported
	}
	return wrap(f.c.PosixRename(from, to))
}

// HasPosixRename: OpenSSH's posix-rename extension.
func (f *fsys) HasPosixRename() bool {
	_, ok := f.c.HasExtension("posix-rename@openssh.com")
	return ok
}

// Space needs OpenSSH's statvfs extension.
func (f *fsys) Space(name string) (files.Space, error) {
	if _, ok := f.c.HasExtension("statvfs@openssh.com"); !ok {
		return files.Space{}, files.ErrUnsupported
	}
	v, err := f.c.StatVFS(name)
	if err != nil {
		return files.Space{}, wrap(err)
	}
	return files.Space{BlockSize: v.Frsize, Blocks: v.Blocks, BlocksFree: v.Bfree, BlocksAvail: v.Bavail,
		Files: v.Files, FilesFree: v.Ffree}, nil
}

// file is an open SFTP file whose errors are the file layer's. It keeps
// pkg/sftp's WriteTo and ReadFromWithConcurrency, which keep many
// requests in flight.
type file struct{ f *sftp.File }

func (f *file) Read(p []byte) (int, error) {
	n, err := f.f.Read(p)
	return n, wrap(err)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	return n, wrap(err)
}

func (f *file) WriteTo(w io.Writer) (int64, error) {
	n, err := f.f.WriteTo(w)
	return n, wrap(err)
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	return n, wrap(err)
}

func (f *file) ReadFromWithConcurrency(r io.Reader, concurrency int) (int64, error) {
	n, err := f.f.ReadFromWithConcurrency(r, concurrency)
	return n, wrap(err)
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	n, err := f.f.Seek(offset, whence)
	return n, wrap(err)
}

func (f *file) Close() error                 { return wrap(f.f.Close()) }
func (f *file) Name() string                 { return f.f.Name() }
func (f *file) Chmod(mode fs.FileMode) error { return wrap(f.f.Chmod(mode)) }

func (f *file) Stat() (fs.FileInfo, error) {
	fi, err := f.f.Stat()
	return info(fi), wrap(err)
}

// info gives fi a Sys that the file layer reads (files.Owned).
func info(fi fs.FileInfo) fs.FileInfo {
	if fi == nil {
		return nil
	}
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		return fileInfo{fi, owned{st}}
	}
	return fi
}

type fileInfo struct {
	fs.FileInfo
	sys owned
}

func (fi fileInfo) Sys() any { return fi.sys }

type owned struct{ st *sftp.FileStat }

func (o owned) Owner() (uid, gid uint32) { return o.st.UID, o.st.GID }
func (o owned) Accessed() time.Time      { return time.Unix(int64(o.st.Atime), 0) }
