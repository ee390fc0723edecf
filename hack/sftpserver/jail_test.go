package sftpserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// TestJail: the demo server's SFTP works, and nothing leaves its directory.
func TestJail(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer func() { _ = root.Close() }()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	signer, err := ssh.NewSignerFromKey(priv)
	must(t, err)
	s := &Server{User: "demo", Password: "pw", SFTP: Jailed(root)}
	s.SetHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go s.Serve(l)
	defer func() { _ = l.Close() }()
	conn, err := ssh.Dial("tcp", l.Addr().String(), &ssh.ClientConfig{User: "demo", Auth: []ssh.AuthMethod{ssh.Password("pw")},
		HostKeyCallback: ssh.FixedHostKey(signer.PublicKey())})
	must(t, err)
	defer func() { _ = conn.Close() }()
	c, err := sftp.NewClient(conn)
	must(t, err)

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
	must(t, c.Remove("/out"))
	must(t, c.Remove("/c.txt"))
	must(t, c.RemoveDirectory("/d"))
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
