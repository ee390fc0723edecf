// Package recovery keeps a panic from ending the process. Where work runs
// on its own (a goroutine of the gateway's upkeep, a handler of an
// in-process SFTP server), a panic ends only that work: it is logged with
// its stack, and, for work that answers, turned into an error. In an HTTP
// server (the gateway, the web UI), a panic fails its request only: it
// becomes an error, with its stack, for the server's one place that
// answers errors, which logs it once.
package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/sftpgate/sftpgate/internal/logging"
)

// ErrPanic is the error a panic became.
var ErrPanic = errors.New("internal error")

// Log recovers a panic and logs it to log (nil: nowhere) as what
// panicked. Defer it directly: recover works only there.
func Log(log *slog.Logger, what string) {
	if v := recover(); v != nil {
		logPanic(log, what, v)
	}
}

// Error is Log for work that returns an error: it sets *err to ErrPanic.
func Error(log *slog.Logger, err *error, what string) {
	if v := recover(); v != nil {
		logPanic(log, what, v)
		*err = ErrPanic
	}
}

func logPanic(log *slog.Logger, what string, v any) {
	logging.OrDiscard(log).Error("panic recovered", "in", what, "panic", v, "stack", string(debug.Stack()))
}

// Panic is a panic recovered while serving a request; it is ErrPanic.
type Panic struct {
	Value any
	Stack string
}

func (p *Panic) Error() string { return fmt.Sprintf("panic: %v\n%s", p.Value, p.Stack) }

// Is makes a *Panic ErrPanic.
func (p *Panic) Is(target error) bool { return target == ErrPanic }

// Middleware recovers a panic of a request's handler and has fail answer
// it as a *Panic. net/http's own http.ErrAbortHandler passes on, as it
// asks.
func Middleware(fail func(w http.ResponseWriter, r *http.Request, err error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel net/http panics with
						panic(v)
					}
					fail(w, r, &Panic{Value: v, Stack: string(debug.Stack())})
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}
