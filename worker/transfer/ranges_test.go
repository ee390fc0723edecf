package transfer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpfs"
)

func TestRangeBounds(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size   int64
		n      int
		count  int
		length int64
	}{
		{64 * mib, 4, 4, 16 * mib},
		{64*mib + 1, 4, 4, 17 * mib}, // lengths whole MiBs: the last range shorter
		{65 * mib, 4, 4, 17 * mib},
		{1 << 30, 4, 4, 256 * mib},
		{64 * mib, 100, 64, mib}, // never shorter than a MiB: fewer ranges
	} {
		if count, length := rangeBounds(c.size, c.n); count != c.count || length != c.length {
			t.Errorf("rangeBounds(%d, %d) = %d, %d; want %d, %d", c.size, c.n, count, length, c.count, c.length)
		}
	}
}

func TestLimitWriter(t *testing.T) {
	var got bytes.Buffer
	w := &limitWriter{w: &got, n: 5}
	if n, err := w.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("first write: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("defg")); n != 2 || !errors.Is(err, errRangeFull) {
		t.Fatalf("write past the end: %d, %v", n, err)
	}
	if n, err := w.Write([]byte("h")); n != 0 || !errors.Is(err, errRangeFull) {
		t.Fatalf("write once full: %d, %v", n, err)
	}
	if got.String() != "abcde" {
		t.Errorf("passed on %q", got.String())
	}
}

// TestCopyInRanges: a large file copied in ranges arrives whole, whether
// every range gets sessions of its own or none is free (one pair copies
// them all); a resumed copy continues each range whose last bytes match
// the source's and starts over the one whose do not, sending nothing
// else again.
func TestCopyInRanges(t *testing.T) {
	dir, data, large := largeSource(t)
	session := func() files.FS { return pipeSession(t) }
	job := func(name string, sessions func(context.Context, func(src, dst files.FS, abort func()) error) error) Job {
		j := large
		j.Dst, j.Seed, j.Verify, j.Sessions, j.Made = filepath.Join(dir, name), name, v1alpha1.VerifySHA256, sessions, &Folders{}
		return j
	}
	fresh := func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
		return fn(session(), session(), nil)
	}
	check := func(t *testing.T, name string, r Result, err error) {
		t.Helper()
		got, rerr := os.ReadFile(filepath.Join(dir, name))
		if err != nil || rerr != nil || r.State != Done || !bytes.Equal(got, data) {
			t.Fatalf("copy: %+v, %v; target read: %v, whole: %v", r, err, rerr, bytes.Equal(got, data))
		}
	}

	t.Run("a pair of sessions for every range", func(t *testing.T) {
		var opened atomic.Int32
		sessions := func(ctx context.Context, fn func(src, dst files.FS, abort func()) error) error {
			opened.Add(1)
			return fresh(ctx, fn)
		}
		r, err := Copy(t.Context(), session(), session(), job("all.bin", sessions))
		check(t, "all.bin", r, err)
		if opened.Load() != 3 || r.Sent != int64(len(data)) {
			t.Errorf("%d more pairs of sessions, %d bytes sent; want 3, %d", opened.Load(), r.Sent, len(data))
		}
	})

	t.Run("no sessions free", func(t *testing.T) {
		r, err := Copy(t.Context(), session(), session(), job("one.bin", none))
		check(t, "one.bin", r, err)
		if r.Sent != int64(len(data)) {
			t.Errorf("%d bytes sent for %d", r.Sent, len(data))
		}
	})

	t.Run("resumed", func(t *testing.T) {
		// A cut copy: range i written for 3(i+1) MiB, the plan behind
		// it at i+1 MiB (saved seconds before a replica died), range 2's
		// byte before the plan's point wrong, as if of another content.
		j := job("resumed.bin", fresh)
		n, length := rangeBounds(j.Size, j.Ranges)
		tmp := filepath.Join(dir, filepath.Base(j.rangedTemp()))
		partial := make([]byte, len(data))
		j.Done = make([]int64, n)
		var kept, end int64
		for i := range n {
			start, written := int64(i)*length, int64(3*(i+1))<<20
			copy(partial[start:start+written], data[start:start+written])
			j.Done[i] = int64(i+1) << 20
			if i == 2 {
				partial[start+j.Done[i]-1] ^= 0xff
			} else {
				kept += written
			}
			end = start + written
		}
		if err := os.WriteFile(tmp, partial[:end], 0o600); err != nil {
			t.Fatal(err)
		}
		var reported []int64
		j.RangeDone = func(done []int64) { reported = done }
		r, err := Copy(t.Context(), session(), session(), j)
		check(t, "resumed.bin", r, err)
		// Only what the copy lacks is sent, and range 2 whole.
		missing := int64(len(data)) - kept
		if r.Sent != int64(len(data))-r.From || r.Sent != missing {
			t.Errorf("resumed from %d, sent %d; want about %d (%d missing)", r.From, r.Sent, kept, missing)
		}
		for i, d := range reported {
			start := int64(i) * length
			if want := min(length, j.Size-start); d != want {
				t.Errorf("range %d reported done at %d of %d", i, d, want)
			}
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the ranged copy is left: %v", err)
		}
	})
}

