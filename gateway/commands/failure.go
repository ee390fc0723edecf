package commands

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/sftpgate/sftpgate/gateway/budget"
	"github.com/sftpgate/sftpgate/internal/files"
)

// Failure is an operation the SFTP server refused. The gateway answers it
// with 200 and {"<command>": null, "error": {...}}.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// SFTPStatus is the SSH_FX status code: the server's, or for conditions
	// the gateway detects itself, the code SFTP version 6 has for them.
	SFTPStatus *uint32 `json:"sftpStatus"`
	// Cause is the server's error behind a plain "failure", for the
	// gateway's log: the answer says less, as it may name the server's
	// paths.
	Cause error `json:"-"`
}

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

func fail(code string, status uint32, message string) *Failure {
	return &Failure{Code: code, Message: message, SFTPStatus: &status}
}

// refused reports whether err is the gateway's refusal of a request,
// before or after asking the server where a path leads.
func refused(err error) bool {
	var (
		bad        *BadRequest
		notAllowed *PathNotAllowed
	)
	return errors.As(err, &bad) || errors.As(err, &notAllowed)
}

// serverFailure turns an error of an SFTP operation into a *Failure, unless
// the session itself failed (SessionFailed), which passes through. Messages
// name paths as the client sees them, never the server's absolute paths.
func serverFailure(err error, what string) error {
	var (
		status  *files.StatusError
		pathErr *os.PathError
		failure *Failure
	)
	switch {
	case err == nil:
		return nil
	case files.SessionFailed(err), errors.As(err, &failure), refused(err),
		errors.Is(err, budget.ErrBusy): // the gateway's own wait (an object store's parts), answered 503
		return err
	case errors.Is(err, os.ErrNotExist):
		return fail("not_found", files.FxNoSuchFile, what+": no such file or directory")
	case errors.Is(err, os.ErrPermission):
		return fail("permission_denied", files.FxPermissionDenied, what+": permission denied")
	case errors.As(err, &status):
		switch status.Code {
		case files.FxOpUnsupported:
			return fail("unsupported", status.Code, what+": the server does not support this operation")
		case files.FxFileAlreadyExists:
			return fail("already_exists", status.Code, what+": already exists")
		case files.FxDirNotEmpty:
			return fail("not_empty", status.Code, what+": directory is not empty")
		case files.FxNotADirectory:
			return fail("not_a_directory", status.Code, what+": not a directory")
		case files.FxFileIsADirectory:
			return fail("is_a_directory", status.Code, what+": is a directory")
		}
		f := fail("failure", status.Code, what+": the server reported a failure")
		f.Cause = err
		return f
	case errors.As(err, &pathErr) && errors.Is(pathErr.Err, syscall.ENOTDIR):
		// pkg/sftp's MkdirAll meeting a file on the way.
		return fail("not_a_directory", files.FxNotADirectory, what+": a part of the path is a file, not a directory")
	}
	f := fail("failure", files.FxFailure, what+": the server reported a failure")
	f.Cause = err
	return f
}

// ConfirmEnd checks, when reading f ended (io.EOF) at offset end before
// the length the file had, that the file really ends there: pkg/sftp also
// reports io.EOF for a request it could not send on a session that broke.
// It asks the server for the file's size: an error is the session's, and
// a size beyond end means the read was cut off (io.ErrUnexpectedEOF, the
// session's failure too); a file that shrank meanwhile ends there.
func ConfirmEnd(f files.File, end int64) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case fi.Size() > end:
		return io.ErrUnexpectedEOF
	}
	return nil
}
