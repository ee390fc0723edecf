package files_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sftpgate/sftpgate/hack/fixtures/testftpd"
	"github.com/sftpgate/sftpgate/hack/fixtures/tests3"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/ftpdial"
	"github.com/sftpgate/sftpgate/internal/s3fs"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// backend is a file layer under test: its files, the folder the rows
// work below, and what it can do; what it cannot is refused as
// unsupported, never done otherwise.
type backend struct {
	name string
	fs   files.FS
	root string
	// inPlace: a write in the middle of a file, and truncate; shrinks:
	// truncate to a shorter size (FTP copies what is kept).
	inPlace, shrinks bool
	links            bool
	chmod            bool
	// whole: files appear whole or not at all (files.Uploader).
	whole       bool
	posixRename bool
}

// backends are every backend sftpgate ships: SFTP (a real OpenSSH sshd),
// S3 (a real versitygw) and FTPS (a real vsftpd).
func backends(t *testing.T) []backend {
	sshd := testsshd.Start(t)
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), testsftp.Target(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	store := tests3.Start(t)
	store.Bucket(t, "conformance")
	objects := s3fs.New(s3fs.Config{Core: &minio.Core{Client: store.Client(t)}, Bucket: "conformance", Prefix: "root/", PartSize: s3fs.MinPartSize})
	t.Cleanup(func() { _ = objects.Close() })
	ftpd := testftpd.Start(t)
	target, err := ftpdial.NewTarget(ftpd.Connection("conformance", "ftps"))
	if err != nil {
		t.Fatal(err)
	}
	ftps, err := (&ftpdial.Dialer{}).Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ftps.Close() })
	return []backend{
		{name: "sftp", fs: s.Files, root: sshd.Dir, inPlace: true, shrinks: true, links: true, chmod: true, posixRename: true},
		{name: "s3", fs: objects, root: "/", whole: true, posixRename: true},
		{name: "ftps", fs: ftps, root: ftpd.Dir, shrinks: true},
	}
}

// TestConformance: the file layer's operations, as the worker and the
// gateway use them, give the same results and the same errors on every
// backend; what an object store cannot do is refused as unsupported there,
// never done otherwise.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					dir := path.Join(b.root, row.name)
					must(t, b.fs.MkdirAll(dir))
					row.check(t, b, dir)
				})
			}
		})
	}
}

