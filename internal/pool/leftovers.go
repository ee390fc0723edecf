package pool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// Cleanup work a pool keeps for its server: undoing what an operation cut
// off by a broken session left half done. It has a lock of its own, apart
// from the sessions'.

// leftovers is one pool's cleanup work.
type leftovers struct {
	// has says, without taking mu, whether there is work for the next
	// session or it runs: until it has run, other operations wait (done
	// is closed when it has), so that none acts on what it is undoing.
	has atomic.Bool

	mu sync.Mutex
	// later is work for the next operation's session (Pool.Later).
	later   []work
	running bool
	done    chan struct{}
	// background is such work that has more to do than a request should
	// wait for (ErrNotDone): finish runs it, a part at a time, on its own.
	background []work
	finishing  bool
	closed     bool
}

// work is cleanup work, run on a session of the pool's server.
type work = func(files.Session) error

// maxLater bounds the work a pool keeps for its next session, and in the
// background; beyond it, the oldest is dropped (and logged).
const maxLater = 256

// ErrNotDone is work kept for a later session that did a part of what it
// has to do: the rest is done in the background, a part at a time.
var ErrNotDone = errors.New("more to do")

// pendingGrace is how many idle timeouts a pool with cleanup work left is
// kept unused for, for its server to come back.
const pendingGrace = 10

// backgroundTimeout bounds a part of the work done in the background.
const backgroundTimeout = time.Minute

// Later keeps fn for the session of the next operation, which runs it
// first: cleaning up what an operation cut off by a broken session left
// half done. When fn fails as a broken session does (files.SessionFailed), it stays for the one after;
// when it returns ErrNotDone, it goes on in the background.
func (p *Pool) Later(fn func(files.Session) error) {
	p.left.mu.Lock()
	defer p.left.mu.Unlock()
	p.keep(fn)
}

// keep adds work to what waits for the next session; p.left.mu is held.
func (p *Pool) keep(fns ...work) {
	l := &p.left
	l.later = append(l.later, fns...)
	if drop := len(l.later) - maxLater; drop > 0 {
		p.log().Warn("too much cleanup work waits for a session; dropping the oldest",
			"namespace", p.namespace, "name", p.name, "dropped", drop)
		l.later = slices.Delete(l.later, 0, drop)
	}
	l.has.Store(len(l.later) > 0 || l.running)
}

// Background keeps fn to be done apart from requests, on a session of the
// pool, again while it returns ErrNotDone: cleanup work that may take long.
func (p *Pool) Background(fn func(files.Session) error) {
	l := &p.left
	l.mu.Lock()
	l.background = append(l.background, fn)
	if drop := len(l.background) - maxLater; drop > 0 {
		p.log().Warn("too much cleanup work waits in the background; dropping the oldest",
			"namespace", p.namespace, "name", p.name, "dropped", drop)
		l.background = slices.Delete(l.background, 0, drop)
	}
	l.mu.Unlock()
	p.startFinishing()
}

// startFinishing starts finish unless it runs or there is nothing to do.
func (p *Pool) startFinishing() {
	l := &p.left
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.finishing && len(l.background) > 0 && !l.closed {
		l.finishing = true
		go p.finish()
	}
}

// finish runs the background work, a part at a time, each with a session
// of the pool like any operation, until none is left or a part fails (the
// pool's upkeep then starts it again).
func (p *Pool) finish() {
	defer recovery.Log(p.logger, "cleanup work in the background")
	l := &p.left
	defer func() {
		l.mu.Lock()
		l.finishing = false
		l.mu.Unlock()
	}()
	for {
		l.mu.Lock()
		if len(l.background) == 0 || l.closed {
			l.mu.Unlock()
			return
		}
		fn := l.background[0]
		l.background = l.background[1:]
		l.mu.Unlock()
		err := p.Do(context.Background(), Op{Timeout: backgroundTimeout}, fn)
		if err == nil {
			continue
		}
		l.mu.Lock()
		if errors.Is(err, ErrNotDone) {
			l.background = append(l.background, fn)
		} else {
			l.background = append([]work{fn}, l.background...)
		}
		l.mu.Unlock()
		if !errors.Is(err, ErrNotDone) {
			return
		}
	}
}

// runLater runs the work kept for s's server on s, in order, until s
// breaks; or, while another operation runs it, waits until it is done.
func (p *Pool) runLater(s files.Session) {
	l := &p.left
	l.mu.Lock()
	for l.running {
		done := l.done
		l.mu.Unlock()
		<-done
		l.mu.Lock()
	}
	todo := l.later
	l.later = nil
	if len(todo) == 0 {
		l.has.Store(false)
		l.mu.Unlock()
		return
	}
	l.running, l.done = true, make(chan struct{})
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running = false
		close(l.done)
		l.has.Store(len(l.later) > 0)
		l.mu.Unlock()
	}()
	for i, fn := range todo {
		err := p.run(fn, s)
		switch {
		case files.SessionFailed(err):
			l.mu.Lock()
			rest := slices.Concat(todo[i:], l.later)
			l.later = nil
			p.keep(rest...)
			l.mu.Unlock()
			return
		case errors.Is(err, ErrNotDone):
			p.Background(fn)
		case err != nil:
			p.log().Warn("cleaning up after a broken session failed", "namespace", p.namespace, "name", p.name, "error", err)
		}
	}
}

// takeOver takes the work of old, a pool of the same connection that a
// new one replaces; l's pool is not shared yet.
func (l *leftovers) takeOver(old *leftovers) {
	old.mu.Lock()
	later, background := old.later, old.background
	old.later, old.background = nil, nil
	old.has.Store(old.running)
	old.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.later = append(l.later, later...)
	l.background = append(l.background, background...)
	l.has.Store(len(l.later) > 0)
}

// pending says whether work is left.
func (l *leftovers) pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.later) > 0 || len(l.background) > 0
}

// close stops the background work of a pool being closed.
func (l *leftovers) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}
