// Package pool keeps SSH connections with SFTP sessions open to each
// SftpConnection's server, so that requests do not pay a handshake: up to
// the connection's limit, shared by concurrent requests (SFTP multiplexes
// them), replaced when broken, closed when idle.
package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/gateway/sftpdial"
)

// BrokenError marks an error as the session's failure rather than the
// operation's: the session is discarded (and an idempotent operation
// retried once on a fresh one).
type BrokenError struct{ Err error }

func (e *BrokenError) Error() string { return e.Err.Error() }
func (e *BrokenError) Unwrap() error { return e.Err }

// ErrTimeout is an operation that outlived its timeout; its session was
// closed to end it.
var ErrTimeout = errors.New("the SFTP server did not answer in time")

// Pools holds one Pool per SftpConnection.
type Pools struct {
	Dialer *sftpdial.Dialer
	// Secrets reads a connection's credentials when its pool is built: the
	// gateway keeps no watch on Secrets.
	Secrets client.Reader
	// IdleTimeout closes sessions unused for this long.
	IdleTimeout time.Duration

	mu    sync.Mutex
	pools map[types.UID]*Pool
}

// version is what a pool is built from: when the spec, the tested Secret,
// the trusted host key or the resolved root changes, the pool is rebuilt.
func version(conn *v1alpha1.SftpConnection) string {
	return fmt.Sprintf("%d/%s/%s/%s", conn.Generation, conn.Status.CredentialsHash, conn.Status.HostKey, conn.Status.RootPath)
}

// Get returns the pool of conn, building it (and reading its Secret) the
// first time and whenever the connection changed.
func (p *Pools) Get(ctx context.Context, conn *v1alpha1.SftpConnection) (*Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := version(conn)
	existing := p.pools[conn.UID]
	if existing != nil && existing.version == v {
		return existing, nil
	}
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: conn.Namespace, Name: conn.Spec.Credentials.SecretRef.Name}
	if err := p.Secrets.Get(ctx, key, &secret); err != nil {
		return nil, fmt.Errorf("reading the credentials Secret: %w", err)
	}
	target, err := sftpdial.NewTarget(conn, &secret)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		existing.Close()
	}
	pool := &Pool{
		dialer:  p.Dialer,
		target:  target,
		max:     int(max(conn.Spec.Limits.MaxConnections, 1)),
		version: v,
	}
	if p.pools == nil {
		p.pools = map[types.UID]*Pool{}
	}
	p.pools[conn.UID] = pool
	return pool, nil
}

// Run closes idle sessions and keeps the others alive until ctx ends, then
// closes every pool.
func (p *Pools) Run(ctx context.Context) {
	tick := time.NewTicker(min(p.IdleTimeout/2, 30*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			for _, pool := range p.pools {
				pool.Close()
			}
			p.mu.Unlock()
			return
		case <-tick.C:
			p.mu.Lock()
			pools := make([]*Pool, 0, len(p.pools))
			for _, pool := range p.pools {
				pools = append(pools, pool)
			}
			p.mu.Unlock()
			for _, pool := range pools {
				pool.tend(p.IdleTimeout)
			}
		}
	}
}

// Pool is the sessions of one connection.
type Pool struct {
	dialer  *sftpdial.Dialer
	target  *sftpdial.Target
	max     int
	version string

	mu       sync.Mutex
	sessions []*session
	dialing  int
	closed   bool
}

type session struct {
	*sftpdial.Session
	inflight int
	lastUsed time.Time
	broken   bool
}

// Do runs fn on a session. A *BrokenError from fn discards the session; an
// idempotent fn is then run once more on a fresh one. When ctx ends first,
// the session is closed to stop fn, and Do returns ErrTimeout.
func (p *Pool) Do(ctx context.Context, idempotent bool, fn func(*sftpdial.Session) error) error {
	for attempt := 0; ; attempt++ {
		s, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { p.discard(s) })
		err = fn(s.Session)
		timedOut := !stop()
		var broken *BrokenError
		isBroken := errors.As(err, &broken)
		p.release(s, isBroken || timedOut)
		switch {
		case timedOut:
			return ErrTimeout
		case isBroken && idempotent && attempt == 0:
			continue
		}
		return err
	}
}

// acquire picks the least busy session, dialling a new one while all are
// busy and the limit allows.
func (p *Pool) acquire(ctx context.Context) (*session, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the connection changed; retry")
	}
	var best *session
	for _, s := range p.sessions {
		if best == nil || s.inflight < best.inflight {
			best = s
		}
	}
	if best != nil && (best.inflight == 0 || len(p.sessions)+p.dialing >= p.max) {
		best.inflight++
		p.mu.Unlock()
		return best, nil
	}
	p.dialing++
	p.mu.Unlock()

	dialed, err := p.dialer.Dial(ctx, p.target)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing--
	if err != nil {
		return nil, err
	}
	s := &session{Session: dialed, inflight: 1}
	if p.closed {
		_ = dialed.Close()
		return nil, errors.New("the connection changed; retry")
	}
	p.sessions = append(p.sessions, s)
	return s, nil
}

func (p *Pool) release(s *session, broken bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.inflight--
	s.lastUsed = time.Now()
	if broken {
		p.remove(s)
	}
	if (s.broken || p.closed) && s.inflight == 0 {
		_ = s.Close()
	}
}

// discard takes s out of the pool at once (closing it ends what runs on it).
func (p *Pool) discard(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remove(s)
	_ = s.Close()
}

func (p *Pool) remove(s *session) {
	s.broken = true
	p.sessions = slices.DeleteFunc(p.sessions, func(x *session) bool { return x == s })
}

// Close closes idle sessions now and busy ones when their requests finish.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.sessions {
		s.broken = true
		if s.inflight == 0 {
			_ = s.Close()
		}
	}
	p.sessions = nil
}

// Size is the number of open sessions.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// tend closes sessions idle longer than idle and checks the others with an
// SSH keepalive, dropping those that do not answer.
func (p *Pool) tend(idle time.Duration) {
	p.mu.Lock()
	var check []*session
	for _, s := range slices.Clone(p.sessions) {
		switch {
		case s.inflight > 0:
		case time.Since(s.lastUsed) > idle:
			p.remove(s)
			_ = s.Close()
		default:
			check = append(check, s)
		}
	}
	p.mu.Unlock()
	for _, s := range check {
		if _, _, err := s.SSH.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			p.discard(s)
		}
	}
}
