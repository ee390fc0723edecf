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