// TestCutRangeResumes: a range whose destination session is cut mid-way
// counts no further than the copy holds (pkg/sftp reads on for a moment
// after a write failed), so the plan never records bytes the copy lacks
// and the next try continues the range rather than starting it over.
func TestCutRangeResumes(t *testing.T) {
	dir, data, j := largeSource(t)
	session := func() files.FS { return pipeSession(t) }
	j.Dst, j.Seed, j.Sessions = filepath.Join(dir, "out.bin"), "cut", none
	n, length := rangeBounds(j.Size, j.Ranges)
	tmp := j.rangedTemp()
	if err := truncate(session(), tmp); err != nil {
		t.Fatal(err)
	}
	c, wire := testsftp.Pipe(t)
	wire.CutAt(5 << 20)
	var done, sent atomic.Int64
	if err := j.copyRange(session(), listed{sftpfs.New(c, nil), c}, tmp, 0, length, &done, &counter{}, &sent); err == nil {
		t.Fatal("a range copied through a cut session")
	}
	copied, err := os.ReadFile(tmp)
	if d := done.Load(); err != nil || d == 0 || d > int64(len(copied)) || !bytes.Equal(copied[:d], data[:d]) {
		t.Fatalf("the cut range counts %d done; the copy holds %d (%v)", d, len(copied), err)
	}
	j.Done = make([]int64, n)
	j.Done[0] = done.Load()
	r, err := Copy(t.Context(), session(), session(), j)
	got, rerr := os.ReadFile(j.Dst)
	if err != nil || rerr != nil || !bytes.Equal(got, data) {
		t.Fatalf("the resumed copy: %v, %v", err, rerr)
	}
	if r.From < j.Done[0] {
		t.Errorf("resumed from %d; the range had %d", r.From, j.Done[0])
	}
}

// largeSource writes a file of random bytes large enough to be copied in
// 4 ranges into a folder of its own: the folder, the bytes, and a Job
// copying it (no destination yet).
func largeSource(t *testing.T) (dir string, data []byte, j Job) {
	t.Helper()
	dir = t.TempDir()
	data = make([]byte, RangedFile+5<<20+12345)
	_, _ = rand.Read(data)
	src := filepath.Join(dir, "in.bin")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	return dir, data, Job{Src: src, Size: fi.Size(), ModTime: fi.ModTime().Unix(), Made: &Folders{}, Ranges: 4}
}

// pipeSession is a session of its own, of this machine's files.
func pipeSession(t *testing.T) files.FS {
	c, _ := testsftp.Pipe(t)
	return listed{sftpfs.New(c, nil), c}
}

// none gives no more sessions: one pair copies every range.
func none(context.Context, func(src, dst files.FS, abort func()) error) error { return ErrNoSessions }

// listed is a session that lists folders with the client's ReadDir (a
// pipe has no SSH connection for sftpdir's reader).
type listed struct {
	files.FS
	c *sftp.Client
}

func (l listed) Each(dir string, fn func(fs.FileInfo) error) error {
	entries, err := l.c.ReadDir(dir)
	for _, e := range entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return err
}

func (listed) ListsWhole() bool { return true }
