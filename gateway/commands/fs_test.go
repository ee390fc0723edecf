package commands

import (
	"cmp"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/internal/sftpfs"
)

// countingWriter counts the bytes written through it.
type countingWriter struct {
	io.WriteCloser
	n atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.WriteCloser.Write(p)
}

// pipeClient is an SFTP client of an in-process pkg/sftp server of this
// machine's files, and a count of what it sends.
func pipeClient(t *testing.T) (*sftp.Client, *countingWriter) {
	t.Helper()
	toServer, fromClient := io.Pipe()
	fromServer, toClient := io.Pipe()
	server, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{toServer, toClient})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = server.Serve() }()
	var client *sftp.Client
	t.Cleanup(func() {
		// End both directions; then the server and the client stop.
		_ = toClient.Close()
		_ = fromClient.Close()
		<-served
		if client != nil {
			_ = client.Close()
		}
	})
	sent := &countingWriter{WriteCloser: fromClient}
	if client, err = sftp.NewClientPipe(fromServer, sent); err != nil {
		t.Fatal(err)
	}
	return client, sent
}

// Below a root, Resolve asks the server where a path leads; below "/" a
// path cannot lead outside, and it asks nothing.
func TestResolveAsksTheServerOnlyBelowARoot(t *testing.T) {
	client, sent := pipeClient(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := sent.n.Load()
	if got, err := (&FS{Files: sftpfs.New(client, nil), Env: &Env{Root: dir}}).Resolve("file"); err != nil || got != file {
		t.Fatalf("Resolve below %s = %q, %v", dir, got, err)
	}
	if sent.n.Load() == before {
		t.Errorf("Resolve below %s did not ask the server", dir)
	}

	before = sent.n.Load()
	whole := &FS{Files: sftpfs.New(client, nil), Env: &Env{Root: "/"}}
	for _, resolve := range []func(string) (string, error){whole.Resolve, whole.ResolveParent} {
		if got, err := resolve(file); err != nil || got != file {
			t.Errorf(`below "/": %q, %v, want %q`, got, err, file)
		}
	}
	if sent.n.Load() != before {
		t.Error(`Resolve below "/" asked the server`)
	}
}

// TestScope: with an API key's paths, every path a request names must be
// in them, as must where it leads; new names below them are. (Where the
// server resolves a symlink is tested against OpenSSH, gateway's
// TestKeyPaths: this server's realpath does not follow links.)
func TestScope(t *testing.T) {
	client, _ := pipeClient(t)
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
