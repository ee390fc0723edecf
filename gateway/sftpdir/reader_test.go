package sftpdir_test

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sftpgate/sftpgate/gateway/sftpdial"
	"github.com/sftpgate/sftpgate/gateway/sftpdir"
	"github.com/sftpgate/sftpgate/hack/testsftp"
	"github.com/sftpgate/sftpgate/hack/testsshd"
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
			dirs := srv.session.Dirs

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
			if whole := name == oneChannel; dirs.ReadsWhole() != whole {
				t.Errorf("ReadsWhole = %v, want %v", !whole, whole)
			}

			// Stop ends early without error; the callback's own error
			// comes back as it is; neither breaks the channel.
			n := 0
			if err := dirs.Each(srv.remote, func(os.FileInfo) error {
				n++
				if n == 5 {
					return sftpdir.Stop
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
