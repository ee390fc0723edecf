// Package calendar is when things are due: a cron expression in an IANA
// time zone (a TransferSchedule's runs), and the windows of an
// expectation, each opening when its schedule fires, on a date not
// skipped, and closing at a deadline counted on its zone's wall clock.
//
// Time zones change their clocks. A TransferSchedule's expression fires
// as robfig/cron reads it in the zone: a time the clock skips does not
// fire that day. An expectation's windows are read on the wall clock
// instead, so that a daily window opens every day: its expression fires
// at wall-clock times, and each is placed on the zone's clock, a time the
// clock skips (02:30 in spring) at the jump's end (03:00), and a time it
// reads twice (02:30 in autumn) at its first reading. A deadline is the
// opening's wall-clock time plus the window's length, placed alike: a
// window from 00:00 to 06:00 closes at 06:00 on the nights the clocks
// change too, five or seven hours later.
package calendar

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Parse reads a cron expression (five fields or a descriptor such as
// @daily) in the time zone tz (UTC when empty).
func Parse(expr, tz string) (cron.Schedule, error) {
	loc, err := Zone(tz)
	if err != nil {
		return nil, err
	}
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, fmt.Errorf("the schedule %q: %w", expr, err)
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		spec.Location = loc
	}
	return sched, nil
}

// Zone is the IANA time zone tz, UTC when empty.
func Zone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("the time zone %q is unknown", tz)
	}
	return loc, nil
}

// Date is a day of a zone's calendar.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDate reads a date as YYYY-MM-DD.
func ParseDate(s string) (Date, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return Date{}, fmt.Errorf("the date %q is not YYYY-MM-DD", s)
	}
	return DateOf(t), nil
}

// DateOf is the day t falls on, in t's zone.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// Window is a span files are due in: from Opens until Deadline.
type Window struct {
	Opens, Deadline time.Time
}

// IsZero reports whether w is no window.
func (w Window) IsZero() bool { return w.Opens.IsZero() }

// Windows are an expectation's windows.
type Windows struct {
	schedule cron.Schedule
	loc      *time.Location
	length   time.Duration
	skip     map[Date]bool
}

// MaxLength is the longest window: a month's.
const MaxLength = 31 * 24 * time.Hour

// maxSkipped bounds how many skipped dates (and openings before the time
// asked) in a row After passes over before it says there is none.
const maxSkipped = 1000

// NewWindows are the windows that open when expr fires in the zone tz,
// each length long on the zone's wall clock, except those opening on a
// date of skip.
func NewWindows(expr, tz string, length time.Duration, skip []Date) (*Windows, error) {
	if length <= 0 || length > MaxLength {
		return nil, fmt.Errorf("a window's length must be positive and at most %s, not %s", MaxLength, length)
	}
	loc, err := Zone(tz)
	if err != nil {
		return nil, err
	}
	// Read on the wall clock (wallClock), as if in UTC.
	sched, err := Parse(expr, "")
	if err != nil {
		return nil, err
	}
	w := &Windows{schedule: sched, loc: loc, length: length, skip: map[Date]bool{}}
	for _, d := range skip {
		w.skip[d] = true
	}
	return w, nil
}

// After is the first window that opens after t; the zero Window when
// none ever does (an expression that never fires, such as 30 February,
// or every opening skipped).
func (w *Windows) After(t time.Time) Window {
	at := wallClock(t, w.loc)
	for range maxSkipped {
		next := w.schedule.Next(at)
		if next.IsZero() {
			return Window{}
		}
		at = next
		if d := DateOf(next); w.skip[d] {
			// On to the day's last second: a skipped day is one step
			// however often the expression fires in it.
			at = time.Date(d.Year, d.Month, d.Day+1, 0, 0, -1, 0, time.UTC)
			continue
		}
		opens := onClock(next, w.loc)
		// In the hour the clock reads twice, a reading after t's may be
		// placed at its first, before t.
		if !opens.After(t) {
			continue
		}
		return Window{Opens: opens, Deadline: onClock(next.Add(w.length), w.loc)}
	}
	return Window{}
}

// wallClock is what loc's clock reads at t, as a time in UTC: the
// schedule's expression is read on it.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// onClock is when loc's clock reads wall: a reading it skips at the
// jump's end, one it makes twice at the first.
func onClock(wall time.Time, loc *time.Location) time.Time {
	t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), loc)
	start, _ := t.ZoneBounds()
	switch {
	case !wallClock(t, loc).Equal(wall):
		// Skipped: time.Date went on past the jump, whose end is when
		// t's zone began.
		return start
	case !start.IsZero():
		// Read twice: the first reading is before the clock went back.
		_, after := t.Zone()
		_, before := start.Add(-time.Nanosecond).Zone()
		if first := t.Add(-time.Duration(before-after) * time.Second); before > after && wallClock(first, loc).Equal(wall) {
			return first
		}
	}
	return t
}
