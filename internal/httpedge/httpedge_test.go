package httpedge

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5/middleware"
)

// TestRequestID: a client's id is taken only as a short token of safe
// characters; anything else gets one the server makes, which is what
// middleware.GetReqID reads and no client's id can be.
func TestRequestID(t *testing.T) {
	for _, c := range []struct {
		name string
		ids  []string // none: no header
		kept bool
	}{
		{"none", nil, false},
		{"empty", []string{""}, false},
		{"a UUID", []string{"0f8fad5b-d9cb-469f-a165-70867728950e"}, true},
		{"every safe character", []string{"AZaz09._:-"}, true},
		{"one byte", []string{"x"}, true},
		{"64 bytes", []string{strings.Repeat("a", 64)}, true},
		{"65 bytes", []string{strings.Repeat("a", 65)}, false},
		{"180 kB", []string{strings.Repeat("a", 180_000)}, false},
		{"180 kB of 0x80", []string{strings.Repeat("\x80", 180_000)}, false},
		{"one byte not UTF-8", []string{"abc\x80"}, false},
		{"control bytes", []string{"a\x00b\x01c\x7f"}, false},
		{"tab", []string{"a\tb"}, false},
		{"CR LF", []string{"a\r\nX-Injected: 1"}, false},
		{"a space", []string{"a b"}, false},
		{"a slash, as a server's", []string{"host/AbCdEfGhIj-000001"}, false},
		{"unicode", []string{"café-ü-☃"}, false},
		{"a formula", []string{`=HYPERLINK("http://x")`}, false},
		{"a quote", []string{`a"b`}, false},
		{"two values", []string{"one", "two"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, id := range c.ids {
				req.Header.Add(middleware.RequestIDHeader, id)
			}
			var got, header string
			RequestID(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, header = middleware.GetReqID(r.Context()), r.Header.Get(middleware.RequestIDHeader)
			})).ServeHTTP(httptest.NewRecorder(), req)
			if c.kept {
				if got != c.ids[0] || header != c.ids[0] {
					t.Errorf("the client's id %q became %q (header %q)", c.ids[0], got, header)
				}
				return
			}
			if ValidRequestID(got) || !strings.Contains(got, "/") || len(got) > 200 {
				t.Errorf("got %.80q, want one the server made", got)
			}
			if header != "" {
				t.Errorf("the refused header is still there for handlers: %.80q", header)
			}
		})
	}
}

// TestRequestIDsMadeDiffer: ids the server makes are not reused.
func TestRequestIDsMadeDiffer(t *testing.T) {
	seen := map[string]bool{}
	h := RequestID(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen[middleware.GetReqID(r.Context())] = true }))
	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(middleware.RequestIDHeader, "bad id")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(seen) != 3 {
		t.Errorf("3 requests got %d ids: %v", len(seen), seen)
	}
}

// TestRequestIDMade: an id the server makes reads as chi's do, host, ten
// random characters and a count of six digits or more, in one
// allocation; a client's is taken in none.
func TestRequestIDMade(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if id := TakeRequestID(req); !regexp.MustCompile(`^[^/]+/[A-Z2-7]{10}-[0-9]{6,}$`).MatchString(id) {
		t.Errorf("made %q", id)
	}
	if n := testing.AllocsPerRun(100, func() { TakeRequestID(req) }); n > 1 {
		t.Errorf("making an id: %v allocations", n)
	}
	req.Header.Set(middleware.RequestIDHeader, "ci-42")
	if n := testing.AllocsPerRun(100, func() { TakeRequestID(req) }); n > 0 {
		t.Errorf("taking the client's: %v allocations", n)
	}
}
