package files_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/tempname"
)

// TestReplaceIntoNeverLosesTheTarget: on a server without posix-rename,
// the file replaced is moved aside and back; a rename that fails leaves
// it as it was, one that succeeds leaves nothing aside.
func TestReplaceIntoNeverLosesTheTarget(t *testing.T) {
	// This test binary's servers offer no posix-rename.
	if err := sftp.SetSFTPExtensions("statvfs@openssh.com"); err != nil {
		t.Fatal(err)
	}
	srv := testsftp.Start(t)
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), testsftp.Target(t, srv.Host, srv.Port, srv.User, srv.Password, srv.HostKeyLine()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := s.Files
	if c.HasPosixRename() {
		t.Fatal("the server offers posix-rename: the test would not move the target aside")
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(srv.Dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(srv.Dir, name))
		return string(b)
	}
	nothingAside := func() {
		t.Helper()
		entries, _ := os.ReadDir(srv.Dir)
		for _, e := range entries {
			if tempname.Is(e.Name()) {
				t.Errorf("left aside: %s", e.Name())
			}
		}
	}

	write("target", "old")
	leftover, err := files.ReplaceInto(c, "/missing", "/target", true)
	if err == nil || leftover == nil {
		t.Fatalf("replacing from a missing file: %v (leftover %v)", err, leftover != nil)
	}
	if err := leftover(c); err != nil {
		t.Fatal(err)
	}
	if got := read("target"); got != "old" {
		t.Errorf("after a failed replace the target holds %q, want the old file", got)
	}
	nothingAside()

	write("new", "new")
	leftover, err = files.ReplaceInto(c, "/new", "/target", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := leftover(c); err != nil {
		t.Fatal(err)
	}
	if got := read("target"); got != "new" {
		t.Errorf("after a replace the target holds %q", got)
	}
	nothingAside()

	write("newer", "newer")
	if _, err := files.ReplaceInto(c, "/newer", "/target", false); err == nil {
		t.Error("without replace, an existing target was replaced")
	}
	if got := read("target"); got != "new" {
		t.Errorf("a refused rename changed the target: %q", got)
	}
}
