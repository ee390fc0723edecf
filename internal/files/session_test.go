package files_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/sftpgate/sftpgate/internal/files"
)

// says is an error that says for itself whether its session failed.
type says struct {
	err    error
	broken bool
}

func (s says) Error() string       { return s.err.Error() }
func (s says) Unwrap() error       { return s.err }
func (s says) SessionFailed() bool { return s.broken }

// TestSessionFailed: only errors a broken session causes discard it; an
// error that says for itself is believed, whatever it wraps.
func TestSessionFailed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection lost", &files.StatusError{Code: files.FxConnectionLost}, true},
		{"no connection", fmt.Errorf("opening: %w", &files.StatusError{Code: files.FxNoConnection}), true},
		{"reply cut", io.ErrUnexpectedEOF, true},
		{"reset", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, true},
		{"deadline", os.ErrDeadlineExceeded, true},
		{"server refused", &files.StatusError{Code: files.FxPermissionDenied}, false},
		{"missing", os.ErrNotExist, false},
		{"anything else", errors.New("too many files"), false},
		{"says not, wrapping EOF", says{io.ErrUnexpectedEOF, false}, false},
		{"says so, wrapping nothing known", fmt.Errorf("copy: %w", says{errors.New("stalled"), true}), true},
	} {
		if got := files.SessionFailed(c.err); got != c.want {
			t.Errorf("%s: SessionFailed = %v, want %v", c.name, got, c.want)
		}
	}
}
