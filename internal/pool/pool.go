// Package pool keeps sessions open to each connection's server (an
// SftpConnection's SSH connections with SFTP sessions, an
// FtpConnection's control connections), so that requests do not pay a
// handshake: up to the connection's limit, shared by concurrent requests,
// replaced when broken, closed when idle.
package pool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sftpgate/sftpgate/internal/egress"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// BrokenError marks an error as the session's failure whatever it wraps.
// Do discards the session of any error files.SessionFailed names (and
// retries an idempotent operation once on a fresh one).
type BrokenError struct{ Err error }

func (e *BrokenError) Error() string { return e.Err.Error() }
func (e *BrokenError) Unwrap() error { return e.Err }

// SessionFailed is true: the error is the session's, whatever it wraps.
func (e *BrokenError) SessionFailed() bool { return true }

var (
	// ErrTimeout is an operation that outlived its timeout: the session it
	// ran on, if it had one, was closed to end it.
	ErrTimeout = errors.New("the server did not answer in time")
	// ErrClosed is a pool replaced because its connection changed.
	ErrClosed = errors.New("the connection changed while the request waited; retry")
	// ErrCredentials is a failure to read a connection's Secret from the
	// API server, when its pool is built.
	ErrCredentials = errors.New("sftpgate cannot read the connection's credentials Secret; retry")
	// ErrQueueFull is a request that found every session as busy as it
	// may be, and as many requests waiting as the pool lets wait.
	ErrQueueFull = errors.New("every session to the server is busy and its queue is full")
	// ErrBusy is an Op with NoWait that found no session at hand.
	ErrBusy = errors.New("every session to the server is busy")
)

// keepaliveTimeout bounds the answer to a keepalive.
const keepaliveTimeout = 10 * time.Second

// sessionShare is how many operations share one session before the pool
// opens another: as many as pkg/sftp keeps in flight on one file by
// default. An SFTP session answers many requests at once, and each
// further SSH connection costs the server a process and a handshake and
// spreads the packets thinner (fewer per system call on both sides), so
// the server spends more CPU per write (docs/benchmarks.md). A stream fills a
// session on its own: a transfer keeps many requests in flight itself,
// and directory reads on one session take turns.
const sessionShare = 64

// sessionMax is the most load a session carries when the pool may open no
// more (two streams, or a stream and as many small operations): beyond
// it, requests wait in the pool's queue.
const sessionMax = 2 * sessionShare

// Op describes an operation to the pool.
type Op struct {
	// Idempotent operations are retried once on a fresh session when
	// theirs broke.
	Idempotent bool
	// Stream is a transfer of a whole file or a read of a whole directory
	// (see commands.Command.Streams): it gets a session of its own while
	// the limit allows.
	Stream bool
	// Timeout bounds the operation, from the wait for a session (a dial
	// included) to its retry. Zero is no bound: the wait and the dial then
	// end with ctx (a dial also with its connectTimeout), while fn runs
	// until it returns.
	Timeout time.Duration
	// NoWait takes a session only when one has room or may be dialed:
	// where the operation would wait, it fails with ErrBusy at once.
	NoWait bool
}

// load is how much of a session op takes, in a pool whose sessions
// take share.
func (op Op) load(share int) int {
	if op.Stream {
		return share
	}
	return 1
}

// DefaultMaxWaiting is the default bound on the requests waiting for a
// session of one pool.
const DefaultMaxWaiting = 256

// Pool is the sessions of one connection.
type Pool struct {
	namespace, name string
	dials           *prometheus.CounterVec
	logger          *slog.Logger // nil logs nothing (log)
	target          files.Target
	max             int
	maxWaiting      int
	// share and most are sessionShare and sessionMax, or 1 for a
	// target whose sessions serve one operation at a time
	// (files.Exclusive).
	share, most int
	version     version

	mu       sync.Mutex
	sessions []*session
	dialing  int
	// waiting is the requests waiting for a session.
	waiting int
	// expecting is the load of the dials under way and of the requests
	// waiting for them.
	expecting int
	// dialFailures counts the dials the server failed, and dialErr is the
	// last one's error: requests that waited for a dial get its answer
	// rather than trying again one after the other.
	dialFailures int
	dialErr      error
	closed       bool
	lastUsed     time.Time
	// wake is closed (and replaced) when a session is added or removed or
	// a dial ends, for requests waiting for room to dial.
	wake chan struct{}
	// left is the cleanup work kept for the pool's sessions.
	left leftovers
	// ops are its connection's operations, for the metrics; nil counts
	// none.
	ops *opStats
}

