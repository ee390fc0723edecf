package sftpfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/internal/files"
)

// TestErrorsAreTheFileLayers: what pkg/sftp answers reaches the
// components as the file layer's errors: a status by its code, a lost
// connection as a broken session, a missing file still os.ErrNotExist,
// and io.EOF as itself (readers compare it).
func TestErrorsAreTheFileLayers(t *testing.T) {
	missing := &sftp.StatusError{Code: files.FxNoSuchFile}
	for _, c := range []struct {
		name    string
		err     error
		code    uint32
		refused bool
		broken  bool
		is      error
	}{
		{"no space", fmt.Errorf("write: %w", &sftp.StatusError{Code: files.FxNoSpace}), files.FxNoSpace, true, false, nil},
		{"missing", &os.PathError{Op: "open", Path: "/x", Err: os.ErrNotExist}, 0, false, false, os.ErrNotExist},
		{"missing by status", missing, files.FxNoSuchFile, true, false, nil},
		{"connection lost", sftp.ErrSSHFxConnectionLost, files.FxConnectionLost, true, true, nil},
		{"no connection", sftp.ErrSSHFxNoConnection, files.FxNoConnection, true, true, nil},
		{"unsupported", sftp.ErrSSHFxOpUnsupported, files.FxOpUnsupported, true, false, nil},
		{"end of file", io.EOF, 0, false, true, io.EOF},
	} {
		err := wrap(c.err)
		code, refused := files.Status(err)
		if code != c.code || refused != c.refused {
			t.Errorf("%s: Status = %d, %v; want %d, %v", c.name, code, refused, c.code, c.refused)
		}
		if got := files.SessionFailed(err); got != c.broken {
			t.Errorf("%s: SessionFailed = %v, want %v", c.name, got, c.broken)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v is not %v", c.name, err, c.is)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: pkg/sftp's error is lost", c.name)
		}
	}
	if err := wrap(io.EOF); err != io.EOF { //nolint:errorlint // readers compare it
		t.Errorf("io.EOF became %v", err)
	}
}
