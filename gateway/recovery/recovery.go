// Package recovery keeps a panic from ending the process. Where work runs
// on its own (a goroutine of the gateway's upkeep, a handler of an
// in-process SFTP server), a panic ends only that work: it is logged with
// its stack, and, for work that answers, turned into an error.
package recovery

import (
	"errors"
	"log/slog"
	"runtime/debug"
)

// ErrPanic is the error a panic became.
var ErrPanic = errors.New("internal error")

// Log recovers a panic and logs it as what panicked. Defer it directly:
// recover works only there.
func Log(what string) {
	if v := recover(); v != nil {
		logPanic(what, v)
	}
}

// Error is Log for work that returns an error: it sets *err to ErrPanic.
func Error(err *error, what string) {
	if v := recover(); v != nil {
		logPanic(what, v)
		*err = ErrPanic
	}
}

func logPanic(what string, v any) {
	slog.Error("panic recovered", "in", what, "panic", v, "stack", string(debug.Stack()))
}
