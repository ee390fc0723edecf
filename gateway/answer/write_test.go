package answer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/sftpgate/sftpgate/gateway/commands"
	"github.com/sftpgate/sftpgate/gateway/openapi"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// The envelope is valid JSON in every case, an unencodable result being an
// internal error.
func TestCommand(t *testing.T) {
	status := uint32(2)
	for _, tc := range []struct {
		name    string
		result  any
		failure *commands.Failure
		status  int
		want    string
	}{
		{"result", map[string]int{"size": 1}, nil, http.StatusOK, `{"stat":{"size":1}}`},
		{"failure", nil, &commands.Failure{Code: "not_found", Message: "/a: no such file", SFTPStatus: &status}, http.StatusOK,
			`{"stat":null,"error":{"code":"not_found","message":"/a: no such file","sftpStatus":2}}`},
		{"unencodable", func() {}, nil, http.StatusInternalServerError, `{"error":{"code":"internal","message":"cannot encode the response"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Command(rec, "stat", tc.result, tc.failure)
			body := rec.Body.Bytes()
			if rec.Code != tc.status || string(body) != tc.want+"\n" || !json.Valid(body) {
				t.Errorf("%d %s, want %d %s", rec.Code, body, tc.status, tc.want)
			}
		})
	}
}

// Every 5xx is logged once, with its cause and the request id; nothing
// else is, and a cause is never sent.
func TestErrLogsEvery5xxOnce(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	secret := errors.New("dial tcp 10.0.0.7:22: /home/alice/private")
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		logged  bool
		headers map[string]string
	}{
		{"upstream", UpstreamUnavailable("the connection to the server broke; retry", secret), http.StatusBadGateway, true, nil},
		{"not an API error", secret, http.StatusInternalServerError, true, nil},
		{"a recovered panic, logged where it happened", Internal(recovery.ErrPanic), http.StatusInternalServerError, false, nil},
		{"unauthorized", Unauthorized("send an API key"), http.StatusUnauthorized, false, map[string]string{"WWW-Authenticate": `Bearer realm="sftpgate"`}},
		{"rate limited", RateLimited(1500 * time.Millisecond), http.StatusTooManyRequests, false, map[string]string{"Retry-After": "2"}},
		{"method", MethodNotAllowed(), http.StatusMethodNotAllowed, false, map[string]string{"Allow": "POST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged.Reset()
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/x/stat", nil)
			r = r.WithContext(context.WithValue(r.Context(), middleware.RequestIDKey, "req-42"))
			Err(log, rec, r, tc.err)
			if rec.Code != tc.status || strings.Contains(rec.Body.String(), "alice") || !json.Valid(rec.Body.Bytes()) {
				t.Errorf("answer %d %s", rec.Code, rec.Body)
			}
			for h, want := range tc.headers {
				if got := rec.Header().Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
			lines := strings.Count(logged.String(), "request failed")
			if want := map[bool]int{true: 1}[tc.logged]; lines != want {
				t.Fatalf("logged %d times, want %d:\n%s", lines, want, logged.String())
			}
			if tc.logged && (!strings.Contains(logged.String(), "req-42") || !strings.Contains(logged.String(), "alice")) {
				t.Errorf("the log line lacks the request id or the cause: %s", logged.String())
			}
		})
	}
}

// The codes the gateway answers are the ones its OpenAPI document lists.
func TestCodesAreDocumented(t *testing.T) {
	doc, err := openapi.Document("/")
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil {
		t.Fatal(err)
	}
	documented := parsed.Components.Schemas.Error.Properties.Error.Properties.Code.Enum
	var answered []string
	for _, e := range []*Error{NotFound(), MethodNotAllowed(), UnknownCommand("x"), Unauthorized(""), Forbidden(""),
		ConnectionNotFound(), ConnectionNotReady("", nil), RateLimited(0), BodyTooLarge("upload", 1), UnsupportedMediaType(),
		InvalidRequest("", ""), UpstreamTimeout(nil), UpstreamUnavailable("", nil), Internal(nil),
		TooManyInFlight("", 1), Busy(nil), ConnectionBusy(), AuthUnavailable(nil), PathNotAllowed("", ""), SymlinkNotAllowed("", ""),
		MethodOverride()} {
		answered = append(answered, e.Code)
	}
	// NotSynced answers /readyz, a probe the API document does not
	// describe; ClientGone only the log, as the client has gone.
	slices.Sort(documented)
	slices.Sort(answered)
	if !slices.Equal(documented, answered) {
		t.Errorf("the OpenAPI document lists %v; the gateway answers %v", documented, answered)
	}
}
