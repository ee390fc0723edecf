// Package uploadexpiry removes the resumable uploads (tus) that expired:
// their partial files on the SFTP servers, then their records (package
// uploadrecord). One replica at a time does it: the one that holds the
// shard's single item. No tenant's server can hold it up for the others:
// connections are swept at once, a few per namespace, in a new order each
// sweep; each removal is bounded by a time the worker sets (not the
// connection's own timeouts), and a connection's sweep by a few of them;
// a connection still being swept is skipped by the next sweep, not waited
// for, and one whose removal failed rests for a few sweeps. An upload
// whose partial file a bounded number of sweeps could not remove (its
// server never answers, or refuses) is abandoned: its record goes, with
// an audit record and a log line, and its partial file may stay.
package uploadexpiry

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/tempname"
	"github.com/sftpgate/sftpgate/internal/uploadrecord"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// item is the shard's one item: whoever holds it sweeps.
const item = "expiry"

// DefaultInterval is how often the holder looks for expired uploads, and
// DefaultGrace how long past its expiry an upload is left (longer than a
// part may take: the gateway's request timeout and a minute).
const (
	DefaultInterval = time.Minute
	DefaultGrace    = 10 * time.Minute
)

// Limits bound the removal of expired uploads on a replica.
type Limits struct {
	// Connections is how many connections' uploads are removed at once,
	// ConnectionsPerNamespace how many of one namespace's.
	Connections, ConnectionsPerNamespace int
	// Timeout bounds the removal of one upload, the dial included; a
	// connection's sweep takes at most connectionTimeouts of them.
	Timeout time.Duration
	// FailedSweeps is how many sweeps may fail to remove an upload's
	// partial file before the upload is abandoned: its record removed,
	// its partial file perhaps left on the server.
	FailedSweeps int
}

// connectionTimeouts bounds one connection's sweep, in Timeouts: a server
// that answers each removal just in time holds its slot no longer.
// restSweeps is how many sweeps a connection whose removal failed sits
// out, leaving its slot to others.
const (
	connectionTimeouts = 4
	restSweeps         = 5
)

// DefaultLimits are the limits when nothing says otherwise.
func DefaultLimits() Limits {
	return Limits{Connections: 8, ConnectionsPerNamespace: 2, Timeout: 30 * time.Second, FailedSweeps: DefaultFailedSweeps}
}

// DefaultFailedSweeps is Limits.FailedSweeps by default. A connection
// whose removal failed sits out restSweeps sweeps, so at the default
// Interval sixty failed sweeps take about six hours: long enough for a
// server's maintenance or a night's outage, not so long that records of a
// server gone for good pile up.
const DefaultFailedSweeps = 60

// WithDefaults is l with each zero limit its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.Connections < 1 {
		l.Connections = d.Connections
	}
	if l.ConnectionsPerNamespace < 1 {
		l.ConnectionsPerNamespace = d.ConnectionsPerNamespace
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.FailedSweeps < 1 {
		l.FailedSweeps = d.FailedSweeps
	}
	return l
}

// Sweeper removes expired uploads; run it with the worker's manager.
type Sweeper struct {
	Records *uploadrecord.Store
	// Connections reads the connections uploads write to (the worker's
	// cache); Ends runs operations on their files.
	Connections client.Reader
	Ends        *ends.Ends
	Shard       *shard.Shard
	// Removed counts expired uploads removed, by what was removed:
	// partial (its partial file and record), record (its record alone:
	// its partial file or its connection was gone), abandoned (its record
	// alone, after Limits.FailedSweeps sweeps failed to remove its
	// partial file).
	Removed *prometheus.CounterVec
	// RemovedBytes counts the bytes of the partial files removed.
	RemovedBytes prometheus.Counter
	// SyncInterval is how often the replica renews its share; Interval
	// how often the holder sweeps.
	SyncInterval, Interval time.Duration
	// Grace is how long past its expiry an upload is left: the gateway
	// refuses it from its expiry, and a part sent just before may take a
	// request's time (nil Shard: none, for tests).
	Grace time.Duration
	// Now is the time; nil is time.Now.
	Now func() time.Time
	// Limits bound the sweeps (zero: WithDefaults).
	Limits Limits
	// Log is where the sweeper logs; nil logs nothing.
	Log *slog.Logger
	// Audit records the uploads abandoned; nil records nothing.
	Audit *audit.Trail

	mu sync.Mutex
	// busy are the connections being swept; perNamespace counts them by
	// namespace; resting are those whose removal failed, until when.
	busy         map[string]bool
	perNamespace map[string]int
	resting      map[string]time.Time
	running      sync.WaitGroup
}

