package sftpserver

import (
	"os"
	"syscall"

	"github.com/pkg/sftp"
)

// statVFS describes the file system holding f, as statvfs(3) does.
func statVFS(f *os.File) (*sftp.StatVFS, error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	return &sftp.StatVFS{
		Bsize: uint64(st.Bsize), Frsize: uint64(st.Frsize), //nolint:gosec // sizes
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail,
		Files: st.Files, Ffree: st.Ffree, Favail: st.Ffree,
		Namemax: uint64(st.Namelen), //nolint:gosec // a length
	}, nil
}
