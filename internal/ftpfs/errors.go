package ftpfs

import (
	"errors"
	"fmt"
	"io/fs"
	"net/textproto"
	"strings"

	"github.com/jlaffaye/ftp"

	"github.com/sftpgate/sftpgate/internal/files"
)

// FTP answers a refusal with a reply code (RFC 959) and words; the file
// layer's codes are SFTP's. Most servers answer 550 to a missing file and
// a forbidden one alike, and to a directory where a file was meant:
// the words tell them apart where the server uses the usual ones.

// ReplyError is a reply the server refused a command with.
type ReplyError struct {
	Code int
	// Msg is the server's words, cut to maxWords bytes.
	Msg string
	is  error
}

// MaxWords bounds a server's words in an error (they reach statuses and
// error bodies).
const MaxWords = 200

func (e *ReplyError) Error() string {
	return fmt.Sprintf("the FTP server answered %d %s", e.Code, e.Msg)
}
func (e *ReplyError) Unwrap() error { return e.is }

// wrap turns a reply the server refused a command with into a
// *files.StatusError, and a lost connection into one too; anything else
// is left as it is.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var reply *textproto.Error
	switch {
	case errors.As(err, &reply):
		return refused(reply.Code, reply.Msg)
	case errors.Is(err, ftp.ErrInvalidCommand):
		return &files.StatusError{Code: files.FxFailure, Err: errors.New("a name with a line break cannot be sent over FTP")}
	case errors.Is(err, ErrTooLarge):
		return err
	}
	var status *files.StatusError
	if errors.As(err, &status) {
		return err
	}
	// Whatever else failed (the socket, TLS, a reply that was no reply)
	// leaves the connection in no known state.
	return &files.StatusError{Code: files.FxConnectionLost, Err: err}
}

func refused(code int, msg string) error {
	msg = strings.TrimSpace(msg)
	if len(msg) > MaxWords {
		msg = msg[:MaxWords] + "…"
	}
	e := &ReplyError{Code: code, Msg: msg}
	lower := strings.ToLower(msg)
	fx := uint32(files.FxFailure)
	switch {
	case code == ftp.StatusNotAvailable: // 421: the server is closing the connection
		fx = files.FxConnectionLost
	case code == ftp.StatusNotImplemented || code == ftp.StatusNotImplementedParameter || code == ftp.StatusBadCommand:
		fx, e.is = files.FxOpUnsupported, errors.ErrUnsupported
	case strings.Contains(lower, "permission") || strings.Contains(lower, "denied") || code == ftp.StatusNotLoggedIn ||
		code == ftp.StatusBadFileName:
		fx, e.is = files.FxPermissionDenied, fs.ErrPermission
	case code == ftp.StatusExceededStorage:
		fx = files.FxQuotaExceeded
	case code == ftp.Status452:
		fx = files.FxNoSpace
	case code == ftp.StatusFileUnavailable:
		fx, e.is = files.FxNoSuchFile, fs.ErrNotExist
	}
	return &files.StatusError{Code: fx, Err: e}
}

// unsupported is an operation FTP does not offer, in words.
func unsupported(what string) error {
	return &files.StatusError{Code: files.FxOpUnsupported, Err: fmt.Errorf("%s: %w over FTP", what, errors.ErrUnsupported)}
}

// exists is a name that is taken.
func exists(name string) error {
	return &files.StatusError{Code: files.FxFileAlreadyExists, Err: &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}}
}

// notFound is a name that names nothing.
func notFound(name string) error {
	return &files.StatusError{Code: files.FxNoSuchFile, Err: &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}}
}
