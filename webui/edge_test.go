package webui_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/internal/httpedge"
)

// TestHeadersBounded: the server Run serves refuses a request whose
// headers pass httpedge.MaxHeaderBytes with 431, before anything reads
// it, and serves one just under it.
func TestHeadersBounded(t *testing.T) {
	t.Parallel()
	srv := newUIServer(nil).HTTPServer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + l.Addr().String() + "/login"
	for _, c := range []struct {
		name, header, value string
		want                int
	}{
		{"headers just under the bound", "Cookie", "a=" + strings.Repeat("a", httpedge.MaxHeaderBytes-4<<10), http.StatusOK},
		{"a header over the bound", "Cookie", "a=" + strings.Repeat("a", httpedge.MaxHeaderBytes+8<<10), http.StatusRequestHeaderFieldsTooLarge},
		{"a 180 kB X-Request-Id of 0x80 bytes", "X-Request-Id", strings.Repeat("\x80", 180_000), http.StatusRequestHeaderFieldsTooLarge},
	} {
		if status, body := testhttp.Raw(t, http.MethodGet, url, "", c.header, c.value); status != c.want {
			t.Errorf("%s: %d %.200s, want %d", c.name, status, body, c.want)
		}
	}
}