func (p *Pool) log() *slog.Logger { return logging.OrDiscard(p.logger) }

type session struct {
	files.Session
	dialed time.Time
	// load is the operations on the session, a stream counting as
	// sessionShare, and a keepalive under way as one.
	load     int
	lastUsed time.Time
	broken   bool
	// expire discards the session, for an operation on it that timed out.
	expire func()
}

// Do runs fn on a session. An error of fn's that says the session broke
// (files.SessionFailed) discards the session; an
// idempotent fn is then run once more on a fresh one. When op.Timeout
// passes, a wait for a session ends, or the session fn runs on is closed
// to stop it (the other requests on a session that hangs would hang too),
// and Do returns ErrTimeout. When ctx (the request's) ends first, a wait
// for a session ends with ctx's error; a dial it started goes on for the
// others, and fn, once started, is not stopped.
func (p *Pool) Do(ctx context.Context, op Op, fn func(files.Session) error) error {
	started := time.Now()
	result, err := p.do(ctx, op, fn)
	if p.ops != nil {
		p.ops.observe(result, op.Stream, time.Since(started))
	}
	return err
}

// do is Do, and says how it ended for the metrics.
func (p *Pool) do(ctx context.Context, op Op, fn func(files.Session) error) (opResult, error) {
	w := op.load(p.share)
	var deadline time.Time
	if op.Timeout > 0 {
		deadline = time.Now().Add(op.Timeout)
	}
	for attempt := 0; ; attempt++ {
		// A retry goes to a new connection: when one broke, the others to
		// the same server (restarted, say) may have broken too.
		s, err := p.acquire(ctx, deadline, w, attempt > 0, op.NoWait)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrQueueFull) || errors.Is(err, ErrClosed) {
				return uncounted, err
			}
			return failed, err
		}
		// A timer rather than a context with a deadline, as this runs for
		// every request: it allocates a fraction of what the context and
		// its AfterFunc do.
		var expired *time.Timer
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				// Spent before fn starts (a dial took it all): the
				// session is healthy, and others may be using it.
				p.release(s, w, time.Time{})
				return failed, ErrTimeout
			}
			expired = time.AfterFunc(left, s.expire)
		}
		if p.left.has.Load() {
			p.runLater(s.Session)
		}
		started := time.Now()
		err = p.run(fn, s.Session)
		timedOut := expired != nil && !expired.Stop()
		if timedOut {
			// Its timer fired and is closing it: it leaves the pool now,
			// before another request can take it. The others stay: one
			// slow operation says nothing of them.
			p.mu.Lock()
			p.remove(s)
			p.mu.Unlock()
		}
		isBroken := files.SessionFailed(err)
		if isBroken {
			p.release(s, w, started)
		} else {
			p.release(s, w, time.Time{})
		}
		switch {
		case timedOut:
			return failed, ErrTimeout
		case isBroken && op.Idempotent && attempt == 0:
			continue
		case isBroken:
			return failed, err
		}
		return answered, err
	}
}

// run runs fn on s; a panic in it fails only this operation, and its
// session is released as after any other error.
func (p *Pool) run(fn func(files.Session) error, s files.Session) (err error) {
	defer recovery.Error(p.logger, &err, "an operation on an SFTP session")
	return fn(s)
}

