package transfer

import (
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

// TestEndedHeldVersion: a source whose reads were held to the version
// opened (an object's tag) has not changed because its own time is not
// the one its listing gave; an untagged one has.
func TestEndedHeldVersion(t *testing.T) {
	listed, own := time.Unix(2000, 0), time.Unix(1000, 0)
	for _, c := range []struct {
		name    string
		tag     string
		changed bool
	}{{"tagged", "etag-1", false}, {"untagged", "", true}} {
		r := Result{Size: 3, ModTime: listed.Unix()}
		now := memfs.Entry{Name: "a", Size: 3, ModTime: own, Tag: c.tag}
		err := (&Job{Src: "/a"}).ended(nil, now.Info(), nil, &r, &counter{})
		if (err != nil) != c.changed || r.ModTime != own.Unix() {
			t.Errorf("%s: %v, time %d; want changed %v, the own time", c.name, err, r.ModTime, c.changed)
		}
	}
}
