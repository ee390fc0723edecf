package files

import (
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
