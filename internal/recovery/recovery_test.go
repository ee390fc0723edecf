package recovery

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPanicsBecomeLoggedErrors(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))

	fails := func() (err error) {
		defer Error(log, &err, "a handler")
		panic(errors.New("a bug"))
	}
	if err := fails(); !errors.Is(err, ErrPanic) {
		t.Errorf("err = %v, want ErrPanic", err)
	}
	func() {
		defer Log(log, "a loop")
		panic("boom")
	}()
	func() {
		defer Log(nil, "a loop without a logger")
		panic("boom")
	}()
	for _, want := range []string{"in=\"a handler\"", "a bug", "in=\"a loop\"", "panic=boom", "recovery_test.go"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, logged.String())
		}
	}
}

// TestMiddleware: a handler's panic becomes a *Panic, with its stack, for
// the server's one place that answers errors; it is not logged here (the
// middleware has no logger), so that it is logged once, there.
// http.ErrAbortHandler passes on.
func TestMiddleware(t *testing.T) {
	var got error
	h := Middleware(func(w http.ResponseWriter, _ *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusInternalServerError)
	})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	p, ok := errors.AsType[*Panic](got)
	if !ok || !errors.Is(got, ErrPanic) || p.Value != "a bug" || !strings.Contains(p.Stack, "recovery_test.go") || rec.Code != http.StatusInternalServerError {
		t.Errorf("the panic answered as %v (%d)", got, rec.Code)
	}
	abort := Middleware(func(http.ResponseWriter, *http.Request, error) { t.Error("ErrAbortHandler answered") })(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself
			t.Errorf("recovered %v, want http.ErrAbortHandler passed on", v)
		}
	}()
	abort.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
}
