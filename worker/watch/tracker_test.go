package watch

import (
	"fmt"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

var all = map[v1alpha1.WatchEvent]bool{v1alpha1.WatchCreated: true, v1alpha1.WatchModified: true, v1alpha1.WatchDeleted: true}

// polls runs a tracker over a sequence of listings, one per step, and
// returns the events of each.
func polls(t *testing.T, tr *Tracker, step time.Duration, listings ...[]File) [][]Event {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	var out [][]Event
	for _, l := range listings {
		out = append(out, tr.Poll(now, l, 100))
		now = now.Add(step)
	}
	return out
}

func file(p string, size, mtime int64) File { return File{Path: p, Size: size, ModTime: mtime} }

func TestTracker(t *testing.T) {
	old := file("a.csv", 10, 100)
	for _, tc := range []struct {
		name     string
		tracker  Tracker
		step     time.Duration
		listings [][]File
		want     []string // the events of each poll, as "Type path size"
	}{
		{"what is there at first is the starting point", Tracker{MinAge: time.Second, Report: all}, 10 * time.Second,
			[][]File{{old}, {old}}, []string{"", ""}},
		{"a new file, once it stayed the same for minAge", Tracker{MinAge: 15 * time.Second, Report: all}, 10 * time.Second,
			[][]File{{}, {old}, {old}, {old}, {old}}, []string{"", "", "", "Created a.csv 10", ""}},
		{"a file still growing, reported once, after it stops", Tracker{MinAge: time.Second, Report: all}, 10 * time.Second,
			[][]File{{}, {file("a.csv", 1, 100)}, {file("a.csv", 5, 110)}, {file("a.csv", 9, 120)}, {file("a.csv", 9, 120)}, {file("a.csv", 9, 120)}},
			[]string{"", "", "", "", "Created a.csv 9", ""}},
		{"a new file that kept an old modification time", Tracker{Report: all}, time.Second,
			[][]File{{file("b", 1, 5)}, {file("b", 1, 5), file("old", 3, 1)}, {file("b", 1, 5), file("old", 3, 1)}}, []string{"", "", "Created old 3"}},
		{"a changed file, once it settled; a removed one at once", Tracker{Report: all}, time.Second,
			[][]File{{old, file("b", 1, 1)}, {file("a.csv", 20, 200)}, {file("a.csv", 20, 200)}},
			[]string{"", "Deleted b 1", "Modified a.csv 20"}},
		{"changed and changed back before it settled: nothing", Tracker{Report: all}, time.Second,
			[][]File{{old}, {file("a.csv", 20, 200)}, {old}, {old}}, []string{"", "", "", ""}},
		{"existing files reported when asked", Tracker{EmitExisting: true, Report: all}, time.Second,
			[][]File{{old}, {old}}, []string{"", "Created a.csv 10"}},
		{"changes not asked for are tracked, not reported", Tracker{Report: map[v1alpha1.WatchEvent]bool{v1alpha1.WatchDeleted: true}}, time.Second,
			[][]File{{}, {old}, {old}, {}}, []string{"", "", "", "Deleted a.csv 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := polls(t, &tc.tracker, tc.step, tc.listings...)
			for i, events := range got {
				s := ""
				for _, e := range events {
					if s != "" {
						s += "; "
					}
					s += fmt.Sprintf("%s %s %d", e.Type, e.Path, e.Size)
				}
				if s != tc.want[i] {
					t.Errorf("poll %d: %q, want %q", i, s, tc.want[i])
				}
			}
		})
	}
}

// TestTrackerRoom: past the room for events, changes wait for a later
// poll rather than queue without bound, and none is lost.
func TestTrackerRoom(t *testing.T) {
	tr := &Tracker{Report: all}
	var listing []File
	for i := range 5 {
		listing = append(listing, file(fmt.Sprintf("f%d", i), 1, 1))
	}
	now := time.Unix(0, 0)
	tr.Poll(now, nil, 2)
	tr.Poll(now, listing, 2)
	var reported []string
	for i := range 4 {
		for _, e := range tr.Poll(now.Add(time.Duration(i+1)*time.Second), listing, 2) {
			reported = append(reported, e.Path)
		}
	}
	if fmt.Sprint(reported) != "[f0 f1 f2 f3 f4]" {
		t.Errorf("reported %v, want every file once, two a poll", reported)
	}
}

func TestFilter(t *testing.T) {
	f := Filter{Include: []string{"*.csv", "reports/*"}, Exclude: []string{"*.part", "skip-*"}}
	for rel, want := range map[string]bool{
		"a.csv": true, "deep/b.csv": true, "reports/x.pdf": true, "x.pdf": false,
		"a.csv.part": false, "skip-me.csv": false, ".sftpgate-0123456789abcdef.tmp": false,
	} {
		if f.Match(rel) != want {
			t.Errorf("Match(%s) = %v", rel, !want)
		}
	}
	if (Filter{}).Match(".sftpgate-0123456789abcdef.tmp") || !(Filter{}).Match("any") {
		t.Error("an empty filter takes everything but sftpgate's temporary files")
	}
	if (Filter{Include: []string{"[a-"}}).Check() == nil {
		t.Error("a bad pattern passes")
	}
}

// TestRecheck: a file first seen unsettled is due again MinAge after it
// was seen (a second at least), not at the next regular poll; one seen to
// change again, or of a change not reported, is left to the regular polls.
func TestRecheck(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := Tracker{MinAge: 3 * time.Second, Report: all}
	tr.Poll(now, nil, 100)
	if _, ok := tr.Recheck(now); ok {
		t.Fatal("a recheck with nothing unsettled")
	}
	tr.Poll(now.Add(5*time.Second), []File{file("a", 1, 1)}, 100)
	if at, ok := tr.Recheck(now.Add(5 * time.Second)); !ok || !at.Equal(now.Add(8*time.Second)) {
		t.Fatalf("recheck at %v, %v; want 3s after the file was seen", at, ok)
	}
	if got := tr.Poll(now.Add(8*time.Second), []File{file("a", 1, 1)}, 100); len(got) != 1 {
		t.Fatalf("the recheck reports %v", got)
	}
	tr.Poll(now.Add(10*time.Second), []File{file("a", 1, 1), file("b", 1, 1)}, 100)
	tr.Poll(now.Add(13*time.Second), []File{file("a", 1, 1), file("b", 2, 2)}, 100)
	if _, ok := tr.Recheck(now.Add(13 * time.Second)); ok {
		t.Error("a file still changing is rechecked: a long upload would list the folder every second")
	}
	zero := Tracker{Report: all}
	zero.Poll(now, nil, 100)
	zero.Poll(now, []File{file("a", 1, 1)}, 100)
	if at, _ := zero.Recheck(now); !at.Equal(now.Add(time.Second)) {
		t.Errorf("with MinAge 0 the recheck is at %v, want a second later", at)
	}
	// Due, but no room for its event: not rechecked at once again (the
	// folder would be listed in a loop while the events wait).
	full := Tracker{Report: all}
	full.Poll(now, nil, 100)
	full.Poll(now, []File{file("a", 1, 1)}, 100)
	if got := full.Poll(now.Add(time.Second), []File{file("a", 1, 1)}, 0); len(got) != 0 {
		t.Fatalf("reported %v with no room", got)
	}
	if _, ok := full.Recheck(now.Add(time.Second)); ok {
		t.Error("a candidate due and not reported for want of room is rechecked at once")
	}
	quiet := Tracker{Report: map[v1alpha1.WatchEvent]bool{v1alpha1.WatchDeleted: true}}
	quiet.Poll(now, nil, 100)
	quiet.Poll(now, []File{file("a", 1, 1)}, 100)
	if _, ok := quiet.Recheck(now); ok {
		t.Error("a change not reported is rechecked")
	}
}
