package commands

import (
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/pkg/sftp"

	"github.com/sftpgate/sftpgate/hack/fixtures/sftpserver"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
	"github.com/sftpgate/sftpgate/internal/sftpfs"
)

// The servers of this test offer no posix-rename@openssh.com, so that an
// overwrite moves the old file aside first.
func init() {
	if err := sftp.SetSFTPExtensions("statvfs@openssh.com"); err != nil {
		panic(err)
	}
}

// breakingCmds passes commands to the jail's handlers, and breaks the
// session (closes its pipe) instead of running the rename numbered
// breakAt (from 1; 0 never); with breakOpens, it breaks it once a file
// opened for writing is made, before its answer.
type breakingCmds struct {
	sftp.FileCmder
	breakAt, renames atomic.Int32
	breakOpens       atomic.Bool
	cut              func()
}

// breakingPut is the jail's writes, made and then cut off as breakingCmds
// says.
type breakingPut struct {
	sftp.FileWriter
	cmds *breakingCmds
}

func (b breakingPut) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	w, err := b.FileWriter.Filewrite(r)
	if err == nil && b.cmds.breakOpens.Load() {
		b.cmds.cut()
		return nil, sftp.ErrSSHFxConnectionLost
	}
	return w, err
}

func (b *breakingCmds) Filecmd(r *sftp.Request) error {
	if r.Method == "Rename" && b.renames.Add(1) == b.breakAt.Load() {
		b.cut()
		return sftp.ErrSSHFxConnectionLost
	}
	return b.FileCmder.Filecmd(r)
}

// kept records the work an FS leaves for later sessions.
type kept []func(files.Session) error

func (k *kept) Later(fn func(files.Session) error)      { *k = append(*k, fn) }
func (k *kept) Background(fn func(files.Session) error) { *k = append(*k, fn) }

// runOn runs the work kept on fs's session.
func (k *kept) runOn(t *testing.T, fs *FS) {
	t.Helper()
	for _, fn := range *k {
		if err := fn(&sftpdial.Session{Files: fs.Files}); err != nil {
			t.Fatal(err)
		}
	}
}

// session serves dir over a pipe with the jail's handlers, commands going
// through cmds, and returns an FS whose leftovers go to later.
func session(t *testing.T, dir string, cmds *breakingCmds, later *kept) *FS {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	handlers := sftpserver.Handlers(root)
	cmds.FileCmder = handlers.FileCmd
	handlers.FileCmd = cmds
	handlers.FilePut = breakingPut{handlers.FilePut, cmds}
	toServer, fromClient := io.Pipe()
	fromServer, toClient := io.Pipe()
	cmds.cut = func() {
		_ = toClient.Close()
		_ = fromClient.Close()
	}
	server := sftp.NewRequestServer(struct {
		io.Reader
		io.WriteCloser
	}{toServer, toClient}, handlers)
	served := make(chan struct{})
	go func() { defer close(served); _ = server.Serve() }()
	client, err := sftp.NewClientPipe(fromServer, fromClient)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmds.cut()
		<-served
		_ = client.Close()
	})
	return &FS{Files: sftpfs.New(client, nil), Env: &Env{Root: "/", Leftovers: later}}
}

// TestOverwriteWithoutPosixRename: the old file is moved aside, the new one
// renamed in, and the old one removed; when the session breaks in between,
// the next session puts the old file back.
func TestOverwriteWithoutPosixRename(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	write := func(fs *FS, content string) error {
		_, err := fs.writeFile("/file", nil, nil, true, fs.bytesFiller([]byte(content)))
		return err
	}
	var later kept
	if err := write(session(t, dir, &breakingCmds{}, &later), "old"); err != nil {
		t.Fatal(err)
	}
	if err := write(session(t, dir, &breakingCmds{}, &later), "new"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "new" || len(later) != 0 {
		t.Fatalf("after an overwrite the file holds %q, %d leftovers", b, len(later))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left in the directory: %v", entries)
	}

	// The session breaks once the old file is aside: the file is missing
	// until the next session puts it back.
	cmds := &breakingCmds{}
	cmds.breakAt.Store(2)
	if err := write(session(t, dir, cmds, &later), "newer"); !files.SessionFailed(err) {
		t.Fatalf("write = %v, want the session's failure", err)
	}
	if len(later) != 2 {
		t.Fatalf("%d leftovers kept, want 2 (the old file aside, the temporary file)", len(later))
	}
	later.runOn(t, session(t, dir, &breakingCmds{}, &kept{}))
	if b, _ := os.ReadFile(file); string(b) != "new" {
		t.Errorf("after the next session the file holds %q, want the old content back", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left in the directory: %v", entries)
	}
}

// TestAppendCutOffIsUndone: an append the server fails halfway is cut back
// to the file's old length.
func TestAppendCutOffIsUndone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "log"), []byte("start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var later kept
	fs := session(t, dir, &breakingCmds{}, &later)
	failing := func(f files.File) (int64, error) {
		n, _ := f.Write([]byte("partial"))
		return int64(n), &sftp.StatusError{Code: 4} // the server's failure, after a part
	}
	if _, err := appendTo(fs, "/log", nil, 7, failing); err == nil {
		t.Fatal("the failed append succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "log")); string(b) != "start\n" {
		t.Errorf("after a failed append the file holds %q", b)
	}
}

// TestUploadCutOffByTheClientIsUndoneAtOnce: a client that hangs up
// mid-body (read as io.ErrUnexpectedEOF) has not broken the session, so
// the temporary file is removed at once, not left for the next session.
func TestUploadCutOffByTheClientIsUndoneAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	var later kept
	fs := session(t, dir, &breakingCmds{}, &later)
	body := io.MultiReader(strings.NewReader(strings.Repeat("x", 100<<10)), iotest.ErrReader(io.ErrUnexpectedEOF))
	_, err := writeStream(fs, false, url.Values{"path": {"precious"}}, body, 1<<20)
	if _, ok := errors.AsType[*BodyError](err); !ok {
		t.Fatalf("writeStream = %v, want the body's error", err)
	}
	entries, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "precious")); len(entries) != 1 || string(b) != "keep me" || len(later) != 0 {
		t.Errorf("after the cut: %v in the directory, the file holds %q, %d leftovers", entries, b, len(later))
	}
}

// TestUploadWhoseOpenWasCutOffLeavesNoTemporaryFile: the server made the
// temporary file, then the session broke before its answer (chaos seed 2,
// a link cut): the next session removes it.
func TestUploadWhoseOpenWasCutOffLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	var later kept
	cmds := &breakingCmds{}
	cmds.breakOpens.Store(true)
	fs := session(t, dir, cmds, &later)
	_, err := writeStream(fs, false, url.Values{"path": {"file"}}, strings.NewReader("content"), 7)
	if !files.SessionFailed(err) {
		t.Fatalf("writeStream = %v, want the session's failure", err)
	}
	later.runOn(t, session(t, dir, &breakingCmds{}, &kept{}))
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left in the directory: %v", entries)
	}
}
