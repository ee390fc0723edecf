package s3fs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/s3fs"
)

const partSize = s3fs.MinPartSize

func newFS(t *testing.T) (s3fs.FS, *tests3.Server) {
	t.Helper()
	s := tests3.Start(t)
	s.Bucket(t, "data")
	f := s3fs.New(s3fs.Config{Core: &minio.Core{Client: s.Client(t)}, Bucket: "data", Prefix: "root/",
		PartSize: partSize, PartsInFlight: 2, Timeout: 10 * time.Second})
	t.Cleanup(func() { _ = f.Close() })
	return f, s
}

func write(t *testing.T, f files.FS, name string, data []byte) {
	t.Helper()
	w, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f files.FS, name string) []byte {
	t.Helper()
	r, err := f.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	var b bytes.Buffer
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFiles: the file layer's operations on a bucket prefix, as the
// worker uses them, with the errors an SFTP server would give.
func TestFiles(t *testing.T) {
	f, s := newFS(t)
	write(t, f, "/in/a.csv", []byte("a,b\n"))
	write(t, f, "/in/sub/b.csv", []byte("b"))
	if on, err := os.ReadFile(s.Path("data", "root/in/a.csv")); err != nil || string(on) != "a,b\n" {
		t.Fatalf("the object as any S3 client sees it: %q, %v", on, err)
	}

	fi, err := f.Stat("/in/a.csv")
	if err != nil || fi.Size() != 4 || fi.IsDir() {
		t.Fatalf("stat of an object: %v, %v", fi, err)
	}
	if fi, err := f.Stat("/in"); err != nil || !fi.IsDir() {
		t.Fatalf("stat of a prefix: %v, %v", fi, err)
	}
	if _, err := f.Stat("/nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of nothing: %v", err)
	}
	var names []string
	if err := f.Each("/in", func(fi fs.FileInfo) error {
		names = append(names, fi.Name()+map[bool]string{true: "/"}[fi.IsDir()])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.csv", "sub/"}) {
		t.Fatalf("listing: %v", names)
	}
	if err := f.Each("/empty", func(fs.FileInfo) error { return errors.New("an entry") }); err != nil {
		t.Fatalf("an empty prefix lists as an empty folder: %v", err)
	}

	// Ranged reads.
	r, err := f.Open("/in/a.csv")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if n, err := r.ReadAt(buf, 2); n != 2 || string(buf) != "b\n" || err != nil {
		t.Fatalf("ReadAt: %d %q %v", n, buf, err)
	}
	_ = r.Close()

	// Rename refuses a target that exists; PosixRename replaces it.
	write(t, f, "/in/c.csv", []byte("c"))
	if err := f.Rename("/in/c.csv", "/in/a.csv"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("rename onto an object: %v", err)
	}
	if err := f.Rename("/in/c.csv", "/done/c.csv"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat("/in/c.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the renamed object is still there: %v", err)
	}
	if got := read(t, f, "/done/c.csv"); string(got) != "c" {
		t.Fatalf("renamed: %q", got)
	}

	// Times are kept as metadata.
	when := time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := f.Chtimes("/in/a.csv", when, when); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat("/in/a.csv"); err != nil || !fi.ModTime().Equal(when) {
		t.Fatalf("modification time: %v, %v", fi.ModTime(), err)
	}

	// What an object cannot do is said so.
	for what, err := range map[string]error{
		"chmod":    f.Chmod("/in/a.csv", 0o600),
		"symlink":  f.Symlink("/in/a.csv", "/in/l"),
		"truncate": f.Truncate("/in/a.csv", 1),
	} {
		if code, _ := files.Status(err); code != files.FxOpUnsupported {
			t.Errorf("%s: %v, want unsupported", what, err)
		}
	}
	if err := f.RemoveDirectory("/in"); err == nil {
		t.Fatal("removed a folder that holds objects")
	}
	if err := f.Remove("/in/sub/b.csv"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveDirectory("/in/sub"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("/in/sub/b.csv"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removing what is gone: %v", err)
	}
}

// TestUploadWhole: nothing is at the name until Complete; a cut upload
// continues from the parts the store holds (a last part that does not
// match the source is sent again); Abort leaves nothing behind.
func TestUploadWhole(t *testing.T) {
	f, s := newFS(t)
	data := make([]byte, 3*partSize+123)
	_, _ = rand.Read(data)
	when := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

	u, err := f.Upload("/out/big.bin", files.UploadOptions{ModTime: when})
	if err != nil {
		t.Fatal(err)
	}
	// Cut after two parts.
	if _, err := u.ReadFromWithConcurrency(io.MultiReader(bytes.NewReader(data[:2*partSize+10]), failing{}), 0); err == nil {
		t.Fatal("the source's failure did not end the upload")
	}
	if u.ID() == "" {
		t.Fatal("no upload id to resume")
	}
	if _, err := f.Stat("/out/big.bin"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a cut upload shows at its name: %v", err)
	}

	// The last part held is altered at the source: it is sent again.
	changed := bytes.Clone(data)
	changed[partSize+5] ^= 1
	u2, err := f.Upload("/out/big.bin", files.UploadOptions{ModTime: when, Resume: u.ID(), Source: bytes.NewReader(changed)})
	if err != nil {
		t.Fatal(err)
	}
	if u2.Size() != partSize {
		t.Fatalf("resumed from %d, want %d (the second part does not match)", u2.Size(), partSize)
	}
	u2, err = f.Upload("/out/big.bin", files.UploadOptions{ModTime: when, Resume: u.ID(), Source: bytes.NewReader(data)})
	if err != nil {
		t.Fatal(err)
	}
	if u2.Size() != 2*partSize {
		t.Fatalf("resumed from %d, want %d", u2.Size(), 2*partSize)
	}
	if n, err := u2.ReadFromWithConcurrency(bytes.NewReader(data[u2.Size():]), 0); err != nil || n != int64(len(data))-u2.Size() {
		t.Fatalf("sent %d, %v", n, err)
	}
	if err := u2.Complete(); err != nil {
		t.Fatal(err)
	}
	if on, err := os.ReadFile(s.Path("data", "root/out/big.bin")); err != nil || !bytes.Equal(on, data) {
		t.Fatalf("the resumed object differs from the source: %v", err)
	}
	t.Logf("verified by the store: %v", u2.Verified())
	if fi, err := f.Stat("/out/big.bin"); err != nil || !fi.ModTime().Equal(when) {
		t.Fatalf("stat: %v, %v", fi, err)
	}

	// Aborted: nothing left, no parts kept.
	u3, err := f.Upload("/out/gone.bin", files.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u3.ReadFromWithConcurrency(io.MultiReader(bytes.NewReader(data[:partSize+1]), failing{}), 0); err == nil {
		t.Fatal("no failure")
	}
	if err := u3.Abort(); err != nil {
		t.Fatal(err)
	}
	core := &minio.Core{Client: s.Client(t)}
	res, err := core.ListMultipartUploads(t.Context(), "data", "root/", "", "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range res.Uploads {
		if up.Key == "root/out/gone.bin" {
			t.Fatalf("an aborted upload is left: %+v", up)
		}
	}

	// Exclusive refuses an object already there.
	u4, err := f.Upload("/out/big.bin", files.UploadOptions{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u4.ReadFromWithConcurrency(strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := u4.Complete(); !errors.Is(err, fs.ErrExist) {
		t.Logf("exclusive put onto an object: %v (the store does not refuse it)", err)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("the source failed") }

// TestUploadMemory: parts are held within the memory given, which an
// upload waits for (with fewer parts in flight if need be), and an upload
// whose part could never fit is refused, not grown into.
func TestUploadMemory(t *testing.T) {
	s := tests3.Start(t)
	s.Bucket(t, "data")
	memory := &budget{size: partSize}
	f := s3fs.New(s3fs.Config{Core: &minio.Core{Client: s.Client(t)}, Bucket: "data", PartSize: partSize, PartsInFlight: 4, Memory: memory})
	defer func() { _ = f.Close() }()
	data := make([]byte, 3*partSize+1)
	_, _ = rand.Read(data)
	write(t, f, "/a.bin", data)
	if got := read(t, f, "/a.bin"); !bytes.Equal(got, data) {
		t.Fatal("the upload within one part of memory differs")
	}
	if memory.most > partSize || memory.held != 0 {
		t.Errorf("held at most %d bytes of %d, %d still held", memory.most, partSize, memory.held)
	}
	small := s3fs.New(s3fs.Config{Core: &minio.Core{Client: s.Client(t)}, Bucket: "data", PartSize: 2 * partSize, Memory: memory})
	defer func() { _ = small.Close() }()
	// A file of one short part needs no part's room; a larger one fails.
	write(t, small, "/tiny.bin", []byte("tiny"))
	u, err := small.Upload("/b.bin", files.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.ReadFromWithConcurrency(bytes.NewReader(make([]byte, 2<<20)), 0); !errors.Is(err, s3fs.ErrTooLargeParts) {
		t.Fatalf("parts larger than the memory: %v", err)
	}
}

// budget is a Memory that records what it held.
type budget struct {
	size, held, most int64
}

func (b *budget) Acquire(_ context.Context, n int64) error {
	b.held += n
	b.most = max(b.most, b.held)
	if b.held > b.size {
		return errors.New("over the budget")
	}
	return nil
}

func (b *budget) Release(n int64) { b.held -= n }
func (b *budget) Size() int64     { return b.size }

// TestWritesKeepNothingCut: a write whose source fails, even with an
// error that wraps io.ErrUnexpectedEOF as a client's cut-off body does,
// leaves the object as it was; an append that another write overtook
// keeps nothing of its own.
func TestWritesKeepNothingCut(t *testing.T) {
	f, _ := newFS(t)
	write(t, f, "/a.txt", []byte("before"))
	for _, size := range []int{100, 2 << 20} { // one request; parts
		w, err := f.OpenFile("/a.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		cut := io.MultiReader(bytes.NewReader(make([]byte, size)), failingWith{fmt.Errorf("client: %w", io.ErrUnexpectedEOF)})
		if _, err := w.ReadFromWithConcurrency(cut, 0); err == nil {
			t.Fatalf("%d bytes, then a cut: no error", size)
		}
		if err := w.Close(); err == nil {
			t.Fatalf("%d bytes, then a cut: closed without error", size)
		}
		if got := read(t, f, "/a.txt"); string(got) != "before" {
			t.Fatalf("%d bytes, then a cut: the object holds %d bytes", size, len(got))
		}
	}
	// An append at the end, Stat telling where that is first.
	a, err := f.OpenFile("/a.txt", os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := a.Stat(); err != nil || fi.Size() != int64(len("before")) {
		t.Fatalf("an append's Stat: %v %v", fi, err)
	}
	if _, err := a.Seek(int64(len("before")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte(" mine")); err != nil {
		t.Fatal(err)
	}
	write(t, f, "/a.txt", []byte("theirs")) // another write, meanwhile
	if err := a.Close(); err == nil {
		t.Error("an append another write overtook completed")
	}
	if got := read(t, f, "/a.txt"); string(got) != "theirs" {
		t.Errorf("the object holds %q, want the other write's", got)
	}
}

type failingWith struct{ err error }

func (f failingWith) Read([]byte) (int, error) { return 0, f.err }
