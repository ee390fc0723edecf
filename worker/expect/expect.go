// Package expect decides an expectation's windows: from the files its
// folder's listings showed and when, whether a window's files came
// before its deadline (Met), did not (Missed), came after it (Late), or
// came but were not picked up in time (NotProcessed). It is pure: the
// worker feeds it what listings showed and the time, and announces what
// it decides.
package expect

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sftpgate/sftpgate/internal/calendar"
)

// Outcome is what became of a window.
type Outcome string

// The outcomes, in the order a window may have them: Met or
// NotProcessed, or Missed and then perhaps Late (and NotProcessed after
// that).
const (
	Met          Outcome = "Met"
	Missed       Outcome = "Missed"
	Late         Outcome = "Late"
	NotProcessed Outcome = "NotProcessed"
)

// Rule is which files a window expects.
type Rule struct {
	// Globs match a file's name (path.Match); a file matching any
	// counts.
	Globs []string
	// MinCount is how many must come (1 when 0).
	MinCount int
	// MinSize and MaxSize bound a file's size (MaxSize 0: unbounded).
	MinSize, MaxSize int64
	// PickUpWithin, when set, is how soon after it came each counted
	// file must be gone from the folder (moved, deleted, or copied by a
	// transfer that removes it).
	PickUpWithin time.Duration
}

// Seen is a file as the folder's listings showed it.
type Seen struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Mod is its modification time as listed: another one under its name
	// is another file.
	Mod time.Time `json:"mod,omitzero"`
	// Came is when it settled: when a listing first showed it settled,
	// or, for one that settled while no one listed (the worker down),
	// its modification time.
	Came time.Time `json:"came,omitzero"`
	// Gone is when a listing first no longer showed it; zero while it is
	// there.
	Gone time.Time `json:"gone,omitzero"`
}

// Decision is an outcome of a window: what, when by the rules (a
// deadline, a file's coming, a pick-up's limit), and the files counted.
type Decision struct {
	Outcome Outcome
	At      time.Time
	Files   []Seen
	// Window is the window decided (Tracker.Decide sets it).
	Window calendar.Window
}

// matches reports whether f counts for r.
func (r Rule) matches(f Seen) bool {
	if f.Size < r.MinSize || r.MaxSize > 0 && f.Size > r.MaxSize {
		return false
	}
	return r.named(f.Name)
}

// named reports whether a file's name matches r's globs.
func (r Rule) named(name string) bool {
	return slices.ContainsFunc(r.Globs, func(g string) bool {
		ok, err := path.Match(g, name)
		return err == nil && ok
	})
}

func (r Rule) count() int { return max(r.MinCount, 1) }

// counted are the files that count for window w (whose files may come
// until next) at now: the first MinCount to come, and whether that many
// came.
func (r Rule) counted(w calendar.Window, next time.Time, files []Seen, now time.Time) ([]Seen, bool) {
	var counted []Seen
	for _, f := range files {
		if r.matches(f) && !f.Came.Before(w.Opens) && f.Came.Before(next) && !f.Came.After(now) {
			counted = append(counted, f)
		}
	}
	slices.SortStableFunc(counted, func(a, b Seen) int { return a.Came.Compare(b.Came) })
	if need := r.count(); len(counted) >= need {
		return counted[:need], true
	}
	return counted, false
}

// Next is the next outcome of window w, whose files may come until next
// (the following window's opening), at now, given those it had already
// (in order): false when there is none to announce now (none yet, or the
// window's last was had).
func Next(w calendar.Window, next time.Time, r Rule, files []Seen, now time.Time, had []Outcome) (Decision, bool) {
	counted, enough := r.counted(w, next, files, now)
	var last, reached = Outcome(""), time.Time{}
	if len(had) > 0 {
		last = had[len(had)-1]
	}
	if enough {
		reached = counted[len(counted)-1].Came // the last needed file's
	}
	switch last {
	case "":
		switch {
		case enough && reached.Before(w.Deadline):
			return settled(Met, counted, reached, r, now)
		case !now.Before(w.Deadline):
			return Decision{Outcome: Missed, At: w.Deadline, Files: counted}, true
		}
	case Missed:
		if enough {
			return Decision{Outcome: Late, At: reached, Files: counted}, true
		}
	case Late:
		if d, ok := settled(Late, counted, reached, r, now); ok && d.Outcome == NotProcessed {
			return d, true
		}
	}
	return Decision{}, false
}

// settled is outcome once each counted file was picked up within the
// rule's time; NotProcessed at the first one's limit that passed first;
// nothing yet while one may still be.
func settled(outcome Outcome, counted []Seen, reached time.Time, r Rule, now time.Time) (Decision, bool) {
	if r.PickUpWithin <= 0 {
		return Decision{Outcome: outcome, At: reached, Files: counted}, true
	}
	at := reached
	for _, f := range counted {
		limit := f.Came.Add(r.PickUpWithin)
		switch {
		case !f.Gone.IsZero() && !f.Gone.After(limit):
			at = maxTime(at, f.Gone)
		case !now.Before(limit):
			return Decision{Outcome: NotProcessed, At: limit, Files: counted}, true
		default:
			return Decision{}, false // it may yet be picked up
		}
	}
	return Decision{Outcome: outcome, At: at, Files: counted}, true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// EventTypePrefix starts the type of an outcome's event:
// dev.sftpgate.expectation.met, .missed, .late, .notprocessed.
const EventTypePrefix = "dev.sftpgate.expectation."

// EventType is d's CloudEvent type.
func (d Decision) EventType() string { return EventTypePrefix + strings.ToLower(string(d.Outcome)) }

// EventID is the CloudEvent id of outcome o of window w of the
// expectation whose UID is uid: the same on every try, and after another
// replica took the expectation over, so that a receiver drops repeats;
// another for each outcome a window has.
func EventID(uid string, w calendar.Window, o Outcome) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", uid, w.Opens.UnixNano(), o))
	return hex.EncodeToString(sum[:16])
}
