package commands

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/internal/sftpfs"
)

// Below a root, Resolve asks the server where a path leads; below "/" a
// path cannot lead outside, and it asks nothing.
func TestResolveAsksTheServerOnlyBelowARoot(t *testing.T) {
	client, wire := testsftp.Pipe(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := wire.Sent()
	if got, err := (&FS{Files: sftpfs.New(client, nil), Env: &Env{Root: dir}}).Resolve("file"); err != nil || got != file {
		t.Fatalf("Resolve below %s = %q, %v", dir, got, err)
	}
	if wire.Sent() == before {
		t.Errorf("Resolve below %s did not ask the server", dir)
	}

	before = wire.Sent()
	whole := &FS{Files: sftpfs.New(client, nil), Env: &Env{Root: "/"}}
	for _, resolve := range []func(string) (string, error){whole.Resolve, whole.ResolveParent} {
		if got, err := resolve(file); err != nil || got != file {
			t.Errorf(`below "/": %q, %v, want %q`, got, err, file)
		}
	}
	if wire.Sent() != before {
		t.Error(`Resolve below "/" asked the server`)
	}
}

// TestScope: with an API key's paths, every path a request names must be
// in them, as must where it leads; new names below them are. (Where the
// server resolves a symlink is tested against OpenSSH, gateway's
// TestKeyPaths: this server's realpath does not follow links.)
func TestScope(t *testing.T) {
	client, _ := testsftp.Pipe(t)
	dir := t.TempDir()
	for _, d := range []string{"incoming", "private"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, fs := range []*FS{
		{Files: sftpfs.New(client, nil), Env: &Env{Root: dir, Scope: Scope(dir, []string{"/incoming/"})}},
		// At "/" nothing leads outside the root, but it may the scope.
		{Files: sftpfs.New(client, nil), Env: &Env{Root: "/", Scope: Scope("/", []string{dir + "/incoming"})}},
	} {
		rel := func(p string) string { return cmp.Or(strings.TrimPrefix(filepath.Join(dir, p), fs.Root), "/") }
		for p, allowed := range map[string]bool{
			"incoming": true, "incoming/a.txt": true, "incoming/new/dir/f": true,
			"private/x": false, "/": false, "incoming/../private/x": false, "incomingx": false,
		} {
			if _, err := fs.Resolve(rel(p)); allowed != (err == nil) || (!allowed && !errors.Is(err, ErrPathNotAllowed)) {
				t.Errorf("root %s: Resolve(%s): %v, allowed %v", fs.Root, p, err, allowed)
			}
		}
	}
	if s := Scope(dir, []string{"a\x00"}); len(s) != 1 || (&FS{Env: &Env{Root: dir, Scope: s}}).inScope(dir) {
		t.Errorf("paths that do not parse: %q allows the root", s)
	}
}
