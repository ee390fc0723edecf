package files

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// SessionFailed reports whether err means that the session broke (its
// connection was lost, closed or cut mid-reply), as opposed to the server
// answering one request or the request being wrong: only then is the
// session discarded. Errors the session cannot have caused are known by
// name; anything else is the operation's, since discarding a healthy
// session costs a dial while keeping a broken one costs one more failed
// operation, which this names.
//
// An error in err's chain may say for itself, with a method
// SessionFailed() bool: a client's request body that ended early says
// false whatever it wraps, a copy that stalled says true.
func SessionFailed(err error) bool {
	if err == nil {
		return false // before errors.As, whose target would escape
	}
	var says interface{ SessionFailed() bool }
	if errors.As(err, &says) {
		return says.SessionFailed()
	}
	if code, ok := Status(err); ok && (code == FxConnectionLost || code == FxNoConnection) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ETIMEDOUT)
}

// Target dials sessions of one server, prepared once (its credentials
// read, its trust parsed).
type Target interface {
	Dial(ctx context.Context) (Session, error)
}

// Exclusive is a Target whose sessions serve one operation at a time:
// FTP's, where a control connection runs one command, and an operation
// that holds a stream and asks for more takes another of the session's
// connections (shared, two such operations could wait on each other).
type Exclusive interface {
	Target
	Exclusive()
}

// Session is an open session with one server, of any backend, as the
// pools keep them.
type Session interface {
	// FS is the session's files.
	FS() FS
	// Keepalive asks the server to answer, and fails when the session is
	// broken (the pool bounds how long it waits).
	Keepalive() error
	// Close ends the session, cutting off what runs on it.
	Close() error
	// Version is what the server says it is (an SSH version string), or
	// its protocol where it says nothing.
	Version() string
}
