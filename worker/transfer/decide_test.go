package transfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/memfs"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// TestDecideTransformed: a transformed copy's target passes for the copy
// only when an earlier run may have written it; a file someone put there
// in the same second is skipped or replaced as the policy says, never
// taken for done.
func TestDecideTransformed(t *testing.T) {
	same := &entry{size: 99, modTime: 100}
	older := &entry{size: 99, modTime: 50}
	r := Result{Size: 10, ModTime: 100}
	identity := func(io.Writer, io.Reader, string) error { return nil }
	for _, c := range []struct {
		name      string
		target    *entry
		overwrite v1alpha1.OverwritePolicy
		resumed   bool
		replace   bool
		state     FileState
	}{
		{"resumed, its time: the copy", same, v1alpha1.OverwriteAlways, true, false, Done},
		{"fresh, the same second, Never", same, v1alpha1.OverwriteNever, false, false, Skipped},
		{"fresh, the same second, IfDifferent", same, v1alpha1.OverwriteIfDifferent, false, false, Skipped},
		{"fresh, the same second, Always", same, v1alpha1.OverwriteAlways, false, true, Waiting},
		{"another time, IfDifferent", older, v1alpha1.OverwriteIfDifferent, false, true, Waiting},
		{"resumed, another time, Never", older, v1alpha1.OverwriteNever, true, false, Skipped},
	} {
		j := &Job{Overwrite: c.overwrite, Resumed: c.resumed, Transform: identity}
		replace, state, err := j.decide(nil, nil, c.target, &r)
		if err != nil || replace != c.replace || state != c.state {
			t.Errorf("%s: replace %v, state %v, %v; want %v, %v", c.name, replace, state, err, c.replace, c.state)
		}
	}
}

