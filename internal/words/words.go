// Package words says counts and times as people read them: "1 file", "2
// files", "3 minutes ago". The web UI's pages and the statuses people
// read in kubectl share it, so that both say them the same way.
package words

import (
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// Count is n with the noun's singular (one) or plural (many) form.
func Count(n int64, one, many string) string {
	if n == 1 || n == -1 {
		return strconv.FormatInt(n, 10) + " " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// Ago says how long before now t was: "just now", "1 minute ago",
// "3 hours ago"; past two days, the day, in UTC.
func Ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return Count(int64(d/time.Second), "second", "seconds") + " ago"
	case d < time.Hour:
		return Count(int64(d/time.Minute), "minute", "minutes") + " ago"
	case d < 48*time.Hour:
		return Count(int64(d/time.Hour), "hour", "hours") + " ago"
	}
	return t.UTC().Format("2 Jan 2006")
}

// Time is t as a date and time a person reads anywhere: its day, its
// hour and minute, and the zone, UTC.
func Time(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04 MST") }

// Percent is part of whole, in whole percent (100 when whole is 0).
func Percent(part, whole int64) string {
	if whole <= 0 {
		return "100%"
	}
	return fmt.Sprintf("%d%%", part*100/whole)
}

// Sentence is s with its first letter upper-case, as a message shown on
// its own begins (errors are written to be wrapped, in lower case).
func Sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
