// Package testproxy forwards TCP connections on loopback to a server,
// counting the bytes sent to it and, when asked, slowing them: how a test
// sees what a client sent a server (a transfer resumed sends only the
// rest) and holds a copy long enough to cut it off.
package testproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is one running proxy.
type Proxy struct {
	Host string
	Port int32
	// sent counts the bytes sent to the server.
	sent atomic.Int64
	// rate is the most bytes a second sent to the server; 0 is no limit.
	rate atomic.Int64
}

// Start forwards connections to target (host:port) until t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Host: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, s)
			mu.Unlock()
			wg.Go(func() { p.pipe(s, c); _ = s.Close(); _ = c.Close() })
			wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close(); _ = s.Close() })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// Sent is the bytes sent to the server so far.
func (p *Proxy) Sent() int64 { return p.sent.Load() }

// Limit slows what is sent to the server to bytesPerSecond; 0 lifts it.
func (p *Proxy) Limit(bytesPerSecond int64) { p.rate.Store(bytesPerSecond) }

// pipe copies from client to server, counting and pacing.
func (p *Proxy) pipe(server, client net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if rate := p.rate.Load(); rate > 0 {
				time.Sleep(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
			p.sent.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}
