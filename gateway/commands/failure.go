package commands

import (
	"errors"
	"os"

	"github.com/pkg/sftp"
)

// Failure is an operation the SFTP server refused. The gateway answers it
// with 200 and {"<command>": null, "error": {...}}.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// SFTPStatus is the SSH_FX status code: the server's, or for conditions
	// the gateway detects itself, the code SFTP version 6 has for them.
	SFTPStatus *uint32 `json:"sftpStatus"`
}

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

// SSH_FX status codes (draft-ietf-secsh-filexfer-13).
const (
	fxNoSuchFile        = 2
	fxPermissionDenied  = 3
	fxFailure           = 4
	fxOpUnsupported     = 8
	fxFileAlreadyExists = 11
	fxDirNotEmpty       = 18
	fxNotADirectory     = 19
	fxFileIsADirectory  = 24
)

func fail(code string, status uint32, message string) *Failure {
	return &Failure{Code: code, Message: message, SFTPStatus: &status}
}

// serverFailure turns an error of an SFTP operation into a *Failure when the
// server answered with a status; other errors (the session broke) pass
// through unchanged.
func serverFailure(err error, what string) error {
	var status *sftp.StatusError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return fail("not_found", fxNoSuchFile, what+": no such file or directory")
	case errors.Is(err, os.ErrPermission):
		return fail("permission_denied", fxPermissionDenied, what+": permission denied")
	case errors.As(err, &status):
		switch status.FxCode() {
		case sftp.ErrSSHFxOpUnsupported:
			return fail("unsupported", status.Code, what+": the server does not support this operation")
		case fxFileAlreadyExists:
			return fail("already_exists", status.Code, what+": already exists")
		case fxDirNotEmpty:
			return fail("not_empty", status.Code, what+": directory is not empty")
		case fxNotADirectory:
			return fail("not_a_directory", status.Code, what+": not a directory")
		case fxFileIsADirectory:
			return fail("is_a_directory", status.Code, what+": is a directory")
		}
		return fail("failure", status.Code, what+": the server reported a failure")
	}
	return err
}
