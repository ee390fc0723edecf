package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsftp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// TestFIFOsAreNeverOpened: a symlink out of the root to a FIFO is refused
// by every read (read, hash, copy's source, a raw read) without the FIFO
// being opened, and a FIFO inside the root, or anywhere below "/", is
// refused as what the gateway does not open: OpenSSH's sftp-server
// answers one request at a time, and opening a FIFO would block it until
// a writer came. The session's next operation answers each time.
func TestFIFOsAreNeverOpened(t *testing.T) {
	sshd := testsshd.Start(t)
	tree(t, sshd, "root/", "root/a.txt", "outside/")
	outside, inside := filepath.Join(sshd.Dir, "outside", "fifo"), filepath.Join(sshd.Dir, "root", "fifo")
	for _, fifo := range []string{outside, inside} {
		testkit.Must(t, syscall.Mkfifo(fifo, 0o666))
		testkit.Must(t, os.Chown(fifo, sshd.UID, sshd.GID))
		// A server blocked on opening it (a failure of this test) is let
		// go: opening a FIFO to read and write never blocks on Linux.
		t.Cleanup(func() {
			if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				_ = f.Close()
			}
		})
	}
	link := filepath.Join(sshd.Dir, "root", "pipe")
	testkit.Must(t, os.Symlink(outside, link))
	testkit.Must(t, os.Lchown(link, sshd.UID, sshd.GID))
	target := testsftp.Target(t, sshd.Host, sshd.Port, testsshd.User, sshd.Password, sshd.HostKeyLine)
	s, err := (&sftpdial.Dialer{}).Dial(context.Background(), target)
	testkit.Must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	root, err := s.ResolveRoot(filepath.Join(sshd.Dir, "root"))
	testkit.Must(t, err)
	confined, whole := NewFS(s, root), NewFS(s, "/")

	// answers runs op and says what it answered, once it has: a server
	// blocked on a FIFO never answers, and the test fails waiting.
	answers := func(what string, op func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- op() }()
		var err error
		testkit.Eventually(t, what+" answers", func() bool {
			select {
			case err = <-done:
				return true
			default:
				return false
			}
		})
		return err
	}
	command := func(fs *FS, name, body string) func() error {
		return func() error { _, err := run(t, fs, name, body); return err }
	}
	rawRead := func(fs *FS, body string) func() error {
		return func() error {
			f, _, err := openRequested(fs, []byte(body))
			if f != nil {
				_ = f.Close()
			}
			return err
		}
	}
	isUnsupported := func(err error) bool {
		var failure *Failure
		return errors.As(err, &failure) && failure.Code == "unsupported"
	}
	for _, c := range []struct {
		what    string
		op      func() error
		refused func(error) bool
	}{
		{"read of a link out to a FIFO", command(confined, "read", `{"path": "/pipe"}`), outsideRoot("path")},
		{"hash of a link out to a FIFO", command(confined, "hash", `{"path": "/pipe"}`), outsideRoot("path")},
		{"copy from a link out to a FIFO", command(confined, "copy", `{"from": "/pipe", "to": "/copy"}`), outsideRoot("from")},
		{"raw read of a link out to a FIFO", rawRead(confined, `{"path": "/pipe"}`), outsideRoot("path")},
		{"read of a FIFO inside the root", command(confined, "read", `{"path": "/fifo"}`), isUnsupported},
		{`read of a FIFO below "/"`, command(whole, "read", `{"path": "`+outside+`"}`), isUnsupported},
		{"append to a FIFO inside the root", command(confined, "append", `{"path": "/fifo", "file": {"text": "x"}}`), isUnsupported},
	} {
		if err := answers(c.what, c.op); !c.refused(err) {
			t.Errorf("%s: %v", c.what, err)
		}
		if err := answers("a stat after the "+c.what, command(confined, "stat", `{"path": "/a.txt"}`)); err != nil {
			t.Errorf("a stat after the %s: %v", c.what, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(sshd.Dir, "root", "copy")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused copy left its target: %v", err)
	}
}

// outsideRoot says whether an error is the refusal of field's path as
// leading outside the root.
func outsideRoot(field string) func(error) bool {
	return func(err error) bool {
		var bad *BadRequest
		return errors.As(err, &bad) && bad.Field == field && bad.Message == ErrOutsideRoot.Message
	}
}
