package gateway

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestCommandRoute: every path the front routes to a command itself, chi's
// mux routes to the same command of the same slug; the front leaves the
// rest to the mux.
func TestCommandRoute(t *testing.T) {
	segments := []string{"", "box", "write", "uploads", "healthz", "readyz", "docs", "openapi.json", "api", "a b", "é", "x%2Fy", "a/b", ".", ".."}
	for _, base := range []string{"/", "/api", "/api/v1/"} {
		s := &Server{}
		var routed struct {
			slug, command string
			ok            bool
		}
		command := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			routed.slug, routed.command, routed.ok = chi.URLParam(r, "slug"), chi.URLParam(r, "command"), true
		})
		f := s.routes(base, &handler{}).(*front)
		f.mux = s.mux(base, command, func(http.ResponseWriter, *http.Request) {})
		fast := 0
		var paths []string
		for _, a := range segments {
			for _, b := range segments {
				for _, c := range []string{"", "/", "/x"} {
					paths = append(paths, url.PathEscape(a)+"/"+url.PathEscape(b)+c, a+"/"+b+c)
				}
			}
		}
		for _, p := range paths {
			target := strings.TrimSuffix(base, "/") + "/" + p
			u, err := url.ParseRequestURI(target)
			if err != nil {
				continue
			}
			r := (&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}}).WithContext(t.Context())
			slug, cmd, ok := f.commandRoute(r)
			if !ok {
				continue
			}
			fast++
			routed.ok = false
			f.mux.ServeHTTP(httptest.NewRecorder(), r)
			if !routed.ok || routed.slug != slug || routed.command != cmd {
				t.Errorf("base %s, %s: the front routes to %q %q, chi to %q %q (%v)", base, target, slug, cmd, routed.slug, routed.command, routed.ok)
			}
		}
		if fast == 0 {
			t.Errorf("base %s: the front routed nothing", base)
		}
	}
}
