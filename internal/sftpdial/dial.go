// Package sftpdial opens SFTP sessions to the servers that SftpConnections
// describe: it reads the credentials Secret, verifies the host key, enforces
// the dial policy on the resolved address, and bounds every step with a
// timeout. The controller's connection test and the gateway's pools both dial
// through it, so a connection that tests Ready is dialled the same way when
// it serves requests.
package sftpdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/sftpdir"
	"github.com/sftpgate/sftpgate/internal/sftpfs"
	"github.com/sftpgate/sftpgate/internal/tenants"
)

// Target is everything needed to dial one SftpConnection, prepared once:
// parsing (and decrypting) a private key is slow, dialling again is not.
type Target struct {
	// namespace is the connection's: a web UI account's dials keep out of
	// the accounts' networks.
	namespace string
	addr      string
	config    *ssh.ClientConfig
	trust     *hostKeyTrust
	timeout   time.Duration
}

// TargetOption changes how a Target dials.
type TargetOption func(*Target)

// RecordFirstUse lets the dial accept any host key while the connection has
// none pinned or recorded, so that the caller can record it (trust on first
// use). Only the connection test uses it.
func RecordFirstUse(t *Target) { t.trust.recordFirstUse = true }

// NewTarget prepares a dial of conn with the credentials in secret. It fails
// with an *Error when the Secret or the host-key trust cannot be used.
func NewTarget(conn *v1alpha1.SftpConnection, secret *corev1.Secret, opts ...TargetOption) (*Target, error) {
	auth, err := authMethods(secret)
	if err != nil {
		return nil, err
	}
	trust, err := newHostKeyTrust(conn)
	if err != nil {
		return nil, err
	}
	t := &Target{
		namespace: conn.Namespace,
		addr:      Address(conn),
		config: &ssh.ClientConfig{
			User:              conn.Spec.Username,
			Auth:              auth,
			HostKeyAlgorithms: trust.algorithms(),
			ClientVersion:     "SSH-2.0-sftpgate",
		},
		trust:   trust,
		timeout: conn.Spec.Limits.ConnectTimeoutOrDefault(),
	}
	for _, opt := range opts {
		opt(t)
	}
	return t, nil
}

// Address is the host:port a connection dials.
func Address(conn *v1alpha1.SftpConnection) string {
	port := conn.Spec.Port
	if port == 0 {
		port = 22
	}
	return net.JoinHostPort(conn.Spec.Host, strconv.Itoa(int(port)))
}

// Session is an open SFTP session.
type Session struct {
	SSH *ssh.Client
	// Files is the session's files, the way every component touches them.
	Files files.FS
	sftp  *sftp.Client
	// HostKey is the host key the server presented and we accepted.
	HostKey ssh.PublicKey
	// ServerVersion is the SSH version string the server announced.
	ServerVersion string
}

// Close ends the SSH connection and the SFTP session on it. The socket goes
// first: closing the SFTP client first waits for the server, which may be
// the one that hangs.
func (s *Session) Close() error {
	return errors.Join(s.SSH.Close(), s.sftp.Close())
}

// Dialer dials Targets within a Policy.
type Dialer struct {
	Policy egress.Policy
	// Tenants says which namespaces are web UI accounts', whose dials
	// follow Policy.ForAccounts.
	Tenants tenants.Kinds
	// Directories bounds the directories a session reads whole (where the
	// server allows it one channel); zero fields take sftpdir's defaults.
	Directories sftpdir.Limits
}

// Dial connects, verifies the host key, authenticates and opens the SFTP
// subsystem, all within the target's connect timeout and ctx. Failures are
// *egress.Error values whose Reason says which step failed.
func (d *Dialer) Dial(parent context.Context, t *Target) (*Session, error) {
	own := time.Now().Add(t.timeout)
	ctx, cancel := context.WithDeadline(parent, own)
	defer cancel()
	policy := d.Policy
	if d.Tenants.IsAccount(ctx, t.namespace) {
		policy = policy.ForAccounts()
	}
	addr := t.addr
	nd := net.Dialer{ControlContext: policy.Control}
	conn, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ended := callerEnded(parent, own); ended != nil {
			return nil, ended
		}
		return nil, egress.NetworkError(err, addr, t.timeout, "an SSH server")
	}
	conn = withQuickAck(conn)
	batched := newBatchConn(conn)
	// The SSH handshake and SFTP start have no context of their own: the
	// deadline bounds them and cancelling ctx closes the socket.
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = batched.Close() })

	// The callback runs again on every key re-exchange, in another goroutine.
	var (
		mu        sync.Mutex
		presented ssh.PublicKey
	)
	config := *t.config
	config.HostKeyCallback = func(_ string, _ net.Addr, key ssh.PublicKey) error {
		mu.Lock()
		defer mu.Unlock()
		if presented == nil {
			presented = key
		}
		return t.trust.check(key)
	}
	failed := func(err error) error {
		if ended := callerEnded(parent, own); ended != nil {
			return ended
		}
		if ctx.Err() != nil || egress.IsTimeout(err) {
			return egress.TimeoutError(addr, t.timeout, err)
		}
		return nil
	}
	sshConn, chans, reqs, err := ssh.NewClientConn(batched, addr, &config)
	if err != nil {
		_ = batched.Close()
		if ferr := failed(err); ferr != nil {
			return nil, ferr
		}
		return nil, handshakeError(err, addr, t.config.User)
	}
	client := ssh.NewClient(sshConn, chans, reqs)
	sftpClient, received, err := startSFTP(client)
	disarmQuickAck(conn)
	if err == nil {
		// Clear the deadline before checking that ctx has not fired: a
		// deadline passing in between would break the session we return.
		_ = conn.SetDeadline(time.Time{})
		if !stop() {
			_ = sftpClient.Close()
			err = ctx.Err()
		}
	}
	if err != nil {
		_ = client.Close()
		if ferr := failed(err); ferr != nil {
			return nil, ferr
		}
		return nil, &egress.Error{Reason: v1alpha1.ReasonSFTPUnavailable, Err: err,
			Message: fmt.Sprintf("logged in to %s, but the server did not start the SFTP subsystem: %v", addr, err)}
	}
	mu.Lock()
	defer mu.Unlock()
	return &Session{
		SSH:           client,
		Files:         sftpfs.New(sftpClient, sftpdir.New(client, sftpClient, received, d.Directories)),
		sftp:          sftpClient,
		HostKey:       presented,
		ServerVersion: string(sshConn.ServerVersion()),
	}, nil
}