func (s *Sweeper) log() *slog.Logger { return logging.OrDiscard(s.Log) }

func (s *Sweeper) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Start sweeps every Interval while this replica holds the shard's one
// item, until ctx ends; then it gives the item back.
func (s *Sweeper) Start(ctx context.Context) error {
	k := &tasks.Kind[*sweeps]{Name: "upload sweep", Shard: s.Shard, Interval: s.SyncInterval, Log: s.Log,
		List:  func(context.Context) ([]tasks.Item, error) { return []tasks.Item{{UID: item}}, nil },
		Start: func(tasks.Item, func()) *sweeps { return &sweeps{s} }}
	return k.Run(ctx)
}

// sweeps is the work of the replica that holds the item: a sweep every
// Interval.
type sweeps struct{ s *Sweeper }

func (t *sweeps) Step(ctx context.Context) (time.Duration, bool) {
	t.s.Sweep(ctx)
	return cmp.Or(t.s.Interval, DefaultInterval), false
}

// Stop waits for the sweeps under way, which end with the item's hold.
func (t *sweeps) Stop(context.Context) { t.s.Wait() }

// Sweep starts removing every upload that expired, a goroutine per
// connection within the limits, and returns; a connection still being
// swept from before, or past the limits, waits for the next sweep.
func (s *Sweeper) Sweep(ctx context.Context) {
	defer recovery.Log(s.Log, "removing expired uploads")
	now := s.now()
	records, err := s.Records.Expired(ctx, now.Add(-s.Grace))
	if err != nil {
		s.log().Error("listing uploads", "error", err)
	}
	byConnection := map[string][]*uploadrecord.Record{}
	var order []string
	for _, r := range records {
		if now.Before(r.Expires.Add(s.Grace)) || r.Held(now) {
			continue
		}
		conn := r.Namespace + "/" + r.Connection
		if byConnection[conn] == nil {
			order = append(order, conn)
		}
		byConnection[conn] = append(byConnection[conn], r)
	}
	// A new order each sweep: the connections whose uploads cannot be
	// removed do not come first every time.
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] }) //nolint:gosec // an order, not a secret
	limits := s.Limits.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy, s.perNamespace, s.resting = map[string]bool{}, map[string]int{}, map[string]time.Time{}
	}
	for conn, until := range s.resting {
		if !now.Before(until) {
			delete(s.resting, conn)
		}
	}
	for _, conn := range order {
		ns := byConnection[conn][0].Namespace
		if s.busy[conn] || !s.resting[conn].IsZero() || len(s.busy) >= limits.Connections || s.perNamespace[ns] >= limits.ConnectionsPerNamespace {
			continue
		}
		s.busy[conn] = true
		s.perNamespace[ns]++
		s.running.Go(func() {
			failed := s.sweepConnection(ctx, byConnection[conn], limits)
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.busy, conn)
			if s.perNamespace[ns]--; s.perNamespace[ns] == 0 {
				delete(s.perNamespace, ns)
			}
			if failed {
				s.resting[conn] = s.now().Add(restSweeps * cmp.Or(s.Interval, DefaultInterval))
			}
		})
	}
}

// Wait waits for the sweeps under way.
func (s *Sweeper) Wait() { s.running.Wait() }

