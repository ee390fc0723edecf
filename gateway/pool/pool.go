// Package pool keeps SSH connections with SFTP sessions open to each
// SftpConnection's server, so that requests do not pay a handshake: up to
// the connection's limit, shared by concurrent requests (SFTP multiplexes
// them), replaced when broken, closed when idle.
package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/sftpdial"
)

// BrokenError marks an error as the session's failure rather than the
// operation's: the session is discarded (and an idempotent operation
// retried once on a fresh one).
type BrokenError struct{ Err error }

func (e *BrokenError) Error() string { return e.Err.Error() }
func (e *BrokenError) Unwrap() error { return e.Err }

var (
	// ErrTimeout is an operation that outlived its timeout: the session it
	// ran on, if it had one, was closed to end it.
	ErrTimeout = errors.New("the SFTP server did not answer in time")
	// ErrClosed is a pool replaced because its connection changed.
	ErrClosed = errors.New("the connection changed while the request waited; retry")
	// ErrCredentials is a failure to read a connection's Secret from the
	// API server, when its pool is built.
	ErrCredentials = errors.New("the gateway cannot read the connection's credentials Secret; retry")
	// ErrQueueFull is a request that found every session as busy as it
	// may be, and as many requests waiting as the pool lets wait.
	ErrQueueFull = errors.New("every session to the server is busy and its queue is full")
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
}

// load is how much of a session op takes.
func (op Op) load() int {
	if op.Stream {
		return sessionShare
	}
	return 1
}

// DefaultMaxWaiting is the default bound on the requests waiting for a
// session of one pool.
const DefaultMaxWaiting = 256

// Pools holds one Pool per SftpConnection.
type Pools struct {
	Dialer *sftpdial.Dialer
	// Secrets reads a connection's credentials when its pool is built: the
	// gateway keeps no watch on Secrets.
	Secrets client.Reader
	// IdleTimeout closes sessions unused for this long, and forgets a
	// connection's credentials once it has had no session for as long.
	IdleTimeout time.Duration
	// MaxWaiting is how many requests may wait for a session of one
	// connection's pool; more get ErrQueueFull. 0 is DefaultMaxWaiting.
	MaxWaiting int
	// Dials counts new SSH connections by result; nil counts none.
	Dials *prometheus.CounterVec

	mu      sync.Mutex
	entries map[types.UID]*entry
}

// entry serializes the (re)building of one connection's pool, so that a
// slow Secret read or key decryption holds up only that connection.
type entry struct {
	mu   sync.Mutex
	pool *Pool
	// The last build that failed: the requests that waited for it get its
	// error rather than each asking the API server again in turn.
	failed        error
	failedAt      time.Time
	failedVersion version
}

// version is what a pool is built from: when the spec, the tested Secret,
// the trusted host key or the resolved root changes, the pool is rebuilt.
// It is compared on every request, so it is a struct (no allocation).
type version struct {
	generation                         int64
	credentialsHash, hostKey, rootPath string
}

func versionOf(conn *v1alpha1.SftpConnection) version {
	return version{conn.Generation, conn.Status.CredentialsHash, conn.Status.HostKey, conn.Status.RootPath}
}

// Get returns the pool of conn, building it (and reading its Secret) the
// first time and whenever the connection changed.
func (p *Pools) Get(ctx context.Context, conn *v1alpha1.SftpConnection) (*Pool, error) {
	p.mu.Lock()
	if p.entries == nil {
		p.entries = map[types.UID]*entry{}
	}
	e := p.entries[conn.UID]
	if e == nil {
		e = &entry{}
		p.entries[conn.UID] = e
	}
	p.mu.Unlock()

	waitFrom := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	v := versionOf(conn)
	switch {
	case e.pool != nil && e.pool.version == v:
		return e.pool, nil
	case e.failed != nil && e.failedVersion == v && !e.failedAt.Before(waitFrom):
		return nil, e.failed
	}
	pool, err := p.build(ctx, conn, v)
	if err != nil {
		e.failed, e.failedAt, e.failedVersion = err, time.Now(), v
		return nil, err
	}
	if e.pool != nil {
		e.pool.Close()
		// The same server's, most likely. The new pool is not shared yet.
		pool.keep(e.pool.takeLater()...)
		e.pool.mu.Lock()
		pool.background, e.pool.background = e.pool.background, nil
		e.pool.mu.Unlock()
		pool.mu.Lock()
		pool.startFinishing()
		pool.mu.Unlock()
	}
	e.pool = pool
	return pool, nil
}

