// Package testsftp runs an SSH server with the SFTP subsystem in the test
// process, on loopback: a fast fixture, and one whose behaviour a test can
// change (swap the host key, refuse SFTP) in ways a real sshd cannot. It
// serves the demo server's SFTP (sftpserver.Jailed), rooted in Dir: Dir is
// "/" on the server.
package testsftp

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/sftpserver"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// Server is one running in-process SSH/SFTP server.
type Server struct {
	*sftpserver.Server
	Host string
	Port int32
	// Dir is the directory the server serves as its "/".
	Dir  string
	root *os.Root
}

// Start starts a server for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, func(h sftp.Handlers) sftp.Handlers { return h })
}

// Tarpit starts a server that logs in and answers everything a connection
// test asks, but never answers the opening of a folder to list it, nor of
// a file to read it: a server that holds whoever polls or copies from it
// until the test ends.
func Tarpit(t testing.TB) *Server {
	t.Helper()
	return holding(t, func(h sftp.Handlers, released <-chan struct{}) sftp.Handlers {
		h.FileList = hangingLister{FileLister: h.FileList, released: released}
		h.FileGet = hangingReader{released: released}
		return h
	})
}

// holding starts a server whose handlers, as wrap makes them, may hold a
// request until released is closed, when the test ends.
func holding(t testing.TB, wrap func(h sftp.Handlers, released <-chan struct{}) sftp.Handlers) *Server {
	t.Helper()
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	return start(t, func(h sftp.Handlers) sftp.Handlers { return wrap(h, released) })
}

type hangingReader struct{ released <-chan struct{} }

func (h hangingReader) Fileread(*sftp.Request) (io.ReaderAt, error) {
	<-h.released
	return nil, os.ErrDeadlineExceeded
}

// Corrupting starts a server that changes the first byte of every file
// written from its start: a destination whose copies never match their
// source.
func Corrupting(t testing.TB) *Server {
	t.Helper()
	return start(t, func(h sftp.Handlers) sftp.Handlers {
		h.FilePut = corruptingWriter{h.FilePut}
		return h
	})
}

type corruptingWriter struct{ sftp.FileWriter }

func (c corruptingWriter) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	w, err := c.FileWriter.Filewrite(r)
	if err != nil {
		return nil, err
	}
	return corruptAt{w}, nil
}

type corruptAt struct{ io.WriterAt }

func (c corruptAt) WriteAt(p []byte, off int64) (int, error) {
	if off == 0 && len(p) > 0 {
		p = append([]byte{p[0] ^ 0xff}, p[1:]...)
	}
	return c.WriterAt.WriteAt(p, off)
}

// Close closes the file written, as the request server would.
func (c corruptAt) Close() error {
	if closer, ok := c.WriterAt.(io.Closer); ok {
		return closer.Close()
	}
	return nil
}

type hangingLister struct {
	sftp.FileLister
	released <-chan struct{}
}

func (h hangingLister) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	if r.Method == "List" {
		<-h.released
		return nil, os.ErrDeadlineExceeded
	}
	return h.FileLister.Filelist(r)
}

func start(t testing.TB, handlers func(sftp.Handlers) sftp.Handlers) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Server: &sftpserver.Server{User: "tester", Password: "correct horse battery staple"},
		Host:   "127.0.0.1",
		Port:   int32(l.Addr().(*net.TCPAddr).Port),
		Dir:    t.TempDir(),
	}
	if s.root, err = os.OpenRoot(s.Dir); err != nil {
		t.Fatal(err)
	}
	s.SFTP = sftpserver.Serving(handlers(sftpserver.Handlers(s.root)))
	s.RotateHostKey(t)
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(l) })
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		_ = s.root.Close()
	})
	return s
}

// RotateHostKey gives the server a new host key, as a reinstalled server
// (or a man in the middle) would present.
func (s *Server) RotateHostKey(t testing.TB) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	s.SetHostKey(signer)
}

// Target is what sftpdial dials for a test server at host:port that takes
// user's password and presents the host key of hostKeyLine (either kind of
// test server: this one, or testsshd's).
func Target(t testing.TB, host string, port int32, user, password, hostKeyLine string) *sftpdial.Target {
	t.Helper()
	conn := &v1alpha1.SftpConnection{Spec: v1alpha1.SftpConnectionSpec{
		Host: host, Port: port, Username: user,
		HostKey: v1alpha1.HostKeyTrust{Trusted: []string{hostKeyLine}},
	}}
	secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.SecretKeyPassword: []byte(password)}}
	target, err := sftpdial.NewTarget(conn, secret)
	if err != nil {
		t.Fatal(err)
	}
	return target
}
