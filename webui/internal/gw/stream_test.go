package gw

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestStreamOutlastsTheServersBound: an answer that keeps moving goes on
// past the server's read and write timeouts, which would otherwise cut it
// (the read one through net/http's background read).
func TestStreamOutlastsTheServersBound(t *testing.T) {
	const parts, pause = 8, 100 * time.Millisecond
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, _ = streaming(w, r)
		for range parts {
			if _, err := w.Write(make([]byte, 1024)); err != nil {
				return
			}
			_ = http.NewResponseController(w).Flush()
			time.Sleep(pause)
		}
	}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 3*pause, 3*pause
	srv.Start()
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != parts*1024 {
		t.Errorf("read %d bytes of %d (%v)", n, parts*1024, err)
	}
}
