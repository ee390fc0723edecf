package sftpdir_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/hack/fixtures/sftpserver"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
)

// server is a session to an SFTP server, and a directory of it: dir on
// this machine, remote on the server.
type server struct {
	session     *sftpdial.Session
	dir, remote string
}

func dial(t *testing.T, host string, port int32, user, password, hostKey string) *sftpdial.Session {
	t.Helper()
	target := testsftp.Target(t, host, port, user, password, hostKey)
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

const oneChannel = "openssh, MaxSessions 1"

func servers() map[string]func(t *testing.T) server {
	return map[string]func(t *testing.T) server{
		"openssh": func(t *testing.T) server {
			sshd := testsshd.Start(t)
			return server{dial(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine), sshd.Dir, sshd.Dir}
		},
		// A server that allows one channel per connection: the reader
		// cannot open its own.
		oneChannel: func(t *testing.T) server {
			sshd := testsshd.StartWith(t, "MaxSessions 1")
			return server{dial(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine), sshd.Dir, sshd.Dir}
		},
		"in-process": func(t *testing.T) server {
			s := testsftp.Start(t)
			return server{dial(t, s.Host, s.Port, s.User, s.Password, s.HostKeyLine()), s.Dir, "/"}
		},
	}
}

func TestEach(t *testing.T) {
	for name, start := range servers() {
		t.Run(name, func(t *testing.T) {
			srv := start(t)
			// More entries than one readdir answer holds, and a directory.
			var want []string
			for i := range 1000 {
				want = append(want, fmt.Sprintf("f%04d", i))
				if err := os.WriteFile(filepath.Join(srv.dir, want[i]), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(srv.dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			want = append(want, "sub")
			dirs := srv.session.Files

			var got []string
			err := dirs.Each(srv.remote, func(fi os.FileInfo) error {
				got = append(got, fi.Name())
				switch {
				case fi.Name() == "sub" && !fi.IsDir():
					t.Errorf("sub is not a directory: %v", fi.Mode())
				case fi.Name() != "sub" && (fi.Size() != 1 || !fi.Mode().IsRegular()):
					t.Errorf("%s: size %d, mode %v", fi.Name(), fi.Size(), fi.Mode())
				}
				return nil
			})
			slices.Sort(got)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Each = %d entries, %v; want %d", len(got), err, len(want))
			}
			if whole := name == oneChannel; dirs.ListsWhole() != whole {
				t.Errorf("ListsWhole = %v, want %v", !whole, whole)
			}

			// Stop ends early without error; the callback's own error
			// comes back as it is; neither breaks the channel.
			n := 0
			if err := dirs.Each(srv.remote, func(os.FileInfo) error {
				n++
				if n == 5 {
					return files.Stop
				}
				return nil
			}); err != nil || n != 5 {
				t.Errorf("stopped Each = %d entries, %v", n, err)
			}
			mine := errors.New("mine")
			if err := dirs.Each(srv.remote, func(os.FileInfo) error { return mine }); err != mine { //nolint:errorlint // the very error
				t.Errorf("Each returned %v, not the callback's error", err)
			}
			err = dirs.Each(path.Join(srv.remote, "missing"), func(os.FileInfo) error { return nil })
			if !errors.Is(err, iofs.ErrNotExist) {
				t.Errorf("a missing directory: %v", err)
			}
			n = 0
			if err := dirs.Each(path.Join(srv.remote, "sub"), func(os.FileInfo) error { n++; return nil }); err != nil || n != 0 {
				t.Errorf("an empty directory: %d entries, %v", n, err)
			}
		})
	}
}

func dialWithin(t *testing.T, limits sftpdir.Limits, host string, port int32, user, password, hostKey string) *sftpdial.Session {
	t.Helper()
	target := testsftp.Target(t, host, port, user, password, hostKey)
	s, err := (&sftpdial.Dialer{Directories: limits}).Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// manyFiles makes n files in a new directory name of dir, owned by uid.
func manyFiles(t *testing.T, dir, name string, n int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(p, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestWholeReadsAreCapped: where the server allows one channel, a
// directory past either limit is a *TooLargeError before the callback sees
// any of it, and the session goes on serving.
func TestWholeReadsAreCapped(t *testing.T) {
	sshd := testsshd.StartWith(t, "MaxSessions 1")
	large := manyFiles(t, sshd.Dir, "large", 300)
	atLimit := manyFiles(t, sshd.Dir, "hundred", 100)
	small := manyFiles(t, sshd.Dir, "small", 3)

	for _, tc := range []struct {
		name   string
		limits sftpdir.Limits
		want   files.TooLargeError
		says   string
	}{
		{"entries", sftpdir.Limits{MaxEntries: 100}, files.TooLargeError{Dir: large, Max: 100},
			"has more than 100 entries, more than this gateway reads at once from a server that allows one SFTP channel per connection; " +
				"allow the account more sessions (OpenSSH: MaxSessions), or raise --max-directory-entries"},
		// 300 entries with OpenSSH's long names take far more than 8 KiB;
		// 100 take less than 16.
		{"bytes", sftpdir.Limits{MaxBytes: 16 << 10}, files.TooLargeError{Dir: large, Bytes: true, Max: 16 << 10},
			"takes more than 16384 bytes to list, more than this gateway reads at once from a server that allows one SFTP channel per connection; " +
				"allow the account more sessions (OpenSSH: MaxSessions), or raise --max-directory-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := dialWithin(t, tc.limits, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine)
			seen := 0
			err := s.Files.Each(large, func(os.FileInfo) error { seen++; return nil })
			big, ok := errors.AsType[*files.TooLargeError](err)
			var got files.TooLargeError
			if ok {
				got = *big
				got.Why = "" // its words are checked with the message's
			}
			if !ok || got != tc.want || seen != 0 {
				t.Fatalf("Each of %d entries = %v after %d entries, want %+v before any", 300, err, seen, tc.want)
			}
			if err.Error() != large+": "+tc.says {
				t.Errorf("the error says %q", err)
			}
			if !s.Files.ListsWhole() {
				t.Error("the Reader was not refused a channel")
			}
			// The session still serves, and a directory at the limit
			// (entries) or well within it (bytes) is read whole.
			for dir, want := range map[string]int{atLimit: 100, small: 3} {
				n := 0
				if err := s.Files.Each(dir, func(os.FileInfo) error { n++; return nil }); err != nil || n != want {
					t.Errorf("Each of %d entries after the refusal = %d, %v", want, n, err)
				}
			}
			if _, err := s.Files.RealPath("."); err != nil {
				t.Errorf("the session after the refusal: %v", err)
			}
		})
	}
}

// endless is a directory without end, as a hostile server could send it,
// in the in-process server: it counts the entries it serves, and ends at
// most after endlessEnd, so that a read that does not stop fails the test
// rather than hangs it.
type endless struct {
	sftp.FileLister
	served atomic.Int64
}

const endlessEnd = 200_000

func (e *endless) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	if r.Method == "List" && r.Filepath == "/endless" {
		return e, nil
	}
	return e.FileLister.Filelist(r)
}

func (e *endless) ListAt(entries []os.FileInfo, offset int64) (int, error) {
	n := 0
	for ; n < len(entries) && offset+int64(n) < endlessEnd; n++ {
		entries[n] = entry(fmt.Sprintf("f%09d", offset+int64(n)))
	}
	e.served.Add(int64(n))
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// entry is an empty file of the endless directory.
type entry string

func (e entry) Name() string        { return string(e) }
func (e entry) Size() int64         { return 0 }
func (e entry) Mode() iofs.FileMode { return 0o644 }
func (e entry) ModTime() time.Time  { return time.Unix(0, 0) }
func (e entry) IsDir() bool         { return false }
func (e entry) Sys() any            { return nil }

// TestEndlessDirectoryStops: a server that sends entries without end (the
// in-process one, allowing one channel per connection as OpenSSH's
// MaxSessions 1 does) is stopped at the byte limit, a few of its answers
// past it, not at the directory's end.
func TestEndlessDirectoryStops(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	handlers := sftpserver.Handlers(root)
	list := &endless{FileLister: handlers.FileList}
	handlers.FileList = list
	srv := &sftpserver.Server{User: "tester", Password: "secret", MaxSessions: 1,
		SFTP: func(ch ssh.Channel) error { return sftp.NewRequestServer(ch, handlers).Serve() }}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetHostKey(signer)
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(l) })
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		_ = root.Close()
	})

	const maxBytes = 64 << 10
	port := int32(l.Addr().(*net.TCPAddr).Port) //nolint:forcetypeassert // a TCP listener
	s := dialWithin(t, sftpdir.Limits{MaxBytes: maxBytes}, "127.0.0.1", port, srv.User, srv.Password, srv.HostKeyLine())
	err = s.Files.Each("/endless", func(os.FileInfo) error { return nil })
	big, ok := errors.AsType[*files.TooLargeError](err)
	if !ok || !big.Bytes || big.Max != maxBytes {
		t.Fatalf("Each of an endless directory = %v, want the byte limit's *TooLargeError", err)
	}
	if !s.Files.ListsWhole() {
		t.Error("the Reader was not refused a channel")
	}
	// An entry takes more than 64 bytes on the wire: the limit holds about
	// a thousand, and the read stops within a few answers (a hundred
	// entries each) of it.
	if served := list.served.Load(); served > 5000 {
		t.Errorf("the server sent %d entries before the read stopped", served)
	}
	var names []string
	if err := s.Files.Each("/", func(fi os.FileInfo) error { names = append(names, fi.Name()); return nil }); err != nil || !slices.Equal(names, []string{"file"}) {
		t.Errorf("Each after the refusal = %v, %v", names, err)
	}
}

// zeros reads as many zero bytes as asked, without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestCounterAllocatesNothing: every answer of every session passes the
// Counter, so counting must cost no allocation.
func TestCounterAllocatesNothing(t *testing.T) {
	c := sftpdir.Count(zeros{})
	buf := make([]byte, 4096)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = c.Read(buf) }); allocs != 0 {
		t.Errorf("Counter.Read allocates %v times", allocs)
	}
}