// build makes the pool of conn at version v, reading its Secret.
func (p *Pools) build(ctx context.Context, conn *v1alpha1.SftpConnection, v version) (*Pool, error) {
	// Reading the Secret is bounded like a dial: the request may wait
	// that long for a new pool.
	ctx, cancel := context.WithTimeout(ctx, conn.Spec.Limits.ConnectTimeoutOrDefault())
	defer cancel()
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: conn.Namespace, Name: conn.Spec.Credentials.SecretRef.Name}
	if err := p.Secrets.Get(ctx, key, &secret); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	target, err := sftpdial.NewTarget(conn, &secret)
	if err != nil {
		return nil, err
	}
	return &Pool{
		namespace:  conn.Namespace,
		name:       conn.Name,
		dialer:     p.Dialer,
		dials:      p.Dials,
		target:     target,
		max:        int(max(conn.Spec.Limits.MaxConnections, 1)),
		maxWaiting: cmp.Or(p.MaxWaiting, DefaultMaxWaiting),
		version:    v,
		lastUsed:   time.Now(),
		wake:       make(chan struct{}),
	}, nil
}

// Run closes idle sessions, keeps the others alive and forgets unused
// pools until ctx ends, then closes every pool.
func (p *Pools) Run(ctx context.Context) {
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = 5 * time.Minute
	}
	tick := time.NewTicker(min(idle/2, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, pool := range p.forget(func(*Pool) bool { return true }) {
				pool.Close()
			}
			return
		case <-tick.C:
		}
		p.upkeep(idle)
	}
}

// upkeep is one round of Run's.
func (p *Pools) upkeep(idle time.Duration) {
	defer recovery.Log("the session pools' upkeep")
	// A pool without sessions for a while belongs to a connection no
	// longer used (or deleted): drop it with its credentials.
	for _, pool := range p.forget(func(pool *Pool) bool { return pool.unusedFor(idle) }) {
		pool.Close()
	}
	for _, pool := range p.current() {
		pool.tend(idle)
	}
}

// current lists the pools, leaving out any being built right now (which
// the next caller sees): nothing waits for a Secret read or a decryption.
func (p *Pools) current() []*Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pools := make([]*Pool, 0, len(p.entries))
	for _, e := range p.entries {
		if e.mu.TryLock() {
			if e.pool != nil {
				pools = append(pools, e.pool)
			}
			e.mu.Unlock()
		}
	}
	return pools
}

// forget removes the pools that match and returns them.
func (p *Pools) forget(match func(*Pool) bool) []*Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Pool
	for uid, e := range p.entries {
		if !e.mu.TryLock() {
			continue // being rebuilt: in use
		}
		if e.pool != nil && match(e.pool) {
			out = append(out, e.pool)
			delete(p.entries, uid)
		}
		e.mu.Unlock()
	}
	return out
}

// The pools' sizes and queues, which Pools collects.
var (
	poolSessions = prometheus.NewDesc("sftpgate_gateway_pool_sessions",
		"Open SSH sessions to each connection's server.", []string{"namespace", "name"}, nil)
	poolWaiting = prometheus.NewDesc("sftpgate_gateway_pool_waiting",
		"Requests waiting for a session of each connection, all of whose sessions are busy.", []string{"namespace", "name"}, nil)
)

// Describe and Collect make Pools a Prometheus collector of pool sizes
// and queues.
func (p *Pools) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolSessions
	ch <- poolWaiting
}

// Collect reports each pool's size and queue.
func (p *Pools) Collect(ch chan<- prometheus.Metric) {
	for _, pool := range p.current() {
		pool.mu.Lock()
		sessions, waiting := len(pool.sessions), pool.waiting
		pool.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(poolSessions, prometheus.GaugeValue, float64(sessions), pool.namespace, pool.name)
		ch <- prometheus.MustNewConstMetric(poolWaiting, prometheus.GaugeValue, float64(waiting), pool.namespace, pool.name)
	}
}

// Pool is the sessions of one connection.
type Pool struct {
	namespace, name string
	dialer          *sftpdial.Dialer
	dials           *prometheus.CounterVec
	target          *sftpdial.Target
	max             int
	maxWaiting      int
	version         version

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
	// later is work for the next operation's session (Later). hasLater
	// says, without taking mu, whether there is any or it runs: until it
	// has run, other operations wait (laterDone is closed when it has), so
	// that none acts on what it is undoing.
	later        []func(*sftpdial.Session) error
	hasLater     atomic.Bool
	laterRunning bool
	laterDone    chan struct{}
	// background is such work that has more to do than a request should
	// wait for (ErrNotDone): finish runs it, a part at a time, on its own.
	background []func(*sftpdial.Session) error
	finishing  bool
}

