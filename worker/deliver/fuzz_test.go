package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// FuzzSubject: an event whose subject names a file of any name (a
// server's: not UTF-8, control bytes, long) is delivered, its subject as
// sent wherever HTTP can carry it, percent-encoded where not.
func FuzzSubject(f *testing.F) {
	for _, name := range []string{"a.csv", "line\nbreak", "cr\rlf", "\x00nul", "tab\tx", "\xff\xfe", "é", "\x1b[31mred", "del\x7f", "100%", strings.Repeat("n", 300)} {
		f.Add(name)
	}
	var (
		mu   sync.Mutex
		got  string
		sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = r.Header.Get("Ce-Subject")
			mu.Unlock()
		}))
	)
	f.Cleanup(sink.Close)
	s, err := New(egress.Policy{}, tenants.Kinds{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e := event("id")
		subject := "/incoming/" + name
		e.SetSubject(subject)
		if out := s.Send(context.Background(), "default", sink.URL, e, 10*time.Second, nil); !out.Delivered {
			t.Fatalf("%q: %+v", subject, out)
		}
		mu.Lock()
		defer mu.Unlock()
		if hasControl(got) || !hasControl(e.Subject()) && got != e.Subject() {
			t.Fatalf("%q arrived as %q", e.Subject(), got)
		}
	})
}
