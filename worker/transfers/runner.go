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
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/pool"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/held"
	"github.com/sftpgate/sftpgate/worker/metrics"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

// Limits bound what the transfers of one replica take. Each is refused
// past, never grown.
type Limits struct {
	// MaxRunningPerNamespace is the most transfers of one namespace that
	// run at once (across the replicas); the newer ones are Queued.
	MaxRunningPerNamespace int
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
}

// DefaultLimits are the worker's flags' defaults.
func DefaultLimits() Limits {
	return Limits{MaxRunningPerNamespace: 5, Streams: 32, StreamsPerNamespace: 8, MaxFiles: 100_000,
		StallTimeout: 2 * time.Minute, WriteEvery: 5 * time.Second}
}

// Runner runs the transfers this replica holds. Start it as a manager's
// Runnable.
type Runner struct {
	// Cache reads transfers and connections; Client reads Secrets and
	// sinks, and writes statuses.
	Cache    client.Reader
	Client   client.Client
	Pools    *pool.Pools
	Sender   *deliver.Sender
	Shard    *shard.Shard
	States   *statestore.Store
	Recorder events.EventRecorder
	Metrics  *metrics.Metrics
	Limits   Limits
	// Log is where the runner logs; nil logs nothing.
	Log *slog.Logger
	// SyncInterval is how often the replica takes its share anew: a third
	// of a lease duration.
	SyncInterval time.Duration

	// kick asks for a sync now: a new transfer starts at once.
	kick     chan struct{}
	kickOnce sync.Once

	items held.Items[*run]
	// mu guards shares; streams and shares bound the files copied at
	// once, on the replica and by namespace.
	mu      sync.Mutex
	streams chan struct{}
	shares  map[string]*share
}

func (r *Runner) log() *slog.Logger { return logging.OrDiscard(r.Log) }

func (r *Runner) init() {
	l := &r.Limits
	d := DefaultLimits()
	l.MaxRunningPerNamespace = cmp.Or(l.MaxRunningPerNamespace, d.MaxRunningPerNamespace)
	l.Streams, l.StreamsPerNamespace = cmp.Or(l.Streams, d.Streams), cmp.Or(l.StreamsPerNamespace, d.StreamsPerNamespace)
	l.MaxFiles, l.StallTimeout = cmp.Or(l.MaxFiles, d.MaxFiles), cmp.Or(l.StallTimeout, d.StallTimeout)
	l.WriteEvery = cmp.Or(l.WriteEvery, d.WriteEvery)
	r.SyncInterval = cmp.Or(r.SyncInterval, 5*time.Second)
	r.items = held.Items[*run]{Shard: r.Shard, States: r.States, Kind: "transfer", Log: r.Log}
	r.streams = make(chan struct{}, l.Streams)
	r.shares = map[string]*share{}
}

// Start runs the replica's share of the transfers until ctx ends; then it
// stops them, stores their plans and gives their Leases back.
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	if err := r.Metrics.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sftpgate_worker_transfers_running", Help: "Transfers this replica runs (queued ones included).",
	}, func() float64 { n := 0; r.items.Each(func(*run) { n++ }); return float64(n) })); err != nil {
		return err
	}
	return r.items.Run(ctx, r.SyncInterval, r.kicks(), r.sync)
}

// Kick has the replica take its share of the transfers now rather than
// at the next tick; the manager's informer calls it for a new transfer.
func (r *Runner) Kick() {
	select {
	case r.kicks() <- struct{}{}:
	default:
	}
}

func (r *Runner) kicks() chan struct{} {
	r.kickOnce.Do(func() { r.kick = make(chan struct{}, 1) })
	return r.kick
}

// sync takes the replica's share of the unfinished transfers, starts the
// runs of those it took and stops those of the ones it gave back.
func (r *Runner) sync(ctx context.Context) {
	defer recovery.Log(r.Log, "dividing the transfers")
	var list v1alpha1.TransferList
	if err := r.Cache.List(ctx, &list); err != nil {
		r.log().Error("listing the transfers", "error", err)
		return
	}
	// A namespace's oldest transfers run, up to its limit.
	slices.SortFunc(list.Items, func(a, b v1alpha1.Transfer) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	perNamespace := map[string]int{}
	exists := map[string]bool{}
	byUID := map[string]*v1alpha1.Transfer{}
	items := make([]string, 0, len(list.Items))
	queued := map[string]bool{}
	for i := range list.Items {
		t := &list.Items[i]
		uid := string(t.UID)
		exists[uid] = true
		if t.Finished() || t.DeletionTimestamp != nil {
			continue
		}
		byUID[uid] = t
		items = append(items, uid)
		perNamespace[t.Namespace]++
		queued[uid] = perNamespace[t.Namespace] > r.Limits.MaxRunningPerNamespace
	}
	for uid, t := range r.items.Sync(ctx, items, exists, func(uid string, cancel context.CancelFunc) (*run, func(context.Context)) {
		tr := byUID[uid]
		t := &run{r: r, uid: tr.UID, key: client.ObjectKeyFromObject(tr), cancel: cancel, wake: make(chan struct{}, 1)}
		t.queued.Store(queued[uid])
		return t, t.run
	}) {
		if was := t.queued.Swap(queued[uid]); was && !queued[uid] {
			t.poke()
		}
	}
}

// enterStream waits for a stream of ns's share and one of the replica's
// until ctx ends.
func (r *Runner) enterStream(ctx context.Context, ns string) (leave func(), ok bool) {
	share := r.shareOf(ns)
	select {
	case share.slots <- struct{}{}:
	case <-ctx.Done():
		r.dropShare(ns, share)
		return nil, false
	}
	select {
	case r.streams <- struct{}{}:
		return func() { <-r.streams; <-share.slots; r.dropShare(ns, share) }, true
	case <-ctx.Done():
		<-share.slots
		r.dropShare(ns, share)
		return nil, false
	}
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
