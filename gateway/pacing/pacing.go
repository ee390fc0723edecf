// Package pacing has large transfers yield to small requests. While small
// requests are being answered, the chunks of large ones (a JSON read's
// content, an upload's body, a copy) together take at most a share of the
// time, so that one tenant's reads and writes of many megabytes, which on
// their own would take every core between the gateway, the SFTP server and
// the clients, leave another tenant's small writes most of the machine.
// With no small request answered lately, large transfers run unpaced.
package pacing

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pacer paces the chunks of a replica's large transfers.
type Pacer struct {
	// share is the part of the time the chunks may take while small
	// requests are being answered; 1 or more does not pace.
	share float64
	// quiet is how long after the last small request large transfers run
	// unpaced.
	quiet time.Duration
	// waited counts the seconds chunks waited for their turn.
	waited prometheus.Counter

	epoch     time.Time
	lastSmall atomic.Int64 // since epoch

	mu sync.Mutex
	// next is when the next chunk may start, since epoch: each chunk's
	// time, over share, pushes it on.
	next time.Duration
}

// maxCharge is the most one chunk is charged: a chunk that waited long
// for its client or server used little of the machine meanwhile.
const maxCharge = 50 * time.Millisecond

// New returns a pacer that gives large transfers share of the time while
// small requests have been answered within quiet, counting the seconds
// they wait in waited (nil counts none).
func New(share float64, quiet time.Duration, waited prometheus.Counter) *Pacer {
	p := &Pacer{share: share, quiet: quiet, waited: waited, epoch: time.Now()}
	p.lastSmall.Store(-int64(quiet))
	return p
}

// SmallDone notes that a small request has been answered.
func (p *Pacer) SmallDone() {
	if p != nil {
		p.lastSmall.Store(int64(time.Since(p.epoch)))
	}
}

func (p *Pacer) contended(now time.Duration) bool {
	return p.share < 1 && now-time.Duration(p.lastSmall.Load()) < p.quiet
}

// charge counts a chunk of d against the large transfers' share.
func (p *Pacer) charge(now, d time.Duration) {
	d = min(d, maxCharge)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = max(p.next, now) + time.Duration(float64(d)*(1/p.share-1))
}

// wait is how long a chunk starting now must wait; 0 once it may go.
func (p *Pacer) wait(now time.Duration) time.Duration {
	if !p.contended(now) {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.next-now, 0)
}

// Stream is one large transfer's sequence of chunks. The zero Stream (and
// a nil one) is not paced.
type Stream struct {
	p *Pacer
	// ctx is the request's: its end stops a wait. Its Done and Err are
	// called only then (a method value kept here cost an allocation per
	// request).
	ctx     context.Context
	started time.Duration // of the chunk under way; -1 for none
}

// Stream starts a large transfer of the request of ctx, whose end stops a
// wait.
func (p *Pacer) Stream(ctx context.Context) Stream {
	return Stream{p: p, ctx: ctx, started: -1}
}

// Next ends the chunk under way, if any, and waits until the next may
// start. It returns the request context's error if that ends first.
func (s *Stream) Next() error {
	if s == nil || s.p == nil {
		return nil
	}
	s.End()
	waitFrom := time.Duration(-1)
	for {
		now := time.Since(s.p.epoch)
		d := s.p.wait(now)
		if d <= 0 {
			s.started = now
			if waitFrom >= 0 {
				if s.p.waited != nil {
					s.p.waited.Add((now - waitFrom).Seconds())
				}
			}
			return nil
		}
		if waitFrom < 0 {
			waitFrom = now
		}
		// A pause in the small requests ends the wait too.
		t := time.NewTimer(min(d, s.p.quiet))
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return s.ctx.Err()
		}
	}
}

// End ends the chunk under way, charging its time if small requests were
// being answered.
func (s *Stream) End() {
	if s == nil || s.p == nil || s.started < 0 {
		return
	}
	now := time.Since(s.p.epoch)
	if s.p.contended(now) {
		s.p.charge(now, now-s.started)
	}
	s.started = -1
}

// Chunk is the most a paced Writer or Reader moves at once.
const Chunk = 256 << 10

// Writer writes to w a Chunk at a time, each paced by s.
func (s *Stream) Writer(w io.Writer) io.Writer {
	if s == nil || s.p == nil {
		return w
	}
	return &writer{s: s, w: w}
}

type writer struct {
	s *Stream
	w io.Writer
}

func (w *writer) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		if err := w.s.Next(); err != nil {
			return written, err
		}
		n, err := w.w.Write(b[:min(len(b), Chunk)])
		written += n
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// Reader reads from r at most a Chunk at a time, each paced by s once
// the first free bytes have been read (so that what turns out small is
// not paced).
func (s *Stream) Reader(r io.Reader, free int64) io.Reader {
	if s == nil || s.p == nil {
		return r
	}
	return &reader{s: s, r: r, free: free}
}

type reader struct {
	s    *Stream
	r    io.Reader
	free int64
}

func (r *reader) Read(b []byte) (int, error) {
	if r.free > 0 {
		n, err := r.r.Read(b[:min(int64(len(b)), r.free)])
		r.free -= int64(n)
		return n, err
	}
	if err := r.s.Next(); err != nil {
		return 0, err
	}
	return r.r.Read(b[:min(len(b), Chunk)])
}
