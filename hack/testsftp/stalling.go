package testsftp

import (
	"testing"

	"github.com/pkg/sftp"
)

// Stalling starts a server that logs in and answers a connection test,
// but never answers an Lstat: a server that holds whoever looks at a file
// on it (the worker removing an expired upload's partial file) until the
// test ends.
func Stalling(t testing.TB) *Server {
	t.Helper()
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	return start(t, func(h sftp.Handlers) sftp.Handlers {
		h.FileList = stallingLister{FileLister: h.FileList, released: released}
		return h
	})
}

type stallingLister struct {
	sftp.FileLister
	released <-chan struct{}
}

func (h stallingLister) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	if r.Method == "Lstat" {
		<-h.released
	}
	return h.FileLister.Filelist(r)
}
