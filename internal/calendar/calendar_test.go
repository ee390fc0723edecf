package calendar

import (
	"testing"
	"time"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func windows(t *testing.T, expr string, length time.Duration, skip ...string) *Windows {
	t.Helper()
	var dates []Date
	for _, s := range skip {
		d, err := ParseDate(s)
		if err != nil {
			t.Fatal(err)
		}
		dates = append(dates, d)
	}
	w, err := NewWindows(expr, "Europe/Berlin", length, dates)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWindows: windows open when the schedule fires in the zone and close
// at their length on its wall clock, across the clocks' changes, at
// midnight, on a leap day, and not on a skipped date.
func TestWindows(t *testing.T) {
	loc := berlin(t)
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, expr    string
		length        time.Duration
		skip          []string
		after         time.Time
		opens, closes string // as Europe/Berlin's clock reads them, with the offset
		hours         float64
	}{
		{"an ordinary night", "0 0 * * *", 6 * time.Hour, nil, at("2026-03-26 12:00"), "2026-03-27 00:00 +0100", "2026-03-27 06:00 +0100", 6},
		{"the night the clocks go forward: five hours", "0 0 * * *", 6 * time.Hour, nil, at("2026-03-28 12:00"), "2026-03-29 00:00 +0100", "2026-03-29 06:00 +0200", 5},
		{"the night the clocks go back: seven hours", "0 0 * * *", 6 * time.Hour, nil, at("2026-10-24 12:00"), "2026-10-25 00:00 +0200", "2026-10-25 06:00 +0100", 7},
		{"opening at 02:30, which the clock skips: at the jump's end", "30 2 * * *", time.Hour, nil, at("2026-03-28 12:00"), "2026-03-29 03:00 +0200", "2026-03-29 03:30 +0200", 0.5},
		{"opening at 02:30, which the clock reads twice: at the first", "30 2 * * *", time.Hour, nil, at("2026-10-24 12:00"), "2026-10-25 02:30 +0200", "2026-10-25 03:30 +0100", 2},
		{"a deadline at 02:30, which the clock skips", "0 1 * * *", 90 * time.Minute, nil, at("2026-03-28 12:00"), "2026-03-29 01:00 +0100", "2026-03-29 03:00 +0200", 1},
		{"a deadline at midnight", "0 18 * * *", 6 * time.Hour, nil, at("2026-06-01 12:00"), "2026-06-01 18:00 +0200", "2026-06-02 00:00 +0200", 6},
		{"a leap day", "0 0 29 2 *", 24 * time.Hour, nil, at("2026-03-01 00:00"), "2028-02-29 00:00 +0100", "2028-03-01 00:00 +0100", 24},
		{"every minute, a whole day skipped", "* * * * *", time.Minute, []string{"2026-03-30"}, at("2026-03-29 23:59"), "2026-03-31 00:00 +0200", "2026-03-31 00:01 +0200", 1.0 / 60},
		{"business days, Christmas skipped", "0 0 * * 1-5", 6 * time.Hour, []string{"2026-12-25"}, at("2026-12-24 12:00"), "2026-12-28 00:00 +0100", "2026-12-28 06:00 +0100", 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := windows(t, c.expr, c.length, c.skip...).After(c.after)
			const layout = "2006-01-02 15:04 -0700"
			if got := w.Opens.In(loc).Format(layout); got != c.opens {
				t.Errorf("opens %s, want %s", got, c.opens)
			}
			if got := w.Deadline.In(loc).Format(layout); got != c.closes {
				t.Errorf("closes %s, want %s", got, c.closes)
			}
			if got := w.Deadline.Sub(w.Opens).Hours(); got != c.hours {
				t.Errorf("%v hours long, want %v", got, c.hours)
			}
		})
	}
}

// TestNoWindow: an expression that never fires, and one whose every
// opening is skipped, have no window; a bad expression, zone or length
// is refused.
func TestNoWindow(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if w := windows(t, "0 0 30 2 *", time.Hour).After(now); !w.IsZero() {
		t.Errorf("30 February opens %v", w)
	}
	if w := windows(t, "0 0 1 1 *", time.Hour, "2027-01-01", "2028-01-01", "2029-01-01").After(now); w.Opens.In(berlin(t)).Year() != 2030 {
		t.Errorf("New Year skipped thrice opens %v, want in 2030", w.Opens)
	}
	for _, bad := range []struct {
		expr, tz string
		length   time.Duration
	}{{"0 0 * *", "UTC", time.Hour}, {"0 0 * * *", "Mars/Olympus", time.Hour}, {"0 0 * * *", "UTC", 0}} {
		if _, err := NewWindows(bad.expr, bad.tz, bad.length, nil); err == nil {
			t.Errorf("%q in %q, %s long: taken", bad.expr, bad.tz, bad.length)
		}
	}
	if _, err := ParseDate("2026-02-30"); err == nil {
		t.Error("30 February 2026 taken as a date")
	}
}

// TestEveryDayOnce: a daily window at a time the clocks skip or repeat
// once a year opens once on every day of the year, in order, however it
// is walked (from each opening, or from inside the repeated hour).
func TestEveryDayOnce(t *testing.T) {
	loc := berlin(t)
	for _, expr := range []string{"30 2 * * *", "0 0 * * *", "59 23 * * *"} {
		w := windows(t, expr, time.Hour)
		seen := map[Date]bool{}
		last := time.Date(2025, 12, 31, 23, 59, 0, 0, loc)
		for {
			next := w.After(last)
			if next.Opens.In(loc).Year() != 2026 {
				break
			}
			if !next.Opens.After(last) || !next.Deadline.After(next.Opens) {
				t.Fatalf("%s: after %v comes %v", expr, last, next)
			}
			d := DateOf(next.Opens.In(loc))
			if seen[d] {
				t.Fatalf("%s: two windows on %s", expr, d)
			}
			seen[d] = true
			last = next.Opens
		}
		if len(seen) != 365 {
			t.Errorf("%s: windows on %d days of 2026", expr, len(seen))
		}
	}
	// From inside the hour read twice, after its first 02:30: the next
	// opening is the next day's, not the second 02:30.
	second := time.Date(2026, 10, 25, 1, 40, 0, 0, time.UTC) // 02:40 CET, the second reading
	if next := windows(t, "30 2 * * *", time.Hour).After(second); DateOf(next.Opens.In(loc)) != (Date{2026, time.October, 26}) {
		t.Errorf("after the second 02:40 comes %v", next.Opens.In(loc))
	}
}
