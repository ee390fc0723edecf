package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// TestList: a folder's regular files, below it to the depth asked, those
// the filter takes, sorted; never through a symlink; bounded.
func TestList(t *testing.T) {
	srv := testsftp.Start(t)
	dir := filepath.Join(srv.Dir, "in")
	for _, d := range []string{"in/a/b/c", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(srv.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"in/top.csv", "in/top.part", "in/a/one.csv", "in/a/b/two.csv", "in/a/b/c/three.csv",
		"in/.sftpgate-0123456789abcdef.tmp", "elsewhere/secret.csv"} {
		if err := os.WriteFile(filepath.Join(srv.Dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../elsewhere", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), testsftp.Target(t, srv.Host, srv.Port, srv.User, srv.Password, srv.HostKeyLine()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	paths := func(w Walk) (string, error) {
		files, err := w.List(context.Background(), s.Files)
		var out string
		for _, f := range files {
			out += f.Path + " "
		}
		return out, err
	}
	filter := Filter{Exclude: []string{"*.part"}}
	for depth, want := range map[int]string{0: "top.csv ", 1: "a/one.csv top.csv ", 3: "a/b/c/three.csv a/b/two.csv a/one.csv top.csv "} {
		if got, err := paths(Walk{Dir: "/in", Depth: depth, Filter: filter, MaxFiles: 100}); err != nil || got != want {
			t.Errorf("depth %d: %q %v, want %q", depth, got, err, want)
		}
	}
	var tooMany *ErrTooManyFiles
	if _, err := paths(Walk{Dir: "/in", Depth: 3, Filter: filter, MaxFiles: 5}); !errors.As(err, &tooMany) || tooMany.Max != 5 {
		t.Errorf("past MaxFiles: %v", err)
	}
	if _, err := paths(Walk{Dir: "/none", MaxFiles: 5}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing folder: %v", err)
	}
}
