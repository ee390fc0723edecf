package sftpserver

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/hack/testkit"
)

// The test kit's, as every test package has them.
var must = testkit.Must

// serve serves root (nil: a broken handler) over SSH and returns a client
// of it.
func serve(t *testing.T, root *os.Root) *sftp.Client {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	signer, err := ssh.NewSignerFromKey(priv)
	must(t, err)
	s := &Server{User: "demo", Password: "pw", SFTP: Jailed(root)}
	s.SetHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(l) }()
	conn, err := ssh.Dial("tcp", l.Addr().String(), &ssh.ClientConfig{User: "demo", Auth: []ssh.AuthMethod{ssh.Password("pw")},
		HostKeyCallback: ssh.FixedHostKey(signer.PublicKey())})
	must(t, err)
	c, err := sftp.NewClient(conn, sftp.UseConcurrentWrites(true))
	must(t, err)
	t.Cleanup(func() {
		_ = c.Close()
		_ = conn.Close()
		_ = l.Close()
		<-done
	})
	return c
}

func openRoot(t *testing.T) (string, *os.Root) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	must(t, err)
	t.Cleanup(func() { _ = root.Close() })
	return dir, root
}

// TestJail: the demo server's SFTP works, and nothing leaves its directory.
func TestJail(t *testing.T) {
	dir, root := openRoot(t)
	c := serve(t, root)

	f, err := c.Create("/a.txt")
	must(t, err)
	_, err = f.Write([]byte("hello"))
	must(t, err)
	must(t, f.Close())
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "hello" {
		t.Errorf("the file holds %q", b)
	}
	must(t, c.Mkdir("/d"))
	must(t, c.Rename("/a.txt", "/d/b.txt"))
	entries, err := c.ReadDir("/d")
	must(t, err)
	if len(entries) != 1 || entries[0].Name() != "b.txt" || entries[0].Size() != 5 {
		t.Errorf("listing /d: %v", entries)
	}
	must(t, c.Chmod("/d/b.txt", 0o600))
	if fi, err := c.Stat("/d/b.txt"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("chmod: %v %v", fi, err)
	}
	must(t, c.PosixRename("/d/b.txt", "/c.txt"))
	if err := c.Rename("/c.txt", "/c.txt"); err == nil {
		t.Error("rename onto an existing file succeeded")
	}

	// Out of the jail: ".." stays inside, and a symlink out is not followed.
	if _, err := c.Stat("/../../etc/hostname"); err == nil {
		t.Error("/../../etc/hostname is reachable")
	}
	must(t, c.Symlink("/etc", "/out"))
	if r, err := c.Open("/out/hostname"); err == nil {
		b, _ := io.ReadAll(r)
		t.Errorf("a symlink led out of the jail: %q", b)
	}
	must(t, os.Symlink("../../..", filepath.Join(dir, "up")))
	if _, err := c.RealPath("/up/etc"); err == nil {
		t.Error("realpath followed a symlink above the root")
	}
	must(t, c.Remove("/out"))
	must(t, c.Remove("/up"))
	must(t, c.Remove("/c.txt"))
	must(t, c.RemoveDirectory("/d"))
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestJailDoesWhatOpenSSHDoes: the operations pkg/sftp's request server
// leaves to a handler, done as OpenSSH's sftp-server does them.
func TestJailDoesWhatOpenSSHDoes(t *testing.T) {
	dir, root := openRoot(t)
	c := serve(t, root)
	must(t, os.WriteFile(filepath.Join(dir, "log"), []byte("start\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "d/sub"), 0o755))

	// Append: every write lands at the end, in order, however many are
	// in flight (a request without attributes once crashed the server).
	f, err := c.OpenFile("/log", os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	must(t, err)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB: many writes at once
	_, err = f.Write(big)
	must(t, err)
	must(t, f.Close())
	if b, _ := os.ReadFile(filepath.Join(dir, "log")); !bytes.Equal(b, append([]byte("start\n"), big...)) {
		t.Errorf("after the append the file holds %d bytes, want %d in order", len(b), 6+len(big))
	}

	// A symlink made with an absolute target keeps it, and is followed
	// inside the root: moved elsewhere, it leads where it did.
	must(t, c.Symlink("/d", "/d-link"))
	if target, err := c.ReadLink("/d-link"); err != nil || target != "/d" {
		t.Errorf("readlink = %q, %v; want the target as given", target, err)
	}
	must(t, c.Rename("/d-link", "/d/sub/moved"))
	if got, err := c.RealPath("/d/sub/moved/sub"); err != nil || got != "/d/sub" {
		t.Errorf("a moved symlink leads to %q (%v), want /d/sub", got, err)
	}
	must(t, c.Rename("/d/sub/moved", "/d-link"))
	if fi, err := c.Lstat("/d-link"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("lstat of a symlink: %v, %v", fi, err)
	}
	if fi, err := c.Stat("/d-link/sub"); err != nil || !fi.IsDir() {
		t.Errorf("stat through a symlink: %v, %v", fi, err)
	}
	for p, want := range map[string]string{"/d-link/sub": "/d/sub", "/d-link/new": "/d/new", "/./d/../log": "/log"} {
		if got, err := c.RealPath(p); err != nil || got != want {
			t.Errorf("realpath %s = %q, %v; want %s", p, got, err, want)
		}
	}
	if _, err := c.RealPath("/none/deeper"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("realpath below a missing directory: %v, want not found", err)
	}
	// Removing the link leaves what it points to.
	must(t, c.Remove("/d-link"))
	if _, err := os.Stat(filepath.Join(dir, "d/sub")); err != nil {
		t.Errorf("removing a symlink removed its target: %v", err)
	}

	// posix-rename replaces its target; rename does not.
	must(t, os.WriteFile(filepath.Join(dir, "new"), []byte("new"), 0o644))
	if err := c.Rename("/new", "/log"); err == nil {
		t.Error("rename replaced an existing file")
	}
	must(t, c.PosixRename("/new", "/log"))
	if b, _ := os.ReadFile(filepath.Join(dir, "log")); string(b) != "new" {
		t.Errorf("after posix-rename the target holds %q", b)
	}

	if _, ok := c.HasExtension("statvfs@openssh.com"); !ok {
		t.Fatal("statvfs@openssh.com is not advertised")
	}
	if v, err := c.StatVFS("/d"); err != nil || v.TotalSpace() == 0 {
		t.Errorf("statvfs = %+v, %v", v, err)
	}
}

// TestJailSurvivesPanics: a handler that panics fails its request, and the
// server goes on serving.
func TestJailSurvivesPanics(t *testing.T) {
	c := serve(t, nil) // every operation dereferences the nil root
	for range 2 {
		if _, err := c.Stat("/x"); err == nil {
			t.Fatal("a request to a broken handler succeeded")
		}
	}
}
