package commands

import (
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"
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

// Below a root, Resolve asks the server where a path leads; below "/" a
// path cannot lead outside, and it asks nothing.
func TestResolveAsksTheServerOnlyBelowARoot(t *testing.T) {
	toServer, fromClient := io.Pipe()
	fromServer, toClient := io.Pipe()
	server, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{toServer, toClient})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve() }()
	sent := &countingWriter{WriteCloser: fromClient}
	client, err := sftp.NewClientPipe(fromServer, sent)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = server.Close(); _ = client.Close() }()

	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := sent.n.Load()
	if got, err := (&FS{Client: client, Root: dir}).Resolve("file"); err != nil || got != file {
		t.Fatalf("Resolve below %s = %q, %v", dir, got, err)
	}
	if sent.n.Load() == before {
		t.Errorf("Resolve below %s did not ask the server", dir)
	}

	before = sent.n.Load()
	whole := &FS{Client: client, Root: "/"}
	for _, resolve := range []func(string) (string, error){whole.Resolve, whole.ResolveParent} {
		if got, err := resolve(file); err != nil || got != file {
			t.Errorf(`below "/": %q, %v, want %q`, got, err, file)
		}
	}
	if sent.n.Load() != before {
		t.Error(`Resolve below "/" asked the server`)
	}
}
