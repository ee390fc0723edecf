// Package transfers runs the Transfers a worker replica holds: it takes
// its share of the unfinished ones through worker/shard, and for each
// lists the source into a plan kept in the Kubernetes API
// (worker/statestore), copies the files (worker/transfer) a few at a time
// within the namespace's and the replica's shares of streams, writes the
// status, and sends the CloudEvent that says it finished.
package transfers

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// Limits bound what the transfers of one replica take. Each is refused
// past, never grown.
type Limits struct {
	// MaxRunningPerNamespace is the most transfers of one namespace that
	// run at once (across the replicas); the newer ones are Queued.
	MaxRunningPerNamespace int
	// MaxAccountRunningTotal is the most transfers of all web UI accounts
	// that run at once; the newer ones are OverQuota (tasks.Totals).
	MaxAccountRunningTotal int
	// Streams is the most files copied at once on the replica, and
	// StreamsPerNamespace of one namespace's transfers: one tenant's many
	// transfers, or its server that never answers, take no more.
	Streams, StreamsPerNamespace int
	// MaxFiles is the most files one transfer copies.
	MaxFiles int
	// StallTimeout fails a file's try that made no progress for this long
	// (and frees its stream).
	StallTimeout time.Duration
	// WriteEvery is the least time between two writes of a transfer's
	// plan, and of its status while it runs.
	WriteEvery time.Duration
	// RangesPerFile is how many ranges of a large file are copied at
	// once, each on sessions of its own (transfer.Job.Ranges); 1 copies
	// it as one stream.
	RangesPerFile int
}

// DefaultLimits are the worker's flags' defaults.
func DefaultLimits() Limits {
	return Limits{MaxRunningPerNamespace: 5, MaxAccountRunningTotal: DefaultMaxAccountRunningTotal, Streams: 32, StreamsPerNamespace: 8, MaxFiles: 100_000,
		StallTimeout: 2 * time.Minute, WriteEvery: 5 * time.Second, RangesPerFile: 4}
}

// Runner runs the transfers this replica holds. Start it as a manager's
// Runnable.
type Runner struct {
	tasks.Env
	Limits Limits

	once sync.Once
	kind *tasks.Kind[*run]
	// mu guards shares; streams and shares bound the files copied at
	// once, on the replica and by namespace.
	mu      sync.Mutex
	streams chan struct{}
	shares  map[string]*share
	// status writes the transfers' statuses and their events.
	status statuspatch.Writer
}

func (r *Runner) log() *slog.Logger { return logging.OrDiscard(r.Log) }

func (r *Runner) init() { r.once.Do(r.setUp) }

func (r *Runner) setUp() {
	l := &r.Limits
	d := DefaultLimits()
	l.MaxRunningPerNamespace = cmp.Or(l.MaxRunningPerNamespace, d.MaxRunningPerNamespace)
	l.MaxAccountRunningTotal = cmp.Or(l.MaxAccountRunningTotal, d.MaxAccountRunningTotal)
	l.Streams, l.StreamsPerNamespace = cmp.Or(l.Streams, d.Streams), cmp.Or(l.StreamsPerNamespace, d.StreamsPerNamespace)
	l.MaxFiles, l.StallTimeout = cmp.Or(l.MaxFiles, d.MaxFiles), cmp.Or(l.StallTimeout, d.StallTimeout)
	l.WriteEvery, l.RangesPerFile = cmp.Or(l.WriteEvery, d.WriteEvery), cmp.Or(l.RangesPerFile, d.RangesPerFile)
	r.SyncInterval = cmp.Or(r.SyncInterval, 5*time.Second)
	r.status = statuspatch.Writer{Client: r.Client, Recorder: r.Recorder, Action: "Transfer"}
	r.kind = &tasks.Kind[*run]{Metrics: r.Registry(), Name: "transfer", Shard: r.Shard, States: r.States, List: r.list, Start: r.start,
		PerNamespace: l.MaxRunningPerNamespace, Queue: r.queue, Interval: r.SyncInterval, Log: r.Log,
		Totals: tasks.Totals{Strangers: l.MaxAccountRunningTotal, IsStranger: r.Tenants.IsAccount}}
	r.streams = make(chan struct{}, l.Streams)
	r.shares = map[string]*share{}
}

// Start runs the replica's share of the transfers until ctx ends; then it
// stops them, stores their plans and gives their Leases back.
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	if err := r.Metrics.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sftpgate_worker_transfers_running", Help: "Transfers this replica runs (queued ones included).",
	}, func() float64 { n := 0; r.kind.Each(func(*run) { n++ }); return float64(n) })); err != nil {
		return err
	}
	return r.kind.Run(ctx)
}

// Kick has the replica take its share of the transfers now rather than
// at the next tick; the manager's informer calls it for a new transfer.
func (r *Runner) Kick() {
	r.init()
	r.kind.Kick()
}

// list is the transfers, a namespace's oldest first: the unfinished ones
// run up to its limit. It reads the cache's own objects, not copies of
// every transfer at every sync: nothing here may change them.
func (r *Runner) list(ctx context.Context) ([]tasks.Item, error) {
	var list v1alpha1.TransferList
	if err := r.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	ts := tasks.SortedByAge(list.Items)
	items := make([]tasks.Item, len(ts))
	for i, t := range ts {
		items[i] = tasks.Item{UID: string(t.UID), Namespace: t.Namespace, Name: t.Name,
			Idle: t.Finished() || t.DeletionTimestamp != nil,
			// Only its finishing event waits: it takes no place.
			Free: copied(t)}
	}
	return items, nil
}

// start makes the run of a transfer this replica took.
func (r *Runner) start(it tasks.Item, end func()) *run {
	return &run{r: r, uid: types.UID(it.UID), key: client.ObjectKey{Namespace: it.Namespace, Name: it.Name}, cancel: end}
}

// queue tells t whether it waits for a place among its namespace's
// running transfers, or the accounts', and why; told anything new, it
// looks at once: one that stops waiting starts, and its status says so.
func (r *Runner) queue(t *run, w tasks.Wait) {
	if t.place.Set(w) != w {
		r.kind.Wake(string(t.uid))
	}
}

// enterStream takes a stream of ns's share and one of the replica's,
// waiting for them until ctx ends, or only when free.
func (r *Runner) enterStream(ctx context.Context, ns string, wait bool) (leave func(), ok bool) {
	take := func(slots chan struct{}) bool {
		if !wait {
			select {
			case slots <- struct{}{}:
				return true
			default:
				return false
			}
		}
		select {
		case slots <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	share := r.shareOf(ns)
	if !take(share.slots) {
		r.dropShare(ns, share)
		return nil, false
	}
	if !take(r.streams) {
		<-share.slots
		r.dropShare(ns, share)
		return nil, false
	}
	return func() { <-r.streams; <-share.slots; r.dropShare(ns, share) }, true
}

// share is a namespace's streams: its slots, and the copies that hold or
// wait for one.
type share struct {
	slots chan struct{}
	users int
}

func (r *Runner) shareOf(ns string) *share {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shares[ns]
	if s == nil {
		s = &share{slots: make(chan struct{}, r.Limits.StreamsPerNamespace)}
		r.shares[ns] = s
	}
	s.users++
	return s
}

// dropShare forgets ns's share when no copy uses it.
func (r *Runner) dropShare(ns string, s *share) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(r.shares, ns)
	}
}
