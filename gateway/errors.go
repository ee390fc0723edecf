package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

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
