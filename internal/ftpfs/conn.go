package ftpfs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// A server is a stranger: each socket bounds how long a read or a write
// may wait (timeout, from its start), and what may arrive without a
// request (a control connection's reply, a listing) by bytes.

// boundedConn is a socket whose every read and write has timeout, and
// whose reads stop after budget bytes (nil: no bound).
type boundedConn struct {
	net.Conn
	timeout time.Duration
	// budget is what may still be read; a write refills it to refill
	// (a control connection's: each command has a reply of its own).
	budget *atomic.Int64
	refill int64
	// what names the budget's bound in the error.
	what string
	// wrote is set by the first write (a control connection's first
	// command).
	wrote *atomic.Bool
}

// ErrTooLarge is a reply or a listing past its bound.
var ErrTooLarge = errors.New("the server sent more than sftpgate reads")

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.timeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(c.timeout))
	}
	n, err := c.Conn.Read(p)
	if c.budget != nil && c.budget.Add(-int64(n)) < 0 {
		return n, fmt.Errorf("%w: %s", ErrTooLarge, c.what)
	}
	return n, err
}

func (c *boundedConn) Write(p []byte) (int, error) {
	if c.timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(c.timeout))
	}
	if c.refill > 0 {
		c.budget.Store(c.refill)
	}
	if c.wrote != nil {
		c.wrote.Store(true)
	}
	return c.Conn.Write(p)
}

// sockets dials one control connection's sockets: the control
// connection first, then its data connections. It is jlaffaye/ftp's dial
// function, so that every socket is checked by the dial policy, bounded,
// and encrypted as the connection says (the library would dial data
// connections to the address PASV names, and encrypt none of them when
// given a dial function).
type sockets struct {
	cfg *Config
	ctx context.Context
	// peer is the control connection's address: data connections go to
	// its IP whatever PASV names, so that a server cannot point them at
	// another host.
	peer *net.TCPAddr
	// listing is the bytes a data connection opened now may carry, while
	// a listing runs (0: a file's data, unbounded).
	listing atomic.Int64
	// reply bounds a control connection's reply.
	reply atomic.Int64
	// control is the control connection once dialled (for Close), and
	// its bounds.
	control net.Conn
	bounds  *boundedConn
	// commanded: a command was sent on it.
	commanded atomic.Bool
}

// maxReply bounds one reply on the control connection (a FEAT, a
// multi-line greeting): a server that sends more is cut off.
const maxReply = 256 << 10

func (s *sockets) dial(network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: s.cfg.ConnectTimeout, ControlContext: s.cfg.Control}
	isControl := s.peer == nil
	if !isControl {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addr = net.JoinHostPort(s.peer.IP.String(), port)
	}
	ctx := s.ctx // the login's, for the control connection
	if !isControl {
		ctx = context.Background()
	}
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		if !isControl {
			return nil, &PassiveError{err}
		}
		return nil, err
	}
	conn := &boundedConn{Conn: raw, timeout: s.cfg.OperationTimeout}
	if isControl {
		// The login's replies are bounded as the dial is; Dial sets the
		// operation timeout once logged in.
		conn.timeout = s.cfg.ConnectTimeout
		s.peer, _ = raw.RemoteAddr().(*net.TCPAddr)
		s.control, s.bounds = raw, conn
		conn.budget, conn.refill, conn.what = &s.reply, maxReply, fmt.Sprintf("a reply of more than %d bytes", maxReply)
		conn.wrote = &s.commanded
		s.reply.Store(maxReply)
		if s.cfg.TLS == Implicit {
			return tls.Client(conn, s.cfg.TLSConfig), nil
		}
		return conn, nil
	}
	if n := s.listing.Load(); n > 0 {
		conn.budget, conn.what = new(atomic.Int64), fmt.Sprintf("a listing of more than %d bytes", n)
		conn.budget.Store(n)
	}
	if s.cfg.TLS != None {
		return &tlsData{Conn: tls.Client(conn, s.cfg.TLSConfig), raw: conn}, nil
	}
	return conn, nil
}

// tlsData is an encrypted data connection that ends as TLS asks: a
// close_notify, then the server's own, before the socket closes. Closed
// at once, the socket would answer the server's unread session tickets
// with a reset, and the server would count the upload failed.
type tlsData struct {
	*tls.Conn
	raw *boundedConn
}

// drainWait and maxDrain bound how long, and how much, a closing data
// connection reads waiting for the server's end.
const (
	drainWait = 5 * time.Second
	maxDrain  = 64 << 10
)

func (c *tlsData) Close() error {
	_ = c.CloseWrite()
	if tcp, ok := c.raw.Conn.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
	if c.raw.timeout == 0 || c.raw.timeout > drainWait {
		c.raw.timeout = drainWait
	}
	_, _ = io.CopyN(io.Discard, c.Conn, maxDrain)
	return c.Conn.Close()
}

// PassiveError is a data connection that could not be opened.
type PassiveError struct{ Err error }

func (e *PassiveError) Error() string {
	return fmt.Sprintf("cannot open a passive data connection: %v", e.Err)
}
func (e *PassiveError) Unwrap() error { return e.Err }
