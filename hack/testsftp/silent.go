package testsftp

import (
	"net"
	"sync"
	"testing"
)

// Silent starts, for t, a server on loopback that accepts TCP connections
// and never says a word: an SSH handshake with it can only time out. It
// returns the server's port.
func Silent(t testing.TB) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		held []net.Conn
	)
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return int32(l.Addr().(*net.TCPAddr).Port) //nolint:forcetypeassert // a TCP listener
}