// maxLater bounds the work a pool keeps for its next session; beyond it,
// the oldest is dropped (and logged).
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
// half done. When fn returns a *BrokenError, it stays for the one after;
// when it returns ErrNotDone, it goes on in the background.
func (p *Pool) Later(fn func(*sftpdial.Session) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep(fn)
}

// keep adds work to what waits for the next session; p.mu is held.
func (p *Pool) keep(work ...func(*sftpdial.Session) error) {
	p.later = append(p.later, work...)
	if drop := len(p.later) - maxLater; drop > 0 {
		slog.Warn("too much cleanup work waits for a session; dropping the oldest",
			"namespace", p.namespace, "name", p.name, "dropped", drop)
		p.later = slices.Delete(p.later, 0, drop)
	}
	p.hasLater.Store(len(p.later) > 0)
}

// Background keeps fn to be done apart from requests, on a session of the
// pool, again while it returns ErrNotDone: cleanup work that may take long.
func (p *Pool) Background(fn func(*sftpdial.Session) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.background = append(p.background, fn)
	if drop := len(p.background) - maxLater; drop > 0 {
		slog.Warn("too much cleanup work waits in the background; dropping the oldest",
			"namespace", p.namespace, "name", p.name, "dropped", drop)
		p.background = slices.Delete(p.background, 0, drop)
	}
	p.startFinishing()
}

// startFinishing starts finish unless it runs or there is nothing to do;
// p.mu is held.
func (p *Pool) startFinishing() {
	if !p.finishing && len(p.background) > 0 && !p.closed {
		p.finishing = true
		go p.finish()
	}
}

// finish runs the background work, a part at a time, each with a session
// of the pool like any operation, until none is left or a part fails (the
// pool's upkeep then starts it again).
func (p *Pool) finish() {
	defer recovery.Log("cleanup work in the background")
	defer func() {
		p.mu.Lock()
		p.finishing = false
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if len(p.background) == 0 || p.closed {
			p.mu.Unlock()
			return
		}
		fn := p.background[0]
		p.background = p.background[1:]
		p.mu.Unlock()
		err := p.Do(context.Background(), Op{Timeout: backgroundTimeout}, fn)
		if err != nil {
			p.mu.Lock()
			if errors.Is(err, ErrNotDone) {
				p.background = append(p.background, fn)
			} else {
				p.background = append([]func(*sftpdial.Session) error{fn}, p.background...)
			}
			p.mu.Unlock()
			if !errors.Is(err, ErrNotDone) {
				return
			}
		}
	}
}

// takeLater takes the work kept for the next session.
func (p *Pool) takeLater() []func(*sftpdial.Session) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	work := p.later
	p.later = nil
	p.hasLater.Store(p.laterRunning)
	return work
}

// runLater runs the work kept for s's server on s, in order, until s
// breaks; or, while another operation runs it, waits until it is done.
func (p *Pool) runLater(s *sftpdial.Session) {
	p.mu.Lock()
	for p.laterRunning {
		done := p.laterDone
		p.mu.Unlock()
		<-done
		p.mu.Lock()
	}
	work := p.later
	p.later = nil
	if len(work) == 0 {
		p.hasLater.Store(false)
		p.mu.Unlock()
		return
	}
	p.laterRunning, p.laterDone = true, make(chan struct{})
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.laterRunning = false
		close(p.laterDone)
		p.hasLater.Store(len(p.later) > 0)
		p.mu.Unlock()
	}()
	for i, fn := range work {
		var broken *BrokenError
		err := run(fn, s)
		switch {
		case errors.As(err, &broken):
			p.mu.Lock()
			rest := slices.Concat(work[i:], p.later)
			p.later = nil
			p.keep(rest...)
			p.mu.Unlock()
			return
		case errors.Is(err, ErrNotDone):
			p.Background(fn)
		case err != nil:
			slog.Warn("cleaning up after a broken session failed", "namespace", p.namespace, "name", p.name, "error", err)
		}
	}
}

type session struct {
	*sftpdial.Session
	dialed time.Time
	// load is the operations on the session, a stream counting as
	// sessionShare, and a keepalive under way as one.
	load     int
	lastUsed time.Time
	broken   bool
	// expire discards the session, for an operation on it that timed out.
	expire func()
}