// startSFTP starts the SFTP subsystem on a new session of client, as
// sftp.NewClient does (the server's stderr is discarded, and closing the
// client closes the session's input), but reads the server's answers
// through a Counter: the session's directory Reader stops a whole read by
// the bytes it has received.
func startSFTP(client *ssh.Client) (*sftp.Client, *sftpdir.Counter, error) {
	s, err := client.NewSession()
	if err != nil {
		return nil, nil, err
	}
	w, err := s.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	r, err := s.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := s.RequestSubsystem("sftp"); err != nil {
		return nil, nil, err
	}
	received := sftpdir.Count(r)
	// Concurrent writes: a large Write (a big JSON write, copy) is not bound
	// by one round trip per 32 KiB. (A write that fails may leave gaps; the
	// file is incomplete then anyway.)
	c, err := sftp.NewClientPipe(received, w, sftp.UseConcurrentWrites(true))
	return c, received, err
}

// callerEnded is the caller's end of a dial, not the server's fault:
// parent was cancelled, or its deadline, earlier than the dial's own, has
// passed (the socket's deadline, copied from it, can fire before parent's
// timer does).
func callerEnded(parent context.Context, own time.Time) error {
	if err := parent.Err(); errors.Is(err, context.Canceled) {
		return err
	}
	if d, ok := parent.Deadline(); ok && d.Before(own) && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

func handshakeError(err error, addr, user string) error {
	var mismatch *hostKeyMismatchError
	switch {
	case errors.As(err, &mismatch):
		return &egress.Error{Reason: v1alpha1.ReasonHostKeyMismatch, Err: err, Message: mismatch.msg}
	case strings.Contains(err.Error(), "unable to authenticate"):
		return &egress.Error{Reason: v1alpha1.ReasonAuthenticationFailed, Err: err,
			Message: fmt.Sprintf("%s refused the credentials for user %q", addr, user)}
	}
	return &egress.Error{Reason: v1alpha1.ReasonSSHHandshakeFailed, Err: err,
		Message: fmt.Sprintf("SSH handshake with %s failed; is it an SSH server? (%v)", addr, err)}
}

// ResolveRoot returns rootPath as an absolute path on the server (empty
// means the login directory) after checking that it is a directory.
func (s *Session) ResolveRoot(rootPath string) (string, error) {
	if rootPath == "" {
		rootPath = "."
	}
	abs, err := s.Files.RealPath(rootPath)
	if err == nil {
		var fi os.FileInfo
		if fi, err = s.Files.Stat(abs); err == nil && !fi.IsDir() {
			return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible,
				Message: fmt.Sprintf("rootPath %q is not a directory", abs)}
		}
	}
	switch {
	case err == nil:
		return abs, nil
	case errors.Is(err, os.ErrNotExist):
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathNotFound, Err: err,
			Message: fmt.Sprintf("rootPath %q does not exist on the server", rootPath)}
	case errors.Is(err, os.ErrPermission):
		return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible, Err: err,
			Message: fmt.Sprintf("user may not access rootPath %q", rootPath)}
	}
	return "", &egress.Error{Reason: v1alpha1.ReasonRootPathInaccessible, Err: err,
		Message: fmt.Sprintf("cannot stat rootPath %q: %v", rootPath, err)}
}

// FS is the session's files.
func (s *Session) FS() files.FS { return s.Files }

// Version is the SSH version string the server announced.
func (s *Session) Version() string { return s.ServerVersion }

// Keepalive asks the server to answer an SSH keepalive.
func (s *Session) Keepalive() error {
	_, _, err := s.SSH.SendRequest("keepalive@openssh.com", true, nil)
	return err
}

// Target prepares pooled dials of obj, an SftpConnection, with secret.
func (d *Dialer) Target(obj client.Object, secret *corev1.Secret) (files.Target, error) {
	conn, ok := obj.(*v1alpha1.SftpConnection)
	if !ok {
		return nil, fmt.Errorf("sftpdial cannot dial a %T", obj)
	}
	t, err := NewTarget(conn, secret)
	if err != nil {
		return nil, err
	}
	return d.For(t), nil
}

// For is t dialled by d, as a pool dials it.
func (d *Dialer) For(t *Target) files.Target { return pooled{d, t} }

type pooled struct {
	d *Dialer
	t *Target
}

func (p pooled) Dial(ctx context.Context) (files.Session, error) {
	s, err := p.d.Dial(ctx, p.t)
	if err != nil {
		return nil, err // not a nil *Session in an interface
	}
	return s, nil
}
