package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/ratelimit"
)

// apiError is the one shape of every error outside the command envelope:
// {"error": {"code", "message"}}, with "field" for invalid requests.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// retryAfter is sent as Retry-After with 429.
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.Message }

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	send(w, status, b, err)
}

// writeAnswer sends a command's envelope: {"<command>": result}, or
// {"<command>": null, "error": failure} when the server refused it. It is
// put together from the parts' JSON, without a map of one key to encode
// for every request.
func writeAnswer(w http.ResponseWriter, name string, result any, failure *commands.Failure) {
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
	answer := make([]byte, 0, len(name)+len(b)+len(f)+len(`{"":,"error":}`)+1)
	// A command's name is valid UTF-8: there is no error to check.
	answer, _ = jsontext.AppendQuote(append(answer, '{'), name)
	answer = append(append(answer, ':'), b...)
	if f != nil {
		answer = append(append(answer, `,"error":`...), f...)
	}
	send(w, http.StatusOK, append(answer, '}'), nil)
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

func writeError(w http.ResponseWriter, e *apiError) {
	switch e.Status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sftpgate"`)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", ratelimit.RetryAfter(e.retryAfter))
	}
	writeJSON(w, e.Status, map[string]*apiError{"error": e})
}