// Do runs fn on a session. A *BrokenError from fn discards the session; an
// idempotent fn is then run once more on a fresh one. When op.Timeout
// passes, a wait for a session ends, or the session fn runs on is closed
// to stop it (the other requests on a session that hangs would hang too),
// and Do returns ErrTimeout. When ctx (the request's) ends first, a wait
// for a session ends with ctx's error; a dial it started goes on for the
// others, and fn, once started, is not stopped.
func (p *Pool) Do(ctx context.Context, op Op, fn func(*sftpdial.Session) error) error {
	w := op.load()
	var deadline time.Time
	if op.Timeout > 0 {
		deadline = time.Now().Add(op.Timeout)
	}
	for attempt := 0; ; attempt++ {
		// A retry goes to a new connection: when one broke, the others to
		// the same server (restarted, say) may have broken too.
		s, err := p.acquire(ctx, deadline, w, attempt > 0)
		if err != nil {
			return err
		}
		// A timer rather than a context with a deadline, as this runs for
		// every request: the context and its AfterFunc took ten
		// allocations, the timer takes one.
		var expired *time.Timer
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				// Spent before fn starts (a dial took it all): the
				// session is healthy, and others may be using it.
				p.release(s, w, time.Time{})
				return ErrTimeout
			}
			expired = time.AfterFunc(left, s.expire)
		}
		if p.hasLater.Load() {
			p.runLater(s.Session)
		}
		started := time.Now()
		err = run(fn, s.Session)
		timedOut := expired != nil && !expired.Stop()
		if timedOut {
			// Its timer fired and is closing it: it leaves the pool now,
			// before another request can take it. The others stay: one
			// slow operation says nothing of them.
			p.mu.Lock()
			p.remove(s)
			p.mu.Unlock()
		}
		var broken *BrokenError
		isBroken := errors.As(err, &broken)
		if isBroken {
			p.release(s, w, started)
		} else {
			p.release(s, w, time.Time{})
		}
		switch {
		case timedOut:
			return ErrTimeout
		case isBroken && op.Idempotent && attempt == 0:
			continue
		}
		return err
	}
}

// run runs fn on s; a panic in it fails only this operation, and its
// session is released as after any other error.
func run(fn func(*sftpdial.Session) error, s *sftpdial.Session) (err error) {
	defer recovery.Error(&err, "an operation on an SFTP session")
	return fn(s)
}

// acquire picks the least loaded session for an operation of load w. It
// shares a session that has room for w; else it waits for a dial under way
// that has room, or dials a new session if the limit allows (a fresh one
// always does), or shares the least loaded session up to sessionMax.
// Otherwise it waits in the pool's queue for a session or a dial to end,
// until deadline (zero: none) or the end of ctx; with the queue full, it
// returns ErrQueueFull at once.
func (p *Pool) acquire(ctx context.Context, deadline time.Time, w int, fresh bool) (*session, error) {
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
		var best *session
		for _, s := range p.sessions {
			if best == nil || s.load < best.load {
				best = s
			}
		}
		room := len(p.sessions)+p.dialing < p.max
		switch {
		case best != nil && !fresh && best.load+w <= sessionShare, best != nil && !room && best.load+w <= sessionMax:
			best.load += w
			p.mu.Unlock()
			return best, nil
		case !fresh && p.expecting+w <= p.dialing*sessionShare, !room:
			// A burst on a cold pool waits for the first dial rather than
			// opening a connection per request; with every session full,
			// requests wait for one to have room.
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
	dialed, err := p.dialer.Dial(ctx, p.target)
	var dialErr *sftpdial.Error
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
	broken := !brokenSince.IsZero()
	p.mu.Lock()
	s.load -= w
	s.lastUsed = time.Now()
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
	s, err := p.acquire(ctx, time.Time{}, 1, false)
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
	pending := len(p.later) > 0 || len(p.background) > 0
	return len(p.sessions) == 0 && p.dialing == 0 && (unused > d && !pending || unused > pendingGrace*d)
}

// tend closes sessions idle longer than idle, checks the others with an
// SSH keepalive, dropping those that do not answer in time, and takes up
// cleanup work in the background again where it stopped.
func (p *Pool) tend(idle time.Duration) {
	p.mu.Lock()
	p.startFinishing()
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
			defer recovery.Log("a keepalive")
			sent := time.Now()
			if keepalive(s) {
				p.release(s, 1, time.Time{})
			} else {
				p.release(s, 1, sent)
			}
		}()
	}
}

// keepalive asks the server to answer within keepaliveTimeout.
func keepalive(s *session) bool {
	answered := make(chan error, 1)
	go func() {
		_, _, err := s.SSH.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		return err == nil
	case <-time.After(keepaliveTimeout):
		return false
	}
}
