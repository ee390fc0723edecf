// Package answer turns what the gateway has to say into HTTP answers: a
// command's envelope, a JSON body, and every API error, which this file
// defines. Handlers return errors; Error is the one place that answers
// them and logs the cause of every 5xx.
package answer

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sftpgate/sftpgate/gateway/commands"
)

// Error is an answer outside a command's envelope:
// {"error": {"code", "message", "field"}}. Its cause is logged, never
// sent: it may name the SFTP server's paths or the cluster's objects.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field that is invalid.
	Field string `json:"field,omitempty"`
	// RetryAfter, when set, is sent as Retry-After.
	RetryAfter time.Duration `json:"-"`
	// Allow, when set, is sent as Allow with a 405 (else POST).
	Allow string `json:"-"`
	Cause error  `json:"-"`
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// NotFound answers a path that is no endpoint.
func NotFound() *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint"}
}

// MethodNotAllowed answers a command sent with a method other than POST.
func MethodNotAllowed() *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "commands are sent with POST"}
}

// UnknownCommand answers a command the gateway does not have.
func UnknownCommand(name string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "unknown_command", Message: fmt.Sprintf("there is no command %q", name)}
}

// Unauthorized answers a request without a valid API key; message says
// what is wrong with it.
func Unauthorized(message string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: message}
}

// Forbidden answers a valid key that may not do what was asked.
func Forbidden(message string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: message}
}

// PathNotAllowed answers a path outside the paths the request's API key
// may use; field names the request field.
func PathNotAllowed(message, field string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "path_not_allowed", Message: message, Field: field}
}

// SymlinkNotAllowed answers a rename or symlink that would move or make a
// symlink where the request is confined (docs/gateway.md); field names the
// request field.
func SymlinkNotAllowed(message, field string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "symlink_not_allowed", Message: message, Field: field}
}

// ConnectionNotFound answers a slug no connection of the key's namespace
// serves.
func ConnectionNotFound() *Error {
	return &Error{Status: http.StatusNotFound, Code: "connection_not_found", Message: "there is no such connection"}
}

// ConnectionNotReady answers a connection that cannot serve requests yet
// or at the moment; message says why, in words a client may see.
func ConnectionNotReady(message string, cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "connection_not_ready", Message: message, Cause: cause}
}

// RateLimited answers a key over its rate limit.
func RateLimited(retryAfter time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "this API key is over its rate limit; retry after the time in Retry-After", RetryAfter: retryAfter}
}

// TooManyInFlight answers a request over a bound on requests in flight:
// whose says whose requests ("this API key's", "this namespace's").
func TooManyInFlight(whose string, limit int) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "too_many_requests", RetryAfter: time.Second,
		Message: fmt.Sprintf("%s requests in flight on this gateway replica are at their limit of %d; retry when some have ended", whose, limit)}
}

// Busy answers a request the gateway's memory budget had no room for.
func Busy(cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "busy", RetryAfter: time.Second, Cause: cause,
		Message: "the gateway is holding as many request bodies and answers as its memory budget allows; retry shortly"}
}

// ConnectionBusy answers a request that found the connection's queue for a
// session full.
func ConnectionBusy() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "connection_busy", RetryAfter: time.Second,
		Message: "every session to this connection's server is busy and its queue is full; retry shortly"}
}

// AuthUnavailable answers a ServiceAccount token the gateway could not
// have verified or authorized: the API server did not answer, or too many
// reviews were in flight.
func AuthUnavailable(cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "auth_unavailable", RetryAfter: time.Second, Cause: cause,
		Message: "the gateway could not have the token verified or the request authorized by the Kubernetes API server just now; retry shortly"}
}

// StatusClientClosedRequest is the status logged, as nginx's, for a
// request whose client went away before its answer: nobody reads it.
const StatusClientClosedRequest = 499

// ClientGone answers a request whose client went away while it waited.
func ClientGone(cause error) *Error {
	return &Error{Status: StatusClientClosedRequest, Code: "client_closed_request", Message: "the client went away", Cause: cause}
}

// BodyTooLarge answers a body over limit bytes; what is "upload" or
// "request body".
func BodyTooLarge(what string, limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
		Message: fmt.Sprintf("the %s is larger than %d bytes", what, limit)}
}

// UnsupportedMediaType answers a command body that is not JSON.
func UnsupportedMediaType() *Error {
	return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
		Message: "send the request as Content-Type: application/json"}
}

// InvalidRequest answers a request the gateway cannot run as sent.
func InvalidRequest(message, field string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: message, Field: field}
}

