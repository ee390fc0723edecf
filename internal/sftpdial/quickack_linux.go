package sftpdial

import (
	"net"
	"sync/atomic"
	"syscall"
)

// quickAckConn turns off delayed ACKs before each read while armed. The
// SSH and SFTP start-up is a ping-pong of small packets; with delayed ACKs
// (which the kernel re-enables after every exchange) starting the SFTP
// session on a new connection stalls for the peer's delayed-ACK timer,
// several times over (docs/benchmarks.md has the dial's time).
type quickAckConn struct {
	*net.TCPConn
	raw   syscall.RawConn
	armed atomic.Bool
}

func withQuickAck(conn net.Conn) net.Conn {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return conn
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return conn
	}
	q := &quickAckConn{TCPConn: tc, raw: raw}
	q.armed.Store(true)
	return q
}

func (q *quickAckConn) Read(b []byte) (int, error) {
	if q.armed.Load() {
		_ = q.raw.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		})
	}
	return q.TCPConn.Read(b)
}

// disarmQuickAck ends the start-up: requests on an open session do not
// stall, and need no extra system call per read.
func disarmQuickAck(conn net.Conn) {
	if q, ok := conn.(*quickAckConn); ok {
		q.armed.Store(false)
	}
}
