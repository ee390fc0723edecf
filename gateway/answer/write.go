package answer

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/internal/plainjson"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// JSON sends v as a JSON body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	b, err := plainjson.Marshal(v)
	send(w, status, b, err)
}

// Streamer is a result that writes its own JSON: one too large to encode
// into memory whole (a read's content).
type Streamer interface {
	WriteJSON(w io.Writer) error
}

// Command sends a command's envelope: {"<command>": result}, or
// {"<command>": null, "error": failure} when the server refused it. It is
// put together from the parts' JSON, without a map of one key to encode
// for every request.
func Command(w http.ResponseWriter, name string, result any, failure *commands.Failure) {
	if s, ok := result.(Streamer); ok && failure == nil {
		stream(w, name, s)
		return
	}
	b, err := plainjson.Marshal(result)
	var f []byte
	if err == nil && failure != nil {
		f, err = plainjson.Marshal(failure)
	}
	if err != nil {
		send(w, http.StatusInternalServerError, nil, err)
		return
	}
	// Room for the envelope and for send's newline.
	envelope := make([]byte, 0, len(name)+len(b)+len(f)+len(`{"":,"error":}`)+1)
	envelope = appendName(envelope, name)
	envelope = append(envelope, b...)
	if f != nil {
		envelope = append(append(envelope, `,"error":`...), f...)
	}
	send(w, http.StatusOK, append(envelope, '}'), nil)
}

// appendName appends the envelope's start, {"<name>":.
func appendName(b []byte, name string) []byte {
	// A command's name is valid UTF-8: there is no error to check.
	b, _ = jsontext.AppendQuote(append(b, '{'), name)
	return append(b, ':')
}

// stream sends the envelope of a result that writes itself, as it writes
// it. An error halfway can no longer change the status: the body ends
// short, which no JSON parser takes for a whole answer.
func stream(w http.ResponseWriter, name string, s Streamer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(appendName(nil, name)); err != nil {
		return
	}
	if err := s.WriteJSON(w); err != nil {
		return
	}
	_, _ = io.WriteString(w, "}\n")
}

// Err answers err: an *Error as it says, anything else as internal. It
// logs every 5xx once to log (nil: nowhere), with its cause and the
// request id; a panic that recovery.Error turned into ErrPanic was
// logged, with its stack, where it was recovered (a *recovery.Panic, from
// the request's handler, was not).
func Err(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = Internal(err)
	}
	_, unlogged := errors.AsType[*recovery.Panic](e.Cause)
	if e.Status >= http.StatusInternalServerError && (unlogged || !errors.Is(e.Cause, recovery.ErrPanic)) {
		attrs := []any{"requestID", middleware.GetReqID(r.Context()), "status", e.Status, "code", e.Code}
		if e.Cause != nil {
			attrs = append(attrs, "error", e.Cause)
		}
		logging.OrDiscard(log).Error("request failed", attrs...)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sftpgate"`)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", cmp.Or(e.Allow, http.MethodPost))
	}
	if e.RetryAfter > 0 {
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

// CodeOf is the code err answers with.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal(err).Code
}
