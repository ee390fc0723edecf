package expect

import (
	"slices"
	"time"

	"github.com/sftpgate/sftpgate/internal/calendar"
)

// MaxFiles bounds the files a Tracker keeps: those still in the folder,
// and of those gone, the first each window counts (compact).
const MaxFiles = 1000

// Entry is a settled file of a listing of the expectation's folder.
type Entry struct {
	Name    string
	Size    int64
	ModTime time.Time
}

// State is what a Tracker keeps between listings, all of it: a replica
// stores it, and another takes over from it after the first one's death.
type State struct {
	// Window is the window being decided; zero before the first.
	Window calendar.Window `json:"window"`
	// Had are its outcomes so far, in order.
	Had []Outcome `json:"had,omitempty"`
	// Files are the matching files seen in the folder since the window
	// opened, by when they came.
	Files []Seen `json:"files,omitempty"`
	// Listed is when the last listing was taken; zero before the first.
	Listed time.Time `json:"listed"`
}

// Tracker follows one expectation's folder across listings and decides
// its windows' outcomes.
type Tracker struct {
	Windows *calendar.Windows
	Rule    Rule
	// Settle is how long a file's size and modification time must stay
	// the same, seen by two listings at least that far apart, before it
	// counts (a watch's stability rule): a file still being written never
	// does. Zero counts a file at the first listing that shows it.
	Settle time.Duration
	// Hold is how long past a deadline Missed waits for a file that came
	// before it and is still settling.
	Hold  time.Duration
	State State
	// settling are the matching files listed that have not settled yet,
	// by name. They are not stored: a replica that takes over lists them
	// again, and their times still say when they came.
	settling map[string]settling
}

// settling is a file as listings showed it while it settles: since when
// it is as it is, and when it came by Observe's rule.
type settling struct {
	size        int64
	mod         time.Time
	since, came time.Time
	// changes counts the times it was seen to change: one that keeps
	// changing is left to the regular listings (Recheck).
	changes int
}

// Observe takes a listing of the folder that began at began and ended
// at ended: it shows every file that came before began, and perhaps some
// that came while it ran. A file new to it came by ended, after the
// listing before: at its modification time when that lies between the
// two (a file that came while no one listed, the worker down), else at
// ended; it counts once it settled (Settle), as having come then. The
// first listing (or the first after State.Listed was reset) is a
// baseline: what it shows was there before, and counts only if its
// modification time says it came in the window under way. A file it no
// longer shows went at ended, as did one of the same name shown with
// another size or time (rewritten: the new one is a new file, as the
// next day's report.csv is).
func (k *Tracker) Observe(listing []Entry, began, ended time.Time) {
	shown := make(map[string]Entry, len(listing))
	for _, e := range listing {
		shown[e.Name] = e
	}
	present := make(map[string]bool, len(k.State.Files))
	for i := range k.State.Files {
		f := &k.State.Files[i]
		if !f.Gone.IsZero() {
			continue
		}
		if e, ok := shown[f.Name]; ok && e.Size == f.Size && e.ModTime.Equal(f.Mod) {
			present[f.Name] = true
		} else {
			f.Gone = ended
		}
	}
	was, prev, baseline := k.settling, k.State.Listed, k.State.Listed.IsZero()
	k.settling = make(map[string]settling, len(was))
	compacted := false
	for _, e := range listing {
		if present[e.Name] || !k.Rule.named(e.Name) {
			continue
		}
		s, ok := was[e.Name]
		switch {
		case ok && s.size == e.Size && s.mod.Equal(e.ModTime):
		case baseline:
			// There before this listing, unless its time says it came in
			// the window under way; zero came counts for no window.
			s = settling{size: e.Size, mod: e.ModTime, since: ended}
			if w := k.State.Window; !w.IsZero() && !e.ModTime.Before(w.Opens) && !e.ModTime.After(ended) {
				s.came = e.ModTime
			}
		default:
			s = settling{size: e.Size, mod: e.ModTime, since: ended, came: ended, changes: s.changes + 1}
			if !ok {
				s.changes = 0
			}
			if e.ModTime.After(prev) && !e.ModTime.After(ended) {
				s.came = e.ModTime
			}
		}
		if ended.Sub(s.since) < k.Settle {
			if len(k.settling) < MaxFiles {
				k.settling[e.Name] = s
			}
			continue
		}
		// Kept whatever its size, so that it is never taken for a new
		// one; counted only if its size is one the rule allows.
		f := Seen{Name: e.Name, Size: e.Size, Mod: e.ModTime, Came: s.came}
		if len(k.State.Files) >= MaxFiles && !compacted {
			k.compact()
			compacted = true
		}
		if len(k.State.Files) < MaxFiles {
			k.State.Files = append(k.State.Files, f)
			present[f.Name] = true
		}
	}
	slices.SortStableFunc(k.State.Files, func(a, b Seen) int { return a.Came.Compare(b.Came) })
	k.State.Listed = began
}