// acquire picks a session for an operation of load w: a stream the least
// loaded, a small operation the busiest with room. It shares a session
// that has room for w; else it waits for a dial under way
// that has room, or dials a new session if the limit allows (a fresh one
// always does), or shares the least loaded session up to sessionMax.
// Otherwise it waits in the pool's queue for a session or a dial to end,
// until deadline (zero: none) or the end of ctx; with the queue full, it
// returns ErrQueueFull at once, and with noWait, ErrBusy.
func (p *Pool) acquire(ctx context.Context, deadline time.Time, w int, fresh, noWait bool) (*session, error) {
	for {
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return nil, ErrTimeout
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		p.lastUsed = now
		// A stream takes the least loaded session; a small operation the
		// busiest that has room, so that small requests share a session
		// (sent and answered many to a system call) rather than spread
		// over the idle ones a stream left.
		var best, busiest *session
		for _, s := range p.sessions {
			if best == nil || s.load < best.load {
				best = s
			}
			if s.load+w <= p.share && (busiest == nil || s.load > busiest.load) {
				busiest = s
			}
		}
		if w < p.share && busiest != nil {
			best = busiest
		}
		room := len(p.sessions)+p.dialing < p.max
		switch {
		case best != nil && !fresh && best.load+w <= p.share, best != nil && !room && best.load+w <= p.most:
			best.load += w
			p.mu.Unlock()
			return best, nil
		case !fresh && p.expecting+w <= p.dialing*p.share, !room:
			// A burst on a cold pool waits for the first dial rather than
			// opening a connection per request; with every session full,
			// requests wait for one to have room.
			if noWait {
				p.mu.Unlock()
				return nil, ErrBusy
			}
			if p.waiting >= p.maxWaiting {
				p.mu.Unlock()
				return nil, ErrQueueFull
			}
			p.waiting++
			p.expecting += w
			wake, failures := p.wake, p.dialFailures
			p.mu.Unlock()
			woken := await(ctx, wake, deadline)
			p.mu.Lock()
			p.waiting--
			p.expecting -= w
			failed, dialErr := p.dialFailures != failures && len(p.sessions) == 0, p.dialErr
			p.mu.Unlock()
			switch {
			case !woken && ctx.Err() != nil:
				return nil, ctx.Err()
			case !woken:
				return nil, ErrTimeout
			case failed:
				return nil, dialErr
			}
			continue
		}
		p.dialing++
		p.expecting += w
		p.mu.Unlock()
		// Requests waiting for this dial may be served by it: one client
		// going away does not end it.
		return p.dial(context.WithoutCancel(ctx), deadline, w)
	}
}

// await waits for wake until ctx ends or deadline (zero: none) passes,
// and reports whether wake came. The deadline is a timer only here: a
// session at hand is taken without one.
func await(ctx context.Context, wake <-chan struct{}, deadline time.Time) bool {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-wake:
		return true
	case <-ctx.Done():
	case <-expired:
	}
	return false
}

