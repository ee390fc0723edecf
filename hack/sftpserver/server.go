// Package sftpserver runs an SSH server with the SFTP subsystem in-process,
// with password log-in: the demo server of sftpgate-dev (jailed in a
// directory, see Jailed) and the tests' fast fixture (hack/testsftp).
package sftpserver

import (
	"crypto/subtle"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/internal/recovery"
)

// Server is an SSH server whose "sftp" subsystem runs SFTP.
type Server struct {
	User     string
	Password string
	// SFTP serves the subsystem on a session's channel.
	SFTP func(ssh.Channel) error
	// NoSFTP, once set, makes the server refuse the SFTP subsystem.
	NoSFTP atomic.Bool
	// MaxSessions, when above 0, bounds the session channels open at once
	// on one connection, as OpenSSH's MaxSessions does: more are refused.
	// Set it before Serve.
	MaxSessions int

	mu      sync.Mutex
	hostKey ssh.Signer
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

// SetHostKey sets the host key presented from the next connection on.
func (s *Server) SetHostKey(key ssh.Signer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostKey = key
}

// HostKey is the public host key the server presents now.
func (s *Server) HostKey() ssh.PublicKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostKey.PublicKey()
}

// HostKeyLine is HostKey in authorized_keys format, as SftpConnections
// trust it.
func (s *Server) HostKeyLine() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey())))
}

// Serve accepts connections on l until it is closed, then closes the open
// connections, as a server that stops does, and waits for them to end.
func (s *Server) Serve(l net.Listener) {
	defer s.wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			for c := range s.conns {
				_ = c.Close()
			}
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if s.conns == nil {
			s.conns = map[net.Conn]bool{}
		}
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer recovery.Log(panics, inServer)
			s.handle(conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
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
	var open atomic.Int32
	for nc := range chans {
		switch {
		case nc.ChannelType() != "session":
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		case s.MaxSessions > 0 && int(open.Load()) >= s.MaxSessions:
			_ = nc.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		open.Add(1)
		go func() {
			defer open.Add(-1)
			defer recovery.Log(panics, inServer)
			s.session(ch, requests)
		}()
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
		_ = s.SFTP(ch)
		return
	}
}
