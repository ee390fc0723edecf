package audit

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The bounds of a record's members, applied when it is linked: whatever
// a request's header, a partner's file name or an error carries, a
// record stays small enough to store, deliver and read back, and its
// hash covers exactly the valid UTF-8 that is stored (docs/audit.md).
const (
	// MaxMember is the most bytes a string member takes in the record's
	// JSON, its quotes and escapes included.
	MaxMember = 1024
	// MaxPath is the same for each of Paths, and MaxPaths how many.
	MaxPath  = 4096
	MaxPaths = 16
	// MaxLost is how many spans one drop record names; more are said in
	// more drop records.
	MaxLost = 64
	// MaxRecordBytes bounds a linked record's line, whatever its members
	// held (TestLargestRecord).
	MaxRecordBytes = 96 << 10
)

// Cut ends a member cut at its bound.
const Cut = "…[cut]"

// bounded is r with each member within its bound: valid UTF-8, cut
// where it is too long, the paths past MaxPaths said in one last entry.
func bounded(r Record) Record {
	for _, s := range []*string{&r.Action, &r.Actor.Kind, &r.Actor.Name, &r.Client, &r.Connection, &r.Namespace,
		&r.Object, &r.RequestID, &r.Result, &r.SHA256, &r.TraceID} {
		*s = bound(*s, MaxMember)
	}
	// The caller's slice stays as it was: a copy is cut.
	paths, copied := r.Paths, false
	if len(paths) > MaxPaths {
		more := len(paths) - (MaxPaths - 1)
		paths, copied = append(paths[:MaxPaths-1:MaxPaths-1], Cut+" "+strconv.Itoa(more)+" more"), true
	}
	for i, p := range paths {
		if b := bound(p, MaxPath); b != p {
			if !copied {
				paths, copied = slices.Clone(paths), true
			}
			paths[i] = b
		}
	}
	r.Paths = paths
	return r
}

// bound is s as valid UTF-8 (each invalid byte U+FFFD, as encoding/json
// writes it) whose JSON string takes at most limit bytes; a longer one is
// cut at a character and ends with Cut.
func bound(s string, limit int) string {
	// Every byte takes at most 6 in JSON (\u00XX, \ufffd, \u2028), and
	// at least 1: past limit bytes it is cut anyway.
	if len(s) <= (limit-2)/6 && utf8.ValidString(s) {
		return s
	}
	s = strings.Map(func(c rune) rune { return c }, s[:min(len(s), limit)])
	n, cutAt := 2, 0
	for i, c := range s {
		w := jsonLen(c)
		if n+w <= limit-len(Cut) {
			cutAt = i + utf8.RuneLen(c)
		}
		if n += w; n > limit {
			return s[:cutAt] + Cut
		}
	}
	return s
}

// jsonLen is how many bytes c takes in a JSON string as appendString
// writes it.
func jsonLen(c rune) int {
	switch {
	case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20 || c == '\u2028' || c == '\u2029':
		return 6
	}
	return utf8.RuneLen(c)
}
