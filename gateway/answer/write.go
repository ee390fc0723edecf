package answer

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/ratelimit"
	"github.com/sftpgate/sftpgate/gateway/recovery"
)

// JSON sends v as a JSON body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	send(w, status, b, err)
}

// Command sends a command's envelope: {"<command>": result}, or
// {"<command>": null, "error": failure} when the server refused it. It is
// put together from the parts' JSON, without a map of one key to encode
// for every request.
func Command(w http.ResponseWriter, name string, result any, failure *commands.Failure) {
	b, err := json.Marshal(result)
	var f []byte
	if err == nil && failure != nil {
		f, err = json.Marshal(failure)
	}
	if err != nil {
		send(w, http.StatusInternalServerError, nil, err)
		return
	}
	// Room for the envelope and for send's newline.
	envelope := make([]byte, 0, len(name)+len(b)+len(f)+len(`{"":,"error":}`)+1)
	// A command's name is valid UTF-8: there is no error to check.
	envelope, _ = jsontext.AppendQuote(append(envelope, '{'), name)
	envelope = append(append(envelope, ':'), b...)
	if f != nil {
		envelope = append(append(envelope, `,"error":`...), f...)
	}
	send(w, http.StatusOK, append(envelope, '}'), nil)
}

// Err answers err: an *Error as it says, anything else as internal. It
// logs every 5xx once, with its cause and the request id; a panic was
// logged, with its stack, where it was recovered.
func Err(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = Internal(err)
	}
	if e.Status >= http.StatusInternalServerError && !errors.Is(e.Cause, recovery.ErrPanic) {
		attrs := []any{"requestID", middleware.GetReqID(r.Context()), "status", e.Status, "code", e.Code}
		if e.Cause != nil {
			attrs = append(attrs, "error", e.Cause)
		}
		slog.Error("request failed", attrs...)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sftpgate"`)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", ratelimit.RetryAfter(e.RetryAfter))
	}
	JSON(w, e.Status, map[string]*Error{"error": e})
}

// send writes a JSON body, or, when it could not be encoded, an internal
// error.
func send(w http.ResponseWriter, status int, b []byte, err error) {
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"cannot encode the response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
