package answer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// JSON sends v as a JSON body with status.
func JSON(w http.ResponseWriter, status int, v any) {
	e := getEncoder()
	defer e.put()
	if err := e.enc.Encode(v); err != nil {
		send(w, 0, nil, err)
		return
	}
	send(w, status, e.buf.Bytes(), nil)
}

// Streamer is a result that writes its own JSON: one too large to encode
// into memory whole (a read's content).
type Streamer interface {
	WriteJSON(w io.Writer) error
}

// Command sends a command's envelope: {"<command>": result}, or
// {"<command>": null, "error": failure} when the server refused it. It is
// put together from the parts' JSON in one buffer kept for the next
// answer, without a map of one key to encode for every request.
func Command(w http.ResponseWriter, name string, result any, failure *commands.Failure) {
	if s, ok := result.(Streamer); ok && failure == nil {
		stream(w, name, s)
		return
	}
	e := getEncoder()
	defer e.put()
	e.buf.Write(appendName(e.buf.AvailableBuffer(), name))
	err := e.encode(result)
	if err == nil && failure != nil {
		e.buf.WriteString(`,"error":`)
		err = e.encode(failure)
	}
	if err != nil {
		send(w, 0, nil, err)
		return
	}
	e.buf.WriteString("}\n")
	send(w, http.StatusOK, e.buf.Bytes(), nil)
}

// encoder is a buffer and an encoding/json encoder into it, without the
// escapes for HTML (as plainjson), kept for the next answer.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// maxKeptBuffer is the largest buffer kept for the next answer: a large
// listing's is left to the collector.
const maxKeptBuffer = 64 << 10

func getEncoder() *encoder { return encoders.Get().(*encoder) }

func (e *encoder) put() {
	if e.buf.Cap() > maxKeptBuffer {
		return
	}
	e.buf.Reset()
	encoders.Put(e)
}

// encode appends v's JSON, without the newline Encode ends it with.
func (e *encoder) encode(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.buf.Truncate(e.buf.Len() - 1)
	return nil
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
	w.Header()["Content-Type"] = jsonContentType
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

// jsonContentType is every JSON answer's Content-Type, one slice for all:
// a header's values are replaced or appended to, never written in place
// (net/http, httptest and tusd copy a header before they change it), and
// a new slice cost an allocation per answer.
var jsonContentType = []string{"application/json"}

// send writes a JSON body that ends with a newline, or, when it could not
// be encoded, an internal error.
func send(w http.ResponseWriter, status int, b []byte, err error) {
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"cannot encode the response"}}`+"\n")
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// CodeOf is the code err answers with.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal(err).Code
}
