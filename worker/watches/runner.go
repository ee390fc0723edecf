// Package watches runs the SftpWatches a worker replica holds: it takes
// its share of them through worker/shard, and for each it holds, polls
// the folder, holds changes back until they settle (worker/watch), keeps
// what it reported and what it still has to deliver in the Kubernetes API
// (worker/statestore), delivers the events (worker/deliver) and writes
// the watch's status.
package watches

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
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// Limits bound what the watches of one replica take. Each is refused
// past, never grown.
type Limits struct {
	// MaxFiles is the most files a watch tracks: a larger folder is
	// DirectoryTooLarge.
	MaxFiles int
	// MaxPending is the most events a watch holds undelivered: past it,
	// changes wait on the server, found again by later polls.
	MaxPending int
	// MaxWatchesPerNamespace is the most watches of one namespace that
	// run; the others are OverQuota.
	MaxWatchesPerNamespace int
	// MaxWatchesTotal is the most watches that run in the cluster, what
	// its control plane was measured to hold, and MaxAccountWatchesTotal
	// (below it) the most of web UI accounts': past either the newer are
	// OverQuota, the operator's namespaces' taking places first
	// (tasks.Totals). Zero is no bound (the flags' defaults are
	// DefaultLimits').
	MaxWatchesTotal, MaxAccountWatchesTotal int
	// MaxTransfersPerNamespace is the most Transfers watches (their
	// spec.transfer) keep in one namespace, running or finished and not
	// yet deleted: past it, the next file's waits (TransfersAtLimit).
	MaxTransfersPerNamespace int
	// EventsPerMinutePerNamespace bounds the events one namespace's
	// watches deliver (and try) a minute, on this replica.
	EventsPerMinutePerNamespace float64
	// Polls is the most polls in flight on the replica, and
	// PollsPerNamespace of one namespace's watches: one tenant's thousand
	// watches, or its server that never answers, take no more.
	Polls, PollsPerNamespace int
	// PollTimeout bounds one poll (and so how long it holds its slot).
	PollTimeout time.Duration
	// WriteEvery is the least time between two writes of a watch's state,
	// and of its status: each is written when it changed, no more often.
	WriteEvery time.Duration
	// PollTimeEvery is the most time between two writes of a status in
	// which only lastPollTime changed; each watch's least, by its UID, is
	// between half of it and it (watcher.pollTimeEvery).
	PollTimeEvery time.Duration
	// MaxHeldFiles is the most files the replica's watches track
	// together, which their memory follows, and MaxHeldFilesPerNamespace
	// of one namespace's watches: past either, a watch that would track
	// more waits (ReplicaAtCapacity) until others shrink or end.
	MaxHeldFiles, MaxHeldFilesPerNamespace int
}

// DefaultLimits are the worker's flags' defaults.
func DefaultLimits() Limits {
	return Limits{MaxFiles: 100_000, MaxPending: 10_000, MaxWatchesPerNamespace: 100, MaxTransfersPerNamespace: 1000, EventsPerMinutePerNamespace: 6000,
		MaxWatchesTotal: DefaultMaxWatchesTotal, MaxAccountWatchesTotal: DefaultMaxAccountWatchesTotal,
		Polls: 16, PollsPerNamespace: 2, PollTimeout: 2 * time.Minute, WriteEvery: 5 * time.Second,
		PollTimeEvery: 6 * time.Hour, MaxHeldFiles: 1_000_000, MaxHeldFilesPerNamespace: 200_000}
}

// Runner runs the watches this replica holds. Start it as a manager's
// Runnable.
type Runner struct {
	tasks.Env
	Limits Limits

	once sync.Once
	kind *tasks.Kind[*watcher]
	// polls and pollsOf bound the polls in flight (Limits.Polls,
	// PollsPerNamespace); events bounds each namespace's deliveries.
	polls   chan struct{}
	pollsOf *ratelimit.InFlight[string]
	events  *ratelimit.Keyed[string]
	// held counts the files the watchers track (Limits.MaxHeldFiles).
	held heldFiles
	// made is the Transfers this replica made that its cache may not
	// show yet (Limits.MaxTransfersPerNamespace counts them).
	made recentlyMade
	// status writes the watches' statuses and their events.
	status statuspatch.Writer
}

// heldFiles counts the files a replica's watches track, in all and by
// namespace.
type heldFiles struct {
	mu                  sync.Mutex
	n                   int
	of                  map[string]int
	limit, perNamespace int
}

// resize changes a watch of namespace's count from *mine to n, unless
// that takes the replica or the namespace past its limit: then it keeps
// *mine and says false. Shrinking always succeeds.
func (h *heldFiles) resize(mine *int, namespace string, n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > *mine && (h.n-*mine+n > h.limit || h.of[namespace]-*mine+n > h.perNamespace) {
		return false
	}
	if h.of == nil {
		h.of = map[string]int{}
	}
	h.n += n - *mine
	if h.of[namespace] += n - *mine; h.of[namespace] == 0 {
		delete(h.of, namespace)
	}
	*mine = n
	return true
}

func (r *Runner) log() *slog.Logger { return logging.OrDiscard(r.Log) }

func (r *Runner) init() { r.once.Do(r.setUp) }

