package sftpserver

import (
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Jailed serves SFTP inside root: an os.Root, so no path or symlink
// reaches outside it (pkg/sftp's sftp.NewServer serves the whole
// filesystem, whatever its working directory).
func Jailed(root *os.Root) func(ssh.Channel) error {
	j := &jail{root: root}
	handlers := sftp.Handlers{FileGet: j, FilePut: j, FileCmd: j, FileList: j}
	return func(ch ssh.Channel) error { return sftp.NewRequestServer(ch, handlers).Serve() }
}

// jail serves SFTP requests inside root.
type jail struct{ root *os.Root }

// name maps an SFTP path to one inside the root.
func name(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

func (j *jail) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	return j.root.Open(name(r.Filepath))
}

func (j *jail) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return j.OpenFile(r)
}

// OpenFile opens a file for reading and writing as the request's flags say.
func (j *jail) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) {
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
	}{{f.Append, os.O_APPEND}, {f.Creat, os.O_CREATE}, {f.Trunc, os.O_TRUNC}, {f.Excl, os.O_EXCL}} {
		if o.set {
			flags |= o.flag
		}
	}
	mode := os.FileMode(0o644)
	if r.AttrFlags().Permissions {
		mode = r.Attributes().FileMode().Perm()
	}
	return j.root.OpenFile(name(r.Filepath), flags, mode)
}

func (j *jail) Filecmd(r *sftp.Request) error {
	p := name(r.Filepath)
	switch r.Method {
	case "Setstat":
		return j.setstat(p, r)
	case "Rename":
		// SFTP's rename does not replace an existing target.
		if _, err := j.root.Lstat(name(r.Target)); err == nil {
			return os.ErrExist
		}
		return j.root.Rename(p, name(r.Target))
	case "PosixRename":
		return j.root.Rename(p, name(r.Target))
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
	case "Symlink":
		// pkg/sftp puts the link in Target and what it points to in
		// Filepath, kept as given: os.Root refuses to follow it out.
		return j.root.Symlink(r.Filepath, name(r.Target))
	case "Link":
		return j.root.Link(p, name(r.Target))
	}
	return sftp.ErrSSHFxOpUnsupported
}

func (j *jail) setstat(p string, r *sftp.Request) error {
	flags, attrs := r.AttrFlags(), r.Attributes()
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

func (j *jail) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	p := name(r.Filepath)
	switch r.Method {
	case "List":
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
		fi, err := j.root.Stat(p)
		return listerAt{fi}, err
	case "Lstat":
		fi, err := j.root.Lstat(p)
		return listerAt{fi}, err
	case "Readlink":
		target, err := j.root.Readlink(p)
		if err != nil {
			return nil, err
		}
		return listerAt{linkName(target)}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
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
