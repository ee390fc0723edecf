// Package testsftp runs an SSH server with the SFTP subsystem in the test
// process, on loopback: a fast fixture, and one whose behaviour a test can
// change (swap the host key, refuse SFTP) in ways a real sshd cannot.
//
// It serves Dir with sftp.NewServer, which is not a jail: only for tests.
package testsftp

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Server is one running in-process SSH/SFTP server.
type Server struct {
	Host     string
	Port     int32
	User     string
	Password string
	// Dir is the directory the server starts SFTP sessions in.
	Dir string
	// NoSFTP, once set, makes the server refuse the SFTP subsystem.
	NoSFTP atomic.Bool

	listener net.Listener
	mu       sync.Mutex
	hostKey  ssh.Signer
	wg       sync.WaitGroup
}

// Start starts a server for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Host:     "127.0.0.1",
		Port:     int32(l.Addr().(*net.TCPAddr).Port),
		User:     "tester",
		Password: "correct horse battery staple",
		Dir:      t.TempDir(),
		listener: l,
	}
	s.RotateHostKey(t)
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		_ = l.Close()
		s.wg.Wait()
	})
	return s
}

// HostKey is the public host key the server presents now.
func (s *Server) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey.PublicKey()
}

// HostKeyLine is HostKey in authorized_keys format.
func (s *Server) HostKeyLine() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey())))
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
	s.mu.Lock()
	s.hostKey = signer
	s.mu.Unlock()
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(conn)
		}()
	}
}

func (s *Server) handle(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	config := &ssh.ServerConfig{
		PasswordCallback: func(c ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			if c.User() == s.User && subtle.ConstantTimeCompare(password, []byte(s.Password)) == 1 {
				return nil, nil
			}
			return nil, errors.New("wrong password")
		},
	}
	s.mu.Lock()
	config.AddHostKey(s.hostKey)
	s.mu.Unlock()
	_, chans, reqs, err := ssh.NewServerConn(conn, config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, requests)
	}
}

func (s *Server) session(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range requests {
		isSFTP := req.Type == "subsystem" && len(req.Payload) > 4 && string(req.Payload[4:]) == "sftp"
		if !isSFTP || s.NoSFTP.Load() {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		server, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(s.Dir))
		if err != nil {
			return
		}
		_ = server.Serve()
		return
	}
}
