package pool

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/recovery"
)

// Endpoint is an object whose server pools keep sessions to: an
// SftpConnection or an FtpConnection.
type Endpoint interface {
	client.Object
	GetTestStatus() *v1alpha1.TestStatus
	CredentialsSecret() string
	// SessionLimits are the most sessions, and the timeouts of a dial
	// and of an operation.
	SessionLimits() (sessions int32, connect, operation time.Duration)
	// ServedAt is what its sessions depend on beyond its generation and
	// Secret: the root its test resolved, the server identity it took.
	ServedAt() (root, identity string)
}

// Dialer prepares the dials of one kind's endpoints (package sftpdial's
// for SftpConnections, ftpdial's for FtpConnections).
type Dialer interface {
	// Target prepares dials of obj, an Endpoint of the dialer's kind,
	// with the credentials in secret.
	Target(obj client.Object, secret *corev1.Secret) (files.Target, error)
}

// Pools holds one Pool per endpoint (of any kind: the caller names its
// kind's Dialer).
type Pools struct {
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
	// Component names the pools' metrics: "gateway" when empty.
	Component string
	// Log is where the pools log; nil logs nothing.
	Log *slog.Logger

	descOnce sync.Once
	desc     poolDescs

	mu      sync.Mutex
	entries map[types.UID]*entry
	// ops are each connection's operations, shared by its pools: a pool
	// made anew (the connection changed) counts on.
	ops map[types.NamespacedName]*opStats
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
	generation                          int64
	credentialsHash, identity, rootPath string
}

func versionOf(e Endpoint) version {
	root, identity := e.ServedAt()
	return version{e.GetGeneration(), e.GetTestStatus().CredentialsHash, identity, root}
}

// Get returns the pool of conn, dialled by d, building it (and reading
// its Secret) the first time and whenever the endpoint changed.
func (p *Pools) Get(ctx context.Context, d Dialer, conn Endpoint) (*Pool, error) {
	p.mu.Lock()
	if p.entries == nil {
		p.entries = map[types.UID]*entry{}
	}
	e := p.entries[conn.GetUID()]
	if e == nil {
		e = &entry{}
		p.entries[conn.GetUID()] = e
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
	pool, err := p.build(ctx, d, conn, v)
	if err != nil {
		e.failed, e.failedAt, e.failedVersion = err, time.Now(), v
		return nil, err
	}
	if e.pool != nil {
		e.pool.Close()
		// The same server's, most likely. The new pool is not shared yet.
		pool.left.takeOver(&e.pool.left)
		pool.startFinishing()
	}
	e.pool = pool
	return pool, nil
}

// build makes the pool of conn at version v, reading its Secret.
func (p *Pools) build(ctx context.Context, d Dialer, conn Endpoint, v version) (*Pool, error) {
	// Reading the Secret is bounded like a dial: the request may wait
	// that long for a new pool.
	sessions, connect, _ := conn.SessionLimits()
	ctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: conn.GetNamespace(), Name: conn.CredentialsSecret()}
	if err := p.Secrets.Get(ctx, key, &secret); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	target, err := d.Target(conn, &secret)
	if err != nil {
		return nil, err
	}
	pool := &Pool{
		namespace:  conn.GetNamespace(),
		name:       conn.GetName(),
		dials:      p.Dials,
		logger:     p.Log,
		target:     target,
		max:        int(max(sessions, 1)),
		share:      sessionShare,
		most:       sessionMax,
		maxWaiting: cmp.Or(p.MaxWaiting, DefaultMaxWaiting),
		version:    v,
		lastUsed:   time.Now(),
		wake:       make(chan struct{}),
	}
	if _, ok := target.(files.Exclusive); ok {
		pool.share, pool.most = 1, 1
	}
	name := types.NamespacedName{Namespace: pool.namespace, Name: pool.name}
	p.mu.Lock()
	if p.ops == nil {
		p.ops = map[types.NamespacedName]*opStats{}
	}
	if p.ops[name] == nil {
		p.ops[name] = &opStats{}
	}
	pool.ops = p.ops[name]
	p.mu.Unlock()
	return pool, nil
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
	defer recovery.Log(p.Log, "the session pools' upkeep")
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

// descs are the pools' metrics, which Pools collects, named after the
// component (sftpgate_<component>_pool_sessions).
func (p *Pools) descs() poolDescs {
	p.descOnce.Do(func() {
		component := cmp.Or(p.Component, "gateway")
		connection := []string{"namespace", "name"}
		p.desc = poolDescs{
			sessions: prometheus.NewDesc("sftpgate_"+component+"_pool_sessions",
				"Open sessions to each connection's server.", connection, nil),
			waiting: prometheus.NewDesc("sftpgate_"+component+"_pool_waiting",
				"Operations waiting for a session of each connection, all of whose sessions are busy.", connection, nil),
			ops: prometheus.NewDesc("sftpgate_"+component+"_pool_operations_total",
				"Operations on each connection's server, by result: answered (whatever the server said), or failed without an answer (no session, one that broke, a timeout).",
				append(connection, "result"), nil),
			latency: prometheus.NewDesc("sftpgate_"+component+"_pool_operation_duration_seconds",
				"How long operations on each connection's server took, from the wait for a session to the answer.", connection, nil),
		}
	})
	return p.desc
}

// poolDescs are the descriptions of the pools' metrics.
type poolDescs struct{ sessions, waiting, ops, latency *prometheus.Desc }

// Describe and Collect make Pools a Prometheus collector of pool sizes,
// queues, operations and their latency, by connection.
func (p *Pools) Describe(ch chan<- *prometheus.Desc) {
	d := p.descs()
	ch <- d.sessions
	ch <- d.waiting
	ch <- d.ops
	ch <- d.latency
}

// Collect reports each connection's sessions and queue. A connection
// deleted and made again under its name may have two pools for a while
// (one per UID): they are reported as one.
func (p *Pools) Collect(ch chan<- prometheus.Metric) {
	type counts struct {
		sessions, waiting int
		ops               *opStats
	}
	byName := map[types.NamespacedName]*counts{}
	for _, pool := range p.current() {
		key := types.NamespacedName{Namespace: pool.namespace, Name: pool.name}
		c := byName[key]
		if c == nil {
			c = &counts{ops: pool.ops}
			byName[key] = c
		}
		pool.mu.Lock()
		c.sessions += len(pool.sessions)
		c.waiting += pool.waiting
		pool.mu.Unlock()
	}
	p.forgetOps()
	d := p.descs()
	for key, c := range byName {
		ch <- prometheus.MustNewConstMetric(d.sessions, prometheus.GaugeValue, float64(c.sessions), key.Namespace, key.Name)
		ch <- prometheus.MustNewConstMetric(d.waiting, prometheus.GaugeValue, float64(c.waiting), key.Namespace, key.Name)
		if c.ops != nil {
			for _, m := range c.ops.metrics(d.ops, d.latency, key.Namespace, key.Name) {
				ch <- m
			}
		}
	}
}

// forgetOps drops the operations of connections no pool serves any more:
// their series go with them.
func (p *Pools) forgetOps() {
	p.mu.Lock()
	defer p.mu.Unlock()
	served := map[types.NamespacedName]bool{}
	for _, e := range p.entries {
		if !e.mu.TryLock() {
			return // being built: its connection is served, whatever its name
		}
		if e.pool != nil {
			served[types.NamespacedName{Namespace: e.pool.namespace, Name: e.pool.name}] = true
		}
		e.mu.Unlock()
	}
	for key := range p.ops {
		if !served[key] {
			delete(p.ops, key)
		}
	}
}