func (r *Runner) setUp() {
	l := &r.Limits
	d := DefaultLimits()
	l.MaxFiles, l.MaxPending = cmp.Or(l.MaxFiles, d.MaxFiles), cmp.Or(l.MaxPending, d.MaxPending)
	l.MaxWatchesPerNamespace = cmp.Or(l.MaxWatchesPerNamespace, d.MaxWatchesPerNamespace)
	l.MaxTransfersPerNamespace = cmp.Or(l.MaxTransfersPerNamespace, d.MaxTransfersPerNamespace)
	l.EventsPerMinutePerNamespace = cmp.Or(l.EventsPerMinutePerNamespace, d.EventsPerMinutePerNamespace)
	l.Polls, l.PollsPerNamespace = cmp.Or(l.Polls, d.Polls), cmp.Or(l.PollsPerNamespace, d.PollsPerNamespace)
	l.PollTimeout, l.WriteEvery = cmp.Or(l.PollTimeout, d.PollTimeout), cmp.Or(l.WriteEvery, d.WriteEvery)
	l.PollTimeEvery = cmp.Or(l.PollTimeEvery, d.PollTimeEvery)
	l.MaxHeldFiles = cmp.Or(l.MaxHeldFiles, d.MaxHeldFiles)
	l.MaxHeldFilesPerNamespace = cmp.Or(l.MaxHeldFilesPerNamespace, d.MaxHeldFilesPerNamespace)
	r.held.limit, r.held.perNamespace = l.MaxHeldFiles, l.MaxHeldFilesPerNamespace
	r.SyncInterval = cmp.Or(r.SyncInterval, 5*time.Second)
	r.status = statuspatch.Writer{Client: r.Client, Recorder: r.Recorder, Action: "Watch"}
	r.kind = &tasks.Kind[*watcher]{Metrics: r.Registry(), Name: "watch", Shard: r.Shard, States: r.States, List: r.list, Start: r.start,
		PerNamespace: l.MaxWatchesPerNamespace, Queue: r.queue,
		Totals:   tasks.Totals{All: l.MaxWatchesTotal, Strangers: l.MaxAccountWatchesTotal, IsStranger: r.Tenants.IsAccount},
		Interval: r.SyncInterval, Log: r.Log}
	r.polls = make(chan struct{}, l.Polls)
	r.pollsOf = ratelimit.NewInFlight[string](l.PollsPerNamespace)
	r.events = ratelimit.New[string](l.EventsPerMinutePerNamespace/60, int(l.EventsPerMinutePerNamespace/6)).WithMaxKeys(100_000)
}

// Start runs the replica's share of the watches until ctx ends; then it
// stops them, stores what they hold and gives their Leases back, for
// another replica to take at once.
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	if err := r.Metrics.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sftpgate_worker_events_pending", Help: "Events waiting to be delivered, of the watches this replica holds.",
	}, r.pending)); err != nil {
		return err
	}
	return r.kind.Run(ctx)
}

// Wake has the watcher of w look at it again now, as when its spec
// changed; the manager's informer calls it.
func (r *Runner) Wake(uid types.UID) {
	r.init()
	r.kind.Wake(string(uid))
}

// list is the watches, a namespace's oldest first: they run up to its
// limit. It reads the cache's own objects, not copies of every watch at
// every sync: nothing here may change them.
func (r *Runner) list(ctx context.Context) ([]tasks.Item, error) {
	var list v1alpha1.SftpWatchList
	if err := r.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	ws := tasks.SortedByAge(list.Items)
	items := make([]tasks.Item, len(ws))
	for i, w := range ws {
		items[i] = tasks.Item{UID: string(w.UID), Namespace: w.Namespace, Name: w.Name}
	}
	return items, nil
}

// start makes the watcher of a watch this replica took.
func (r *Runner) start(it tasks.Item, _ func()) *watcher {
	return &watcher{r: r, uid: types.UID(it.UID), key: client.ObjectKey{Namespace: it.Namespace, Name: it.Name}}
}

// pending is the events waiting, of the watches this replica holds.
func (r *Runner) pending() float64 {
	n := 0
	r.kind.Each(func(w *watcher) { n += int(w.pendingCount.Load()) })
	return float64(n)
}

// enterPoll waits for a poll slot of the replica's and one of ns's share,
// until ctx ends; false when ns has its share in flight (the watch polls
// a little later). A wait for the replica's slot that lasts until quiet
// (zero: never) runs meanwhile once, and goes on.
func (r *Runner) enterPoll(ctx context.Context, ns string, quiet time.Time, meanwhile func()) (leave func(), ok bool) {
	if !r.pollsOf.Enter(ns) {
		return nil, false
	}
	var ends <-chan time.Time
	if !quiet.IsZero() {
		t := time.NewTimer(time.Until(quiet))
		defer t.Stop()
		ends = t.C
	}
	for {
		select {
		case r.polls <- struct{}{}:
			return func() { <-r.polls; r.pollsOf.Leave(ns) }, true
		case <-ends:
			meanwhile()
			ends = nil
		case <-ctx.Done():
			r.pollsOf.Leave(ns)
			return nil, false
		}
	}
}
