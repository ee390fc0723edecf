package sftpdial

import (
	"net"
	"runtime"
	"sync"
	"time"
)

const (
	// maxPending bounds what a batchConn holds before Write waits for the
	// socket.
	maxPending = 256 << 10
	// closeFlush bounds how long Close tries to send what is pending: a
	// server that stopped reading must not hold up a Close (which also
	// ends operations that timed out).
	closeFlush = time.Second
)

// batchConn gathers the packets the SSH transport writes while a write to
// the socket is under way, and sends them in one system call. The
// transport writes (and flushes) each packet under its lock, one system
// call each; with many SFTP requests in flight on one connection, those
// calls dominate the gateway's CPU (docs/benchmarks.md).
type batchConn struct {
	net.Conn
	kick chan struct{} // a Write left data to send
	stop chan struct{}
	done chan struct{} // send has returned
	once sync.Once

	mu      sync.Mutex
	drained *sync.Cond // pending was taken to be sent
	pending []byte
	err     error // the socket's write error, for every later Write
}

func newBatchConn(conn net.Conn) *batchConn {
	b := &batchConn{Conn: conn, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	b.drained = sync.NewCond(&b.mu)
	go b.send()
	return b
}

// Write queues p for the socket. An error of an earlier write is returned
// by the writes after it: the SSH transport fails the connection then.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for len(b.pending) >= maxPending && b.err == nil {
		b.drained.Wait()
	}
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.pending = append(b.pending, p...)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // a send is due anyway
	}
	return len(p), nil
}

// send writes what is pending until the connection fails or closes, and
// then what was pending at the close.
func (b *batchConn) send() {
	defer close(b.done)
	var batch []byte
	for {
		closing := false
		select {
		case <-b.kick:
		case <-b.stop:
			closing = true
		}
		// Let the goroutines that are ready run first: under load they are
		// requests about to send their next packet, which then go out in
		// this batch (at 16 concurrent writes, 1 system call per write
		// instead of 3). Alone, a goroutine carries on at once.
		runtime.Gosched()
		b.mu.Lock()
		batch, b.pending = b.pending, batch[:0]
		b.drained.Broadcast()
		b.mu.Unlock()
		var err error
		if len(batch) > 0 {
			_, err = b.Conn.Write(batch)
		}
		if closing && err == nil {
			err = net.ErrClosed
		}
		if err != nil {
			b.mu.Lock()
			b.err = err
			b.drained.Broadcast()
			b.mu.Unlock()
			return
		}
	}
}

// Close sends what is pending, within closeFlush, and closes the socket.
func (b *batchConn) Close() error {
	b.once.Do(func() {
		_ = b.SetWriteDeadline(time.Now().Add(closeFlush))
		close(b.stop)
	})
	<-b.done
	return b.Conn.Close()
}
