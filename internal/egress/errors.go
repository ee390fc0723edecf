package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Error is a failed dial or connection test. Reason is one of the Ready
// reasons of the v1alpha1 API; Message is written for a person and never
// contains a secret.
type Error struct {
	Reason  string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// NetworkError is a failed dial of addr, with the reason that names why;
// server says what should listen there ("an SSH server").
func NetworkError(err error, addr string, timeout time.Duration, server string) error {
	var (
		denied *DeniedError
		dns    *net.DNSError
	)
	switch {
	case errors.As(err, &denied):
		return &Error{Reason: v1alpha1.ReasonDestinationNotAllowed, Err: err,
			Message: fmt.Sprintf("%s: %v; sftpgate's dial policy does not allow it", addr, denied)}
	case errors.As(err, &dns) && !dns.IsTimeout:
		return &Error{Reason: v1alpha1.ReasonDNSError, Err: err,
			Message: fmt.Sprintf("cannot resolve host %q: %s", dns.Name, dns.Err)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &Error{Reason: v1alpha1.ReasonConnectionRefused, Err: err,
			Message: fmt.Sprintf("%s refused the connection; is %s listening on that port?", addr, server)}
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return &Error{Reason: v1alpha1.ReasonHostUnreachable, Err: err,
			Message: fmt.Sprintf("no route to %s: %v", addr, errors.Unwrap(err))}
	case IsTimeout(err):
		return TimeoutError(addr, timeout, err)
	}
	return &Error{Reason: v1alpha1.ReasonHostUnreachable, Err: err,
		Message: fmt.Sprintf("cannot connect to %s: %v", addr, err)}
}

// IsTimeout reports whether err is a deadline or a network timeout.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// TimeoutError is a dial of addr that took longer than timeout.
func TimeoutError(addr string, timeout time.Duration, err error) error {
	return &Error{Reason: v1alpha1.ReasonTimeout, Err: err,
		Message: fmt.Sprintf("%s did not answer within %s", addr, timeout)}
}