// MethodOverride answers a request carrying X-HTTP-Method-Override, which
// tusd would apply after the gateway checked the request's method.
func MethodOverride() *Error {
	return &Error{Status: http.StatusBadRequest, Code: "method_override_refused",
		Message: "X-HTTP-Method-Override is refused: send the request with its own method"}
}

// UpstreamTimeout answers when the SFTP server did not answer in time.
func UpstreamTimeout(cause error) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Code: "upstream_timeout", Message: "the SFTP server did not answer in time", Cause: cause}
}

// UpstreamUnavailable answers when the SFTP server could not be reached
// or the session broke; message says why, in words a client may see.
func UpstreamUnavailable(message string, cause error) *Error {
	return &Error{Status: http.StatusBadGateway, Code: "upstream_unavailable", Message: message, Cause: cause}
}

// NotSynced answers readiness probes until the gateway's cache has synced.
func NotSynced() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: "the cache has not synced yet"}
}

// Internal answers a bug; the cause is logged.
func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Cause: cause}
}

// Resumable uploads (tus, package gateway/uploads).

// UploadNotFound answers an upload id that is none of the caller's.
func UploadNotFound() *Error {
	return &Error{Status: http.StatusNotFound, Code: "upload_not_found",
		Message: "there is no such upload: it expired, was ended, or is another caller's"}
}

// TooManyUploads answers a new upload over its namespace's bound; message
// says which.
func TooManyUploads(message string) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "too_many_uploads", Message: message}
}

// StateBudgetExceeded answers a new upload whose record would take its
// namespace past what sftpgate may store for it; message says how far.
func StateBudgetExceeded(message string) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "state_budget_exceeded", Message: message}
}

// UploadWritesLimited answers an upload request over its namespace's rate
// of writes to upload records.
func UploadWritesLimited(retryAfter time.Duration) *Error {
	return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", RetryAfter: retryAfter,
		Message: "this namespace's uploads are over their rate of changes on this gateway replica; retry after the time in Retry-After"}
}

// StatusChecksumMismatch is tus's status for a part whose checksum did not
// match.
const StatusChecksumMismatch = 460

// ChecksumMismatch answers a part whose SHA-256 is not the one sent.
func ChecksumMismatch(message string) *Error {
	return &Error{Status: StatusChecksumMismatch, Code: "checksum_mismatch", Message: message}
}

// MismatchedOffset answers a part sent for an offset the upload is not at.
func MismatchedOffset(message string) *Error {
	return &Error{Status: http.StatusConflict, Code: "mismatched_offset", Message: message}
}

// UploadBusy answers a request for an upload that another request, on
// another replica, kept writing to for as long as this one could wait.
func UploadBusy() *Error {
	return &Error{Status: http.StatusLocked, Code: "upload_locked", RetryAfter: time.Second,
		Message: "another request is writing to this upload; retry when it has ended (HEAD says where it got)"}
}

// UploadExpired answers an upload past its expiry.
func UploadExpired() *Error {
	return &Error{Status: http.StatusNotFound, Code: "upload_not_found", Message: "this upload expired; what it sent is being removed"}
}

// UploadRootChanged answers an upload begun under another root of its
// connection: it is over, and nothing more is written where it led.
func UploadRootChanged() *Error {
	return &Error{Status: http.StatusNotFound, Code: "upload_not_found",
		Message: "this upload was begun under another root directory of the connection and has ended; begin it again"}
}

// RecordsUnavailable answers when the Kubernetes API server, which keeps
// uploads' records, did not answer.
func RecordsUnavailable(cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: "records_unavailable", RetryAfter: time.Second, Cause: cause,
		Message: "the Kubernetes API server, which keeps the uploads' records, did not answer; retry shortly"}
}

// UploadMethodNotAllowed answers a method the tus endpoint does not have
// at the URL; allow lists those it has.
func UploadMethodNotAllowed(allow string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "send " + allow + " here (tus 1.0)", Allow: allow}
}

// Protocol answers what tus's handler refused, with its status, its code
// (lower case, without ERR_) and its message.
func Protocol(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Refused answers an operation the SFTP server refused, where no command
// envelope carries it (an upload): with the status its code means, its
// code and its message.
func Refused(f *commands.Failure) *Error {
	status := http.StatusBadGateway
	switch f.Code {
	case "permission_denied":
		status = http.StatusForbidden
	case "not_found", "already_exists", "is_a_directory", "not_a_directory", "not_empty":
		status = http.StatusConflict
	case "unsupported":
		status = http.StatusNotImplemented
	}
	return &Error{Status: status, Code: f.Code, Message: f.Message, Cause: f.Cause}
}
