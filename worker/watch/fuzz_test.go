package watch

import (
	"context"
	"errors"
	"maps"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/memfs"
	"github.com/sftpgate/sftpgate/internal/files"
)

// FuzzWalk: whatever names a server gives a watched folder's files and
// folders (long, not UTF-8, control bytes, slashes, dots), a poll lists
// paths that stay below the folder, one clean path element per level,
// sorted, each once, that the filter takes, at most MaxFiles entries
// read; the events they make carry those paths; and the state that keeps
// them reads back the same.
func FuzzWalk(f *testing.F) {
	for _, n := range [][3]string{{"a.csv", "sub", "b.csv"}, {"..", ".", ""}, {"a/b", "../x", "/"}, {"\xff\xfe", "é\x80", "x\x00y"},
		{"\x1b[31mred", "line\nbreak", ".sftpgate-0123456789abcdef.tmp"}, {strings.Repeat("n", 300), "d", "d"}} {
		f.Add(n[0], n[1], n[2], "*.csv", uint8(2))
		f.Add(n[0], n[1], n[2], "", uint8(1))
	}
	f.Add("a", "b", "c", "[", uint8(1))
	f.Fuzz(func(t *testing.T, n1, n2, n3, include string, depth uint8) {
		const dir = "/w"
		when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
		fsys := memfs.New(map[string][]memfs.Entry{
			dir:                        {{Name: n1, Size: 1, ModTime: when}, {Name: n2, Dir: true}, {Name: n3, Size: 3, ModTime: when, Tag: n3}},
			path.Join(dir, n2):         {{Name: n1, Size: 2, ModTime: when}, {Name: n3, Dir: true}, {Name: n2, Size: 4}},
			path.Join(dir, n2, n3):     {{Name: n2, Size: 5, ModTime: when}},
			path.Join(dir, n2, n2, n2): {{Name: n1, Size: 6}},
		})
		w := Walk{Dir: dir, Depth: int(depth % 4), MaxFiles: 8}
		if include != "" {
			w.Filter.Include = []string{include}
		}
		listed, err := w.List(context.Background(), fsys)
		if err != nil {
			if _, ok := errors.AsType[*ErrTooManyFiles](err); !ok {
				t.Fatal(err)
			}
			return
		}
		for i, f := range listed {
			for _, part := range strings.Split(f.Path, "/") {
				if !files.EntryName(part) {
					t.Fatalf("listed %q, whose part %q no folder can hold", f.Path, part)
				}
			}
			if full := path.Join(dir, f.Path); !strings.HasPrefix(full, dir+"/") || strings.Count(f.Path, "/") > w.Depth {
				t.Fatalf("listed %q, at %q, outside the folder or deeper than %d", f.Path, full, w.Depth)
			}
			if i > 0 && listed[i-1].Path >= f.Path {
				t.Fatalf("listed %q after %q", f.Path, listed[i-1].Path)
			}
			if !w.Filter.Match(f.Path) {
				t.Fatalf("listed %q, which the filter %q leaves out", f.Path, include)
			}
		}
		tracker := &Tracker{EmitExisting: true, Report: map[v1alpha1.WatchEvent]bool{v1alpha1.WatchCreated: true}}
		tracker.Poll(when, listed, 100)
		events := tracker.Poll(when.Add(time.Hour), listed, 100)
		if len(events) != len(listed) {
			t.Fatalf("%d files listed, %d events", len(listed), len(events))
		}
		state := State{SpecKey: "k", Seen: tracker.Seen()}
		for i, e := range events {
			if e.Path != listed[i].Path {
				t.Fatalf("event %d is of %q, listed %q", i, e.Path, listed[i].Path)
			}
			state.Outbox = append(state.Outbox, Pending{Event: e, ID: "id", Observed: when})
		}
		encoded, err := state.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeState(encoded)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(back.Seen, state.Seen) || len(back.Outbox) != len(state.Outbox) {
			t.Fatalf("the state reads back as %v, was %v", back.Seen, state.Seen)
		}
		for i := range back.Outbox {
			sent := state.Outbox[i].Event
			sent.Tag = 0 // an event keeps no tag: only what was seen does
			if back.Outbox[i].Event != sent {
				t.Fatalf("event %v reads back as %v", state.Outbox[i].Event, back.Outbox[i].Event)
			}
		}
	})
}
