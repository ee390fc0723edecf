package recovery

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestPanicsBecomeLoggedErrors(t *testing.T) {
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	fails := func() (err error) {
		defer Error(&err, "a handler")
		panic(errors.New("a bug"))
	}
	if err := fails(); !errors.Is(err, ErrPanic) {
		t.Errorf("err = %v, want ErrPanic", err)
	}
	func() {
		defer Log("a loop")
		panic("boom")
	}()
	for _, want := range []string{"in=\"a handler\"", "a bug", "in=\"a loop\"", "panic=boom", "recovery_test.go"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log has no %s:\n%s", want, logged.String())
		}
	}
}