// sweepConnection removes the expired uploads of one connection, one
// after another, each within limits.Timeout and all within
// connectionTimeouts of them, and says whether a removal failed. One the
// server refused is a failed sweep of that upload, and the next is tried;
// at a failure without an answer (the server, or the dial, timed out) the
// rest wait for a later sweep (the server may answer then), and it is a
// failed sweep of each of them.
func (s *Sweeper) sweepConnection(ctx context.Context, records []*uploadrecord.Record, limits Limits) (failed bool) {
	defer recovery.Log(s.Log, "removing a connection's expired uploads")
	ctx, cancel := context.WithTimeout(ctx, connectionTimeouts*limits.Timeout)
	defer cancel()
	for i, r := range records {
		// A sweep that outlasts this replica's hold stops: another has it.
		if ctx.Err() != nil || (s.Shard != nil && !s.Shard.Holds(item)) {
			return failed
		}
		removeCtx, cancel := context.WithTimeout(ctx, limits.Timeout)
		what, err := s.remove(removeCtx, r, limits.Timeout)
		cancel()
		if err != nil {
			s.log().Warn("removing an expired upload's partial file", "namespace", r.Namespace, "connection", r.Connection, "upload", r.ID, "error", err)
			failed = true
			if _, answered := files.Status(err); answered && !files.SessionFailed(err) {
				// Refused: the server answers, and may remove the next.
				s.failedSweep(ctx, records[i:i+1], err, limits)
				continue
			}
			s.failedSweep(ctx, records[i:], err, limits)
			return true
		}
		if err := s.Records.Delete(ctx, r); err != nil {
			s.log().Error("removing an expired upload's record", "upload", r.ID, "error", err)
			continue
		}
		s.Removed.WithLabelValues(what).Inc()
	}
	return failed
}

// failedSweep counts a failed sweep of each of records (cause says why),
// and abandons those that reached limits.FailedSweeps: each record is
// removed, its partial file perhaps left on the server, and an audit
// record and a log line say so.
func (s *Sweeper) failedSweep(ctx context.Context, records []*uploadrecord.Record, cause error, limits Limits) {
	// Counted even when the connection's turn ran out on the failure
	// itself, within a time of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limits.Timeout)
	defer cancel()
	for _, r := range records {
		n, err := s.Records.FailedSweep(ctx, r)
		switch {
		case errors.Is(err, uploadrecord.ErrNotFound):
			continue
		case err != nil:
			s.log().Error("counting a failed sweep of an expired upload", "upload", r.ID, "error", err)
			return
		case n < limits.FailedSweeps:
			continue
		}
		if err := s.Records.Delete(ctx, r); err != nil {
			s.log().Error("removing an abandoned upload's record", "upload", r.ID, "error", err)
			return
		}
		s.Removed.WithLabelValues("abandoned").Inc()
		s.log().Warn("abandoned an expired upload: its partial file could not be removed, and may be left on the server",
			"namespace", r.Namespace, "connection", r.Connection, "upload", r.ID, "partial", r.Partial, "failedSweeps", n, "error", cause)
		record := audit.Record{Action: ActionAbandoned, Actor: audit.Actor{Kind: audit.ActorSftpgate}, Namespace: r.Namespace,
			Connection: r.Connection, Object: "upload/" + r.ID, Result: audit.ResultOf(cause)}
		if p := r.Metadata["path"]; p != "" {
			record.Paths = []string{p}
		}
		s.Audit.Record(ctx, record)
	}
}

// ActionAbandoned is the audit action of an expired upload abandoned: its
// record removed after Limits.FailedSweeps sweeps could not remove its
// partial file, which may be left on the server.
const ActionAbandoned = "upload.abandoned"

// remove removes r's partial file, if it has one that is still there, and
// says what it removed.
func (s *Sweeper) remove(ctx context.Context, r *uploadrecord.Record, timeout time.Duration) (string, error) {
	if r.Partial == "" || !tempname.Is(path.Base(r.Partial)) {
		return "record", nil
	}
	ref := v1alpha1.ConnectionReference{Kind: r.Kind, Name: r.Connection}
	obj, ok := ends.Object(ref)
	if !ok {
		return "record", nil // of a kind this worker does not know
	}
	err := s.Connections.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Connection}, obj)
	switch {
	case client.IgnoreNotFound(err) != nil:
		return "", err
	case err != nil || obj.GetUID() != r.ConnectionUID:
		return "record", nil // gone with its connection's server access
	}
	e, _ := ends.Of(ref, obj) // its partial file is removed even while it is not Ready
	var size int64
	removed := false
	op := pool.Op{Timeout: min(e.OperationTimeout, timeout)}
	err = s.Ends.Do(ctx, e, op, func(f files.FS, _ func()) error {
		fi, err := f.Lstat(r.Partial)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil // gone already
		case err != nil:
			return err
		case !fi.Mode().IsRegular():
			return nil
		}
		if err := f.Remove(r.Partial); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		size, removed = fi.Size(), true
		return nil
	})
	if err != nil || !removed {
		return "record", err
	}
	s.RemovedBytes.Add(float64(size))
	return "partial", nil
}
