package testsftp

import (
	"path"
	"testing"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/internal/tempname"
)

// Stalling starts a server that logs in and answers a connection test,
// but never answers a stat of one of sftpgate's temporary files: a server
// that holds whoever looks at one (the worker removing an expired
// upload's partial file) until the test ends.
func Stalling(t testing.TB) *Server {
	t.Helper()
	return holding(t, func(h sftp.Handlers, released <-chan struct{}) sftp.Handlers {
		h.FileList = stallingLister{FileLister: h.FileList, released: released}
		return h
	})
}

type stallingLister struct {
	sftp.FileLister
	released <-chan struct{}
}

func (h stallingLister) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	// pkg/sftp asks a lister without Lstat of its own for a Stat.
	if (r.Method == "Stat" || r.Method == "Lstat") && tempname.Is(path.Base(r.Filepath)) {
		<-h.released
	}
	return h.FileLister.Filelist(r)
}
