// Package watch is what an SftpWatch does on each poll: it lists the
// watched folder, compares the listing with what it reported before, holds
// back files that still change, and says which events are due. It keeps
// what it reported, and the events still to deliver, in State, which the
// worker stores in the Kubernetes API.
package watch

import (
	"slices"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// File is a file as a poll saw it: its path below the watched folder, its
// size and its modification time (SFTP's, in whole seconds), and on an
// object store a hash of its ETag.
type File struct {
	Path    string
	Size    int64
	ModTime int64
	Tag     uint64
}

// Stat is what a change of a file alters: its size, its modification
// time, and its tag where the backend keeps one (0 where not).
type Stat struct {
	Size    int64
	ModTime int64
	Tag     uint64
}

// Event is a change to report.
type Event struct {
	Type v1alpha1.WatchEvent
	File
}

// candidate is a change seen but not reported yet: the file's state when
// last seen, and since when it has been the same.
type candidate struct {
	stat  Stat
	since time.Time
	kind  v1alpha1.WatchEvent
	// changing: seen to change since it was first seen; the regular
	// polls look at it again, not a recheck (see Recheck).
	changing bool
}

// minRecheck is the least time between the poll that first sees a file
// and the recheck: SFTP's modification times are whole seconds.
const minRecheck = time.Second

// Tracker compares each poll's listing with what was reported before.
type Tracker struct {
	// MinAge is how long a file must stay the same, across two polls at
	// least, before it is reported.
	MinAge time.Duration
	// Report says which changes are reported; the others are tracked all
	// the same, so that turning one on later does not report the past.
	Report map[v1alpha1.WatchEvent]bool
	// EmitExisting reports the files of the first poll as created; else
	// they are its starting point.
	EmitExisting bool

	// seen is what was reported (or, with Snapshot, found at first),
	// file by file; nil before the first poll.
	seen map[string]Stat
	// candidates are the changes held back until they stop changing;
	// they are not kept across restarts (a restart only delays them).
	candidates map[string]candidate
	// changed says seen changed since TakeChanged last said so.
	changed bool
}

// TakeChanged reports whether what was reported changed since it last
// said so: the state is worth storing again.
func (t *Tracker) TakeChanged() bool {
	c := t.changed
	t.changed = false
	return c
}

// Seen is what was reported, for State; nil before the first poll.
func (t *Tracker) Seen() map[string]Stat { return t.seen }

// Restore starts from what was reported before a restart.
func (t *Tracker) Restore(seen map[string]Stat) { t.seen = seen }

// Poll takes a listing made at now, sorted by path, and returns the events
// due, in the listing's order and then the deleted files', at most
// room of them: a change past that stays a candidate, found again by a
// later poll, rather than queued without bound. What it returns counts as
// reported; its caller queues it before it stores Seen.
func (t *Tracker) Poll(now time.Time, listing []File, room int) []Event {
	if t.candidates == nil {
		t.candidates = map[string]candidate{}
	}
	if t.seen == nil {
		t.seen = map[string]Stat{}
		t.changed = true
		if !t.EmitExisting {
			for _, f := range listing {
				t.seen[f.Path] = Stat{f.Size, f.ModTime, f.Tag}
			}
			return nil
		}
	}
	var due []Event
	// report records e as reported and returns whether it goes out.
	report := func(e Event) bool {
		if !t.Report[e.Type] {
			return true // tracked, not reported: it takes no room
		}
		if len(due) >= room {
			return false
		}
		due = append(due, e)
		return true
	}
	present := make(map[string]bool, len(listing))
	for _, f := range listing {
		present[f.Path] = true
		stat := Stat{f.Size, f.ModTime, f.Tag}
		prev, known := t.seen[f.Path]
		if known && prev == stat {
			delete(t.candidates, f.Path) // changed back before it settled
			continue
		}
		kind := v1alpha1.WatchCreated
		if known {
			kind = v1alpha1.WatchModified
		}
		c, waiting := t.candidates[f.Path]
		if !waiting || c.stat != stat {
			t.candidates[f.Path] = candidate{stat: stat, since: now, kind: kind, changing: waiting}
			continue
		}
		if now.Sub(c.since) < t.MinAge {
			continue
		}
		if report(Event{Type: kind, File: f}) {
			t.seen[f.Path] = stat
			t.changed = true
			delete(t.candidates, f.Path)
		}
	}
	var gone []string
	for p := range t.seen {
		if !present[p] {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range gone {
		stat := t.seen[p]
		if report(Event{Type: v1alpha1.WatchDeleted, File: File{Path: p, Size: stat.Size, ModTime: stat.ModTime}}) {
			delete(t.seen, p)
			t.changed = true
		}
	}
	for p := range t.candidates {
		if !present[p] {
			delete(t.candidates, p)
		}
	}
	return due
}

// Recheck is when a poll would find a candidate first seen by the last
// polls settled: MinAge (at least a second) after it was seen. A file
// still being written when a poll first sees it is so reported a MinAge
// after it was first seen still, not a whole interval later; one seen to
// change again is left to the regular polls, so that a long upload does
// not make the folder listed every second. ok is false without such a
// candidate due after now.
func (t *Tracker) Recheck(now time.Time) (at time.Time, ok bool) {
	for _, c := range t.candidates {
		if c.changing || t.Report != nil && !t.Report[c.kind] {
			continue
		}
		due := c.since.Add(max(t.MinAge, minRecheck))
		if !due.After(now) {
			// Due at this poll, and still not reported: no room for it
			// (the events wait), which another poll at once would not
			// change.
			continue
		}
		if !ok || due.Before(at) {
			at, ok = due, true
		}
	}
	return at, ok
}

// Forget drops path from what was reported, as when the worker moved or
// removed the file after delivering its event: its going is no event.
func (t *Tracker) Forget(path string) {
	if _, ok := t.seen[path]; ok {
		t.changed = true
	}
	delete(t.seen, path)
	delete(t.candidates, path)
}
