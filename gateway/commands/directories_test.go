package commands

import (
	"context"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
)

// oneChannel dials an sshd that allows one channel per connection, where
// directories are read whole, with limits, and returns the file system of
// the session, rooted in the server's directory.
func oneChannel(t *testing.T, limits sftpdir.Limits) (*FS, *testsshd.Server) {
	t.Helper()
	sshd := testsshd.StartWith(t, "MaxSessions 1")
	target := testsftp.Target(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine)
	s, err := (&sftpdial.Dialer{Directories: limits}).Dial(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	root, err := s.ResolveRoot(sshd.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return NewFS(s, root), sshd
}

// tree makes the files of names (a trailing slash makes a directory) under
// the server's directory, owned by its user.
func tree(t *testing.T, sshd *testsshd.Server, names ...string) {
	t.Helper()
	for _, name := range names {
		p := filepath.Join(sshd.Dir, name)
		var err error
		if strings.HasSuffix(name, "/") {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("x"), 0o644)
		}
		if err == nil {
			err = os.Chown(p, sshd.UID, sshd.GID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// numbered is n names in dir: f000 and on.
func numbered(dir string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%sf%03d", dir, i)
	}
	return names
}

// onDisk lists everything under dir on this machine.
func onDisk(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, _ iofs.DirEntry, err error) error {
		names = append(names, strings.TrimPrefix(p, dir))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func run(t *testing.T, fs *FS, command, body string) (any, error) {
	t.Helper()
	c, ok := Lookup(command)
	if !ok {
		t.Fatalf("no command %s", command)
	}
	return c.Run(t.Context(), fs, []byte(body))
}

// tooLargeFailure checks that err is the too_large failure saying msg.
func tooLargeFailure(t *testing.T, what string, err error, msg string) {
	t.Helper()
	failure, ok := err.(*Failure) //nolint:errorlint // the command's own answer
	if !ok || failure.Code != "too_large" || failure.SFTPStatus != nil || failure.Message != msg {
		t.Errorf("%s = %v, want too_large without an SFTP status saying %q", what, err, msg)
	}
}

// TestCappedDirectories: where the server allows one channel, a directory
// past the limits is a too_large failure for list, and for a recursive
// rmdir, which removes nothing of a tree holding one; the session goes on.
func TestCappedDirectories(t *testing.T) {
	fs, sshd := oneChannel(t, sftpdir.Limits{MaxEntries: 50})
	tree(t, sshd, "big/", "fits/", "tree/", "tree/a/", "tree/c/", "tree/c/big/", "gone/", "gone/sub/")
	tree(t, sshd, numbered("big/", 60)...)
	tree(t, sshd, numbered("fits/", 50)...)
	// The tree's large directory is deep in it, among parts that fit: a
	// removal that met it midway would have removed some of them.
	tree(t, sshd, numbered("tree/", 40)...)
	tree(t, sshd, numbered("tree/a/", 40)...)
	tree(t, sshd, numbered("tree/c/", 10)...)
	tree(t, sshd, numbered("tree/c/big/", 51)...)
	tree(t, sshd, numbered("gone/", 49)...) // and sub: 50 entries
	tree(t, sshd, numbered("gone/sub/", 50)...)
	const says = ", more than this gateway reads at once from a server that allows one SFTP channel per connection; " +
		"allow the account more sessions (OpenSSH: MaxSessions), or raise --max-directory-entries"

	_, err := run(t, fs, "list", `{"path": "big"}`)
	tooLargeFailure(t, "list of 60 entries", err, "/big: has more than 50 entries"+says)
	if res, err := run(t, fs, "list", `{"path": "fits", "limit": 10}`); err != nil || len(res.(ListResult).Entries) != 10 { //nolint:forcetypeassert // list's result
		t.Errorf("list of 50 entries after the refusal = %v, %v", res, err)
	}

	before := onDisk(t, sshd.Dir)
	_, err = run(t, fs, "rmdir", `{"path": "tree", "recursive": true}`)
	tooLargeFailure(t, "recursive rmdir of a tree holding 51 entries", err, "/tree/c/big: has more than 50 entries"+says)
	if after := onDisk(t, sshd.Dir); !slices.Equal(after, before) {
		t.Errorf("the tree after a refused rmdir: %d names, had %d", len(after), len(before))
	}
	if _, err := run(t, fs, "rmdir", `{"path": "big"}`); err == nil || err.(*Failure).Code != "not_empty" { //nolint:errorlint,forcetypeassert // the command's own answer
		t.Errorf("rmdir of a directory too large to read = %v, want not_empty", err)
	}

	// A tree that fits is removed, the session serving still.
	if _, err := run(t, fs, "rmdir", `{"path": "gone", "recursive": true}`); err != nil {
		t.Fatalf("recursive rmdir of a tree that fits: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(sshd.Dir, "gone")); !os.IsNotExist(err) {
		t.Errorf("the tree that fits is still there: %v", err)
	}
}