// TestCopyDoneRemovesEarlierTemporary: a try that finds the target the
// source's copy already removes the partial copy an earlier try of the
// job left, which nothing would continue. (make chaos, seed 2)
func TestCopyDoneRemovesEarlierTemporary(t *testing.T) {
	dir := t.TempDir()
	data := []byte("the file, copied before")
	src, dst := filepath.Join(dir, "in.csv"), filepath.Join(dir, "out.csv")
	for _, p := range []string{src, dst} {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	when := time.Unix(1_700_000_000, 0)
	if err := os.Chtimes(src, when, when); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst, when, when); err != nil {
		t.Fatal(err)
	}
	tmp := tempname.For(dir, "seed")
	if err := os.WriteFile(tmp, data[:5], 0o600); err != nil {
		t.Fatal(err)
	}
	j := Job{Src: src, Dst: dst, Size: int64(len(data)), ModTime: when.Unix(), Seed: "seed", Made: &Folders{},
		Overwrite: v1alpha1.OverwriteIfDifferent}
	session := pipeSession(t)
	if r, err := Copy(context.Background(), session, session, j); err != nil || r.State != Done {
		t.Fatalf("copy: %+v, %v", r, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the earlier try's copy is left: %v", err)
	}
}

// TestEndedVersion: a source whose store tags versions has not changed
// while the version read is still the one there, whatever time its
// listing gave: the copy takes that version's own time. Another tag is a
// change, and so, for an untagged source, is another time than planned.
func TestEndedVersion(t *testing.T) {
	listed, own := time.Unix(2000, 0), time.Unix(1000, 0)
	read := memfs.Entry{Name: "a", Size: 3, ModTime: own, Tag: "etag-1"}
	for _, c := range []struct {
		name    string
		read    *memfs.Entry // what the copy's open found, when tagged
		now     memfs.Entry
		changed bool
		time    int64
	}{
		{"the version read", &read, read, false, own.Unix()},
		{"another version, same size and time", &read, memfs.Entry{Name: "a", Size: 3, ModTime: own, Tag: "etag-2"}, true, own.Unix()},
		{"untagged, another time", nil, memfs.Entry{Name: "a", Size: 3, ModTime: own}, true, own.Unix()},
		{"untagged, the planned time", nil, memfs.Entry{Name: "a", Size: 3, ModTime: listed}, false, listed.Unix()},
	} {
		r, progress := Result{Size: 3, ModTime: listed.Unix()}, &counter{}
		if c.read != nil {
			progress.version.see(opened{info: c.read.Info()})
		}
		err := (&Job{Src: "/a"}).ended(nil, c.now.Info(), nil, &r, progress)
		if errors.Is(err, ErrSourceChanged) != c.changed || r.ModTime != c.time {
			t.Errorf("%s: %v, time %d; want changed %v, time %d", c.name, err, r.ModTime, c.changed, c.time)
		}
	}
}

// opened is a file of a store that tags versions, opened at info.
type opened struct {
	files.File
	info fs.FileInfo
}

func (o opened) OpenedInfo() fs.FileInfo { return o.info }

// store is a session of this machine's files as an object store shows
// them: each open reads the version tagged open (at its own time), and a
// stat finds the one tagged now.
type store struct {
	files.FS
	open, now string
	own       time.Time
}

func (s store) Open(name string) (files.File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := s.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	return versioned{File: f, s: s, name: name, info: memfs.Entry{Name: fi.Name(), Size: fi.Size(), ModTime: s.own, Tag: s.open}.Info()}, nil
}

func (s store) Stat(name string) (fs.FileInfo, error) {
	fi, err := s.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	return memfs.Entry{Name: fi.Name(), Size: fi.Size(), ModTime: s.own, Tag: s.now}.Info(), nil
}

type versioned struct {
	files.File
	s    store
	name string
	info fs.FileInfo
}

func (v versioned) OpenedInfo() fs.FileInfo    { return v.info }
func (v versioned) Stat() (fs.FileInfo, error) { return v.s.Stat(v.name) }

// TestCopyMoveKeepsARewrittenSource: a source rewritten after the copy
// read it (same size, another version) is a change: the copy is not put
// in place, and Move does not remove the new version.
func TestCopyMoveKeepsARewrittenSource(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "in.csv"), filepath.Join(dir, "out.csv")
	if err := os.WriteFile(src, []byte("version one"), 0o600); err != nil {
		t.Fatal(err)
	}
	session := pipeSession(t)
	from := store{FS: session, open: "v1", now: "v2", own: time.Unix(1000, 0)}
	j := Job{Src: src, Dst: dst, Size: 11, ModTime: 2000, Seed: "seed", Made: &Folders{}, Fresh: true, Move: true}
	_, err := Copy(context.Background(), from, session, j)
	if !errors.Is(err, ErrSourceChanged) {
		t.Errorf("copy: %v, want the source changed", err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Errorf("the source: %v", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the target: %v", err)
	}
}

// TestCopyInRangesFromAStore: a large file of an object store, listed
// with the time it was written, copies in ranges in one try, and the copy
// has the file's own time.
func TestCopyInRangesFromAStore(t *testing.T) {
	dir, data, j := largeSource(t)
	own := time.Unix(1_600_000_000, 0)
	j.Dst, j.Seed, j.Fresh = filepath.Join(dir, "out.bin"), "seed", true
	j.Sessions = func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
		return fn(store{FS: pipeSession(t), open: "v1", now: "v1", own: own}, pipeSession(t), nil)
	}
	session := pipeSession(t)
	r, err := Copy(context.Background(), store{FS: session, open: "v1", now: "v1", own: own}, session, j)
	if err != nil || r.State != Done || r.ModTime != own.Unix() {
		t.Fatalf("copy: %+v, %v", r, err)
	}
	got, err := os.ReadFile(j.Dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy: %v, whole %v", err, bytes.Equal(got, data))
	}
	if fi, _ := os.Stat(j.Dst); !fi.ModTime().Equal(own) {
		t.Errorf("the copy's time: %v, want %v", fi.ModTime(), own)
	}
}