// compact forgets the files gone that no decision needs: all but the
// first MinCount to come in the current window, and in the windows
// after it. A file still there is kept, so that it is never taken for a
// new one; a folder of more than MaxFiles of them keeps the first.
func (k *Tracker) compact() {
	slices.SortStableFunc(k.State.Files, func(a, b Seen) int { return a.Came.Compare(b.Came) })
	need, until := k.Rule.count(), forever
	if !k.State.Window.IsZero() {
		if next := k.Windows.After(k.State.Window.Opens); !next.IsZero() {
			until = next.Opens
		}
	}
	kept := k.State.Files[:0]
	current, later := 0, 0
	for _, f := range k.State.Files {
		n := &later
		if f.Came.Before(until) {
			n = &current
		}
		*n++
		if f.Gone.IsZero() || *n <= need {
			kept = append(kept, f)
		}
	}
	k.State.Files = kept
}

// Decide is what the windows had by now that was not decided before, in
// order. from is when the expectation began: its first window is the
// first to open after it. The tracker moves on to the next window once
// that one has opened and its own can have no more outcomes: a pick-up
// still pending holds it (and the next window's outcomes wait, decided
// late, as their times say).
func (k *Tracker) Decide(now, from time.Time) []Decision {
	var out []Decision
	s := &k.State
	if s.Window.IsZero() {
		if s.Window = k.Windows.After(from); s.Window.IsZero() {
			return nil // the schedule never opens one
		}
	}
	for range maxWindowsAtOnce {
		next := k.Windows.After(s.Window.Opens)
		until := next.Opens
		if next.IsZero() {
			until = forever
		}
		for {
			d, ok := Next(s.Window, until, k.Rule, s.Files, now, s.Had)
			if !ok || d.Outcome == Missed && k.holding(s.Window.Deadline, now) {
				break
			}
			s.Had = append(s.Had, d.Outcome)
			d.Window = s.Window
			out = append(out, d)
		}
		if next.IsZero() || now.Before(until) || !k.done(until, now) || k.settlingBefore(until) {
			return out
		}
		// Files that came since the next window opened are its own; those
		// still in the folder are kept, as there before it opened (never
		// counted, never taken for new ones).
		kept := s.Files[:0]
		for _, f := range s.Files {
			if !f.Came.Before(until) || f.Gone.IsZero() {
				kept = append(kept, f)
			}
		}
		s.Window, s.Had, s.Files = next, nil, kept
	}
	return out
}

// holding says whether Missed waits at now: a matching file that came
// before deadline is still settling, and Hold has not passed since.
func (k *Tracker) holding(deadline, now time.Time) bool {
	if now.Sub(deadline) >= k.Hold {
		return false
	}
	for _, s := range k.settling {
		if !s.came.IsZero() && s.came.Before(deadline) {
			return true
		}
	}
	return false
}

// settlingBefore says whether a file that came before t still settles:
// its window waits for it.
func (k *Tracker) settlingBefore(t time.Time) bool {
	for _, s := range k.settling {
		if !s.came.IsZero() && s.came.Before(t) {
			return true
		}
	}
	return false
}

// Recheck says whether a file waits to settle that was first seen as it
// is at the last listing: the folder should be listed again after
// Settle. One seen to change again is left to the regular listings, so
// that a file written for an hour does not have the folder listed at
// every Settle.
func (k *Tracker) Recheck() bool {
	for _, s := range k.settling {
		if s.changes == 0 {
			return true
		}
	}
	return false
}

// Done says whether the current window can have no more outcomes but a
// pick-up's: Met or NotProcessed. The folder need not be listed again
// until the next window opens.
func (k *Tracker) Done() bool {
	had := k.State.Had
	return len(had) > 0 && (had[len(had)-1] == Met || had[len(had)-1] == NotProcessed)
}

// forever is the end of a window no other follows.
var forever = time.Unix(1<<40, 0)

// done reports whether the window can have no more outcomes.
func (k *Tracker) done(until, now time.Time) bool {
	s := k.State
	if len(s.Had) == 0 {
		return false
	}
	switch s.Had[len(s.Had)-1] {
	case Met, NotProcessed:
		return true
	case Missed:
		return !now.Before(until)
	}
	// Late: done once its files' pick-up is decided.
	counted, _ := k.Rule.counted(s.Window, until, s.Files, now)
	_, decided := settled(Late, counted, time.Time{}, k.Rule, now)
	return decided
}

// maxWindowsAtOnce bounds the windows one Decide walks (a worker back
// after a long time, a window every minute): it decides the rest at its
// next call.
const maxWindowsAtOnce = 100
