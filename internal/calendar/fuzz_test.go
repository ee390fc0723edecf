package calendar

import (
	"testing"
	"time"
)

// FuzzWindows: a schedule a tenant writes (its expression, zone, length
// and skipped dates) is refused or gives windows that open after the
// time asked and close after they open, without a panic, however it
// reads.
func FuzzWindows(f *testing.F) {
	f.Add("0 0 * * 1-5", "Europe/Berlin", int64(6*time.Hour), "2026-12-25")
	f.Add("30 2 * * *", "America/New_York", int64(time.Minute), "")
	f.Add("@every 1s", "", int64(time.Second), "2026-01-01")
	f.Add("0 0 30 2 *", "UTC", int64(time.Hour), "2026-02-30")
	f.Fuzz(func(t *testing.T, expr, tz string, length int64, skip string) {
		var dates []Date
		if d, err := ParseDate(skip); err == nil {
			dates = append(dates, d)
		}
		w, err := NewWindows(expr, tz, time.Duration(length), dates)
		if err != nil {
			return
		}
		from := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC)
		if got := w.After(from); !got.IsZero() && (!got.Opens.After(from) || got.Deadline.Before(got.Opens)) {
			t.Fatalf("%q in %q, %d long: after %v comes %+v", expr, tz, length, from, got)
		}
	})
}