// dial opens a session for an operation of load w, by deadline (zero: by
// the connection's connectTimeout alone).
func (p *Pool) dial(ctx context.Context, deadline time.Time, w int) (*session, error) {
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	dialed, err := p.target.Dial(ctx)
	var dialErr *egress.Error
	result := "ok"
	switch {
	case errors.As(err, &dialErr):
		result = dialErr.Reason
	case err != nil: // the request's time ran out first: no fault of the server's
		result = "Cancelled"
	}
	if p.dials != nil {
		p.dials.WithLabelValues(result).Inc()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing--
	p.expecting -= w
	if dialErr != nil { // the server's answer, not this request's end
		p.dialFailures++
		p.dialErr = err
	}
	p.notify()
	switch {
	case errors.Is(err, context.DeadlineExceeded) && !deadline.IsZero():
		return nil, ErrTimeout
	case err != nil:
		return nil, err
	case p.closed:
		go func() { _ = dialed.Close() }()
		return nil, ErrClosed
	}
	s := &session{Session: dialed, dialed: time.Now(), load: w}
	s.expire = func() { p.discard(s) }
	p.sessions = append(p.sessions, s)
	return s, nil
}

// notify wakes the requests waiting for room; p.mu is held.
func (p *Pool) notify() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// release ends a request's use of s. A session that broke in an operation
// started at brokenSince (zero: it did not break) leaves the pool, and is
// closed once no request uses it. The idle sessions dialled before that
// operation started are suspect too (the server restarted, say): they go
// as well, before a request that cannot be retried lands on one; busy ones
// show for themselves, and ones dialled since are fine.
func (p *Pool) release(s *session, w int, brokenSince time.Time) {
	p.releaseAfter(s, w, brokenSince, true)
}

// releaseAfter is release; used says the session served a request (a
// keepalive is none: it must not keep an idle session open for ever).
func (p *Pool) releaseAfter(s *session, w int, brokenSince time.Time, used bool) {
	broken := !brokenSince.IsZero()
	p.mu.Lock()
	s.load -= w
	if used {
		s.lastUsed = time.Now()
	}
	if p.waiting > 0 {
		p.notify()
	}
	var closing []*session
	if broken {
		for _, other := range slices.Clone(p.sessions) {
			if other.load == 0 && other != s && other.dialed.Before(brokenSince) {
				p.remove(other)
				closing = append(closing, other)
			}
		}
		p.remove(s)
	}
	if s.broken && s.load == 0 {
		closing = append(closing, s)
	}
	p.mu.Unlock()
	for _, c := range closing {
		go func() { _ = c.Close() }()
	}
}

// discard takes s out of the pool and closes it now, in use or not.
func (p *Pool) discard(s *session) {
	p.mu.Lock()
	p.remove(s)
	p.mu.Unlock()
	// Outside the lock: closing may wait on the network.
	go func() { _ = s.Close() }()
}

// remove takes s out of the pool; p.mu is held.
func (p *Pool) remove(s *session) {
	if s.broken {
		return
	}
	s.broken = true
	p.sessions = slices.DeleteFunc(p.sessions, func(x *session) bool { return x == s })
	p.notify()
}

// Close closes idle sessions now and busy ones when their requests finish.
func (p *Pool) Close() {
	p.left.close()
	p.mu.Lock()
	p.closed = true
	var idle []*session
	for _, s := range p.sessions {
		s.broken = true
		if s.load == 0 {
			idle = append(idle, s)
		}
	}
	p.sessions = nil
	p.notify()
	p.mu.Unlock()
	for _, s := range idle {
		go func() { _ = s.Close() }()
	}
}

// Warm opens a first session if the pool has none, so that the first
// request does not wait for a dial.
func (p *Pool) Warm(ctx context.Context) error {
	p.mu.Lock()
	cold := len(p.sessions) == 0 && p.dialing == 0
	p.mu.Unlock()
	if !cold {
		return nil
	}
	s, err := p.acquire(ctx, time.Time{}, 1, false, false)
	if err != nil {
		return err
	}
	p.release(s, 1, time.Time{})
	return nil
}

// Size is the number of open sessions.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

func (p *Pool) unusedFor(d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Cleanup work left for a server keeps its pool a while longer.
	unused := time.Since(p.lastUsed)
	return len(p.sessions) == 0 && p.dialing == 0 && (unused > d && !p.left.pending() || unused > pendingGrace*d)
}

// tend closes sessions idle longer than idle, checks the others with an
// SSH keepalive, dropping those that do not answer in time, and takes up
// cleanup work in the background again where it stopped.
func (p *Pool) tend(idle time.Duration) {
	p.startFinishing()
	p.mu.Lock()
	var expired, check []*session
	for _, s := range slices.Clone(p.sessions) {
		switch {
		case s.load > 0:
		case time.Since(s.lastUsed) > idle:
			p.remove(s)
			expired = append(expired, s)
		default:
			s.load++ // held while the keepalive is out
			check = append(check, s)
		}
	}
	p.mu.Unlock()
	for _, s := range expired {
		go func() { _ = s.Close() }()
	}
	for _, s := range check {
		go func() {
			defer recovery.Log(p.logger, "a keepalive")
			sent := time.Now()
			if keepalive(s) {
				p.releaseAfter(s, 1, time.Time{}, false)
			} else {
				p.releaseAfter(s, 1, sent, false)
			}
		}()
	}
}

// keepalive asks the server to answer within keepaliveTimeout.
func keepalive(s *session) bool {
	answered := make(chan error, 1)
	go func() {
		answered <- s.Keepalive()
	}()
	select {
	case err := <-answered:
		return err == nil
	case <-time.After(keepaliveTimeout):
		return false
	}
}