var rows = []struct {
	name  string
	check func(t *testing.T, b backend, dir string)
}{
	{"whole-file", func(t *testing.T, b backend, dir string) {
		data := make([]byte, 300<<10+7)
		_, _ = rand.Read(data)
		write(t, b.fs, dir+"/a.bin", data)
		if got := read(t, b.fs, dir+"/a.bin"); !bytes.Equal(got, data) {
			t.Fatal("read back other bytes")
		}
		f, err := b.fs.Open(dir + "/a.bin")
		must(t, err)
		defer func() { _ = f.Close() }()
		buf := make([]byte, 10)
		if n, err := f.ReadAt(buf, 1000); n != 10 || err != nil || !bytes.Equal(buf, data[1000:1010]) {
			t.Fatalf("ReadAt: %d, %v", n, err)
		}
		if n, err := f.ReadAt(buf, int64(len(data))-4); n != 4 || !errors.Is(err, io.EOF) {
			t.Fatalf("ReadAt past the end: %d, %v", n, err)
		}
	}},
	{"stat-and-times", func(t *testing.T, b backend, dir string) {
		write(t, b.fs, dir+"/a.csv", []byte("abc"))
		when := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
		must(t, b.fs.Chtimes(dir+"/a.csv", when, when))
		fi, err := b.fs.Stat(dir + "/a.csv")
		if err != nil || fi.Size() != 3 || fi.IsDir() || !fi.ModTime().Equal(when) || fi.Name() != "a.csv" {
			t.Fatalf("stat: %v %v", fi, err)
		}
		if fi, err := b.fs.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("stat of a folder: %v %v", fi, err)
		}
	}},
	{"missing", func(t *testing.T, b backend, dir string) {
		for what, err := range map[string]error{
			"stat":   second(b.fs.Stat(dir + "/none")),
			"open":   second(b.fs.Open(dir + "/none")),
			"remove": b.fs.Remove(dir + "/none"),
			"rename": b.fs.Rename(dir+"/none", dir+"/other"),
		} {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: %v, want not found", what, err)
			}
		}
	}},
	{"listing", func(t *testing.T, b backend, dir string) {
		must(t, b.fs.MkdirAll(dir+"/sub"))
		write(t, b.fs, dir+"/a.csv", []byte("a"))
		write(t, b.fs, dir+"/sub/b.csv", []byte("b"))
		var names []string
		must(t, b.fs.Each(dir, func(fi fs.FileInfo) error {
			names = append(names, fi.Name()+map[bool]string{true: "/"}[fi.IsDir()])
			return nil
		}))
		slices.Sort(names)
		if !slices.Equal(names, []string{"a.csv", "sub/"}) {
			t.Fatalf("listing: %v", names)
		}
		seen := 0
		must(t, b.fs.Each(dir, func(fs.FileInfo) error { seen++; return files.Stop }))
		if seen != 1 {
			t.Fatalf("Stop did not end the listing: %d entries", seen)
		}
	}},
	{"rename", func(t *testing.T, b backend, dir string) {
		write(t, b.fs, dir+"/a.csv", []byte("a"))
		write(t, b.fs, dir+"/b.csv", []byte("b"))
		if err := b.fs.Rename(dir+"/a.csv", dir+"/b.csv"); err == nil {
			t.Fatal("renamed onto a file that exists")
		}
		if string(read(t, b.fs, dir+"/b.csv")) != "b" || string(read(t, b.fs, dir+"/a.csv")) != "a" {
			t.Fatal("a refused rename changed a file")
		}
		must(t, b.fs.MkdirAll(dir+"/done"))
		must(t, b.fs.Rename(dir+"/a.csv", dir+"/done/a.csv"))
		if _, err := b.fs.Stat(dir + "/a.csv"); !errors.Is(err, fs.ErrNotExist) || string(read(t, b.fs, dir+"/done/a.csv")) != "a" {
			t.Fatalf("renamed: the source %v", err)
		}
		if b.fs.HasPosixRename() != b.posixRename {
			t.Fatalf("HasPosixRename: %v", !b.posixRename)
		}
		if b.posixRename {
			must(t, b.fs.PosixRename(dir+"/done/a.csv", dir+"/b.csv"))
		} else {
			unsupported(t, "posix-rename", b.fs.PosixRename(dir+"/done/a.csv", dir+"/b.csv"))
			leftover, err := files.ReplaceInto(b.fs, dir+"/done/a.csv", dir+"/b.csv", true)
			must(t, err)
			if leftover != nil {
				must(t, leftover(b.fs))
			}
		}
		if string(read(t, b.fs, dir+"/b.csv")) != "a" {
			t.Fatal("the rename did not replace")
		}
	}},
	{"remove", func(t *testing.T, b backend, dir string) {
		must(t, b.fs.MkdirAll(dir+"/full"))
		write(t, b.fs, dir+"/full/a.csv", []byte("a"))
		if err := b.fs.RemoveDirectory(dir + "/full"); err == nil {
			t.Fatal("removed a folder that holds a file")
		}
		if err := b.fs.Remove(dir + "/full"); err == nil {
			t.Fatal("Remove took a folder")
		}
		must(t, b.fs.Remove(dir+"/full/a.csv"))
		must(t, b.fs.RemoveDirectory(dir+"/full"))
		if _, err := b.fs.Stat(dir + "/full"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the removed folder: %v", err)
		}
	}},
	{"append", func(t *testing.T, b backend, dir string) {
		// At the end, with O_APPEND or after a Seek there, as the
		// gateway's append and resumable uploads write.
		write(t, b.fs, dir+"/a.csv", []byte("abc"))
		f, err := b.fs.OpenFile(dir+"/a.csv", os.O_WRONLY|os.O_APPEND)
		must(t, err)
		_, err = f.ReadFromWithConcurrency(bytes.NewReader([]byte("de")), 0)
		must(t, err)
		must(t, f.Close())
		f, err = b.fs.OpenFile(dir+"/a.csv", os.O_WRONLY)
		must(t, err)
		if end, err := f.Seek(5, io.SeekStart); err != nil || end != 5 {
			t.Fatalf("seek to the end: %d %v", end, err)
		}
		_, err = f.Write([]byte("f"))
		must(t, err)
		must(t, f.Close())
		if got := string(read(t, b.fs, dir+"/a.csv")); got != "abcdef" {
			t.Fatalf("appended: %q", got)
		}
	}},
	{"change-in-place", func(t *testing.T, b backend, dir string) {
		write(t, b.fs, dir+"/a.csv", []byte("abc"))
		f, err := b.fs.OpenFile(dir+"/a.csv", os.O_WRONLY)
		if !b.inPlace {
			if err == nil {
				_, err = f.Write([]byte("x"))
				_ = f.Close()
			}
			unsupported(t, "a write in the middle", err)
			if got := string(read(t, b.fs, dir+"/a.csv")); got != "abc" {
				t.Fatalf("a refused write changed the file: %q", got)
			}
			if !b.shrinks {
				unsupported(t, "truncate", b.fs.Truncate(dir+"/a.csv", 1))
				return
			}
			unsupported(t, "growing", b.fs.Truncate(dir+"/a.csv", 10))
			must(t, b.fs.Truncate(dir+"/a.csv", 2))
			if got := string(read(t, b.fs, dir+"/a.csv")); got != "ab" {
				t.Fatalf("truncated: %q", got)
			}
			return
		}
		must(t, err)
		_, err = f.Write([]byte("x"))
		must(t, err)
		must(t, f.Close())
		must(t, b.fs.Truncate(dir+"/a.csv", 2))
		if got := string(read(t, b.fs, dir+"/a.csv")); got != "xb" {
			t.Fatalf("changed in place: %q", got)
		}
	}},
	{"permissions-and-links", func(t *testing.T, b backend, dir string) {
		write(t, b.fs, dir+"/a.csv", []byte("a"))
		chmod, link := b.fs.Chmod(dir+"/a.csv", 0o600), b.fs.Symlink(dir+"/a.csv", dir+"/l")
		if !b.chmod {
			unsupported(t, "chmod", chmod)
		} else {
			must(t, chmod)
		}
		if !b.links {
			unsupported(t, "symlink", link)
			return
		}
		must(t, link)
		if target, err := b.fs.ReadLink(dir + "/l"); err != nil || target != dir+"/a.csv" {
			t.Fatalf("readlink: %q %v", target, err)
		}
	}},
	{"resume", func(t *testing.T, b backend, dir string) {
		// A copy cut off goes on from the size the file has (a store
		// resumes its upload's parts instead).
		if b.whole {
			return
		}
		write(t, b.fs, dir+"/a.csv", []byte("abc"))
		f, err := b.fs.OpenFile(dir+"/a.csv", os.O_WRONLY)
		must(t, err)
		_, err = f.Seek(3, io.SeekStart)
		must(t, err)
		_, err = f.ReadFromWithConcurrency(bytes.NewReader([]byte("def")), 0)
		must(t, err)
		must(t, f.Close())
		if got := string(read(t, b.fs, dir+"/a.csv")); got != "abcdef" {
			t.Fatalf("resumed: %q", got)
		}
	}},
	{"whole-writes", func(t *testing.T, b backend, dir string) {
		// A backend whose files appear whole writes to the target's name:
		// nothing shows before Complete. SFTP has no such thing; copies
		// there go under a temporary name (worker/transfer).
		up, ok := b.fs.(files.Uploader)
		if ok != b.whole {
			t.Fatalf("Uploader: %v, want %v", ok, b.whole)
		}
		if !ok {
			return
		}
		u, err := up.Upload(dir+"/a.bin", files.UploadOptions{ModTime: time.Unix(1_700_000_000, 0)})
		must(t, err)
		_, err = u.ReadFromWithConcurrency(bytes.NewReader(make([]byte, s3fs.MinPartSize+1)), 0)
		must(t, err)
		if _, err := b.fs.Stat(dir + "/a.bin"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("an incomplete upload shows: %v", err)
		}
		must(t, u.Complete())
		if fi, err := b.fs.Stat(dir + "/a.bin"); err != nil || fi.Size() != s3fs.MinPartSize+1 || fi.ModTime().Unix() != 1_700_000_000 {
			t.Fatalf("completed: %v %v", fi, err)
		}
	}},
}

func unsupported(t *testing.T, what string, err error) {
	t.Helper()
	if code, _ := files.Status(err); code != files.FxOpUnsupported || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("%s: %v, want unsupported", what, err)
	}
}

func second[T any](_ T, err error) error { return err }

func write(t *testing.T, f files.FS, name string, data []byte) {
	t.Helper()
	w, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	must(t, err)
	_, err = w.Write(data)
	must(t, err)
	must(t, w.Close())
}

func read(t *testing.T, f files.FS, name string) []byte {
	t.Helper()
	r, err := f.Open(name)
	must(t, err)
	defer func() { _ = r.Close() }()
	var b bytes.Buffer
	_, err = r.WriteTo(&b)
	must(t, err)
	return b.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
