// Package auditsinks delivers each namespace's audit records, as the
// components stored them (package auditstore), to the namespace's
// AuditSink, in batches of CloudEvents, and removes the stored records no
// longer needed: those delivered (or, without a sink, all) past the
// recent ones the web UI shows, and, past the outbox's bound, the oldest
// undelivered, a drop record saying which. The namespaces are divided
// among the worker's replicas through Leases (package tasks).
package auditsinks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/worker/tasks"
)

// Limits bound what is stored of a namespace's records.
type Limits struct {
	// Outbox is the most undelivered records a namespace with a sink may
	// have stored; past it, the oldest are dropped, and a record says so.
	Outbox int
	// Recent is how many records are kept once delivered (or, without a
	// sink, at all): what the web UI's Activity page shows. They take at
	// most half the namespace's audit budget; undelivered ones at most
	// nine tenths.
	Recent int
	// StuckAfter is how long the oldest undelivered record may wait
	// before the sink is not Ready (DeliveryStuck), whatever the cause.
	StuckAfter time.Duration
}

// Defaults of the limits: a record takes about 40 bytes stored
// (gzipped), so a full outbox about 4 MB of the namespace's budget.
const (
	DefaultOutbox = 100000
	DefaultRecent = 5000
	// DefaultStuckAfter is far above a healthy outbox's wait (a second to
	// store, a step to send) and below what people notice missing.
	DefaultStuckAfter = 10 * time.Minute
)

// WithDefaults is l with each zero limit its default.
func (l Limits) WithDefaults() Limits {
	if l.Outbox < 1 {
		l.Outbox = DefaultOutbox
	}
	if l.Recent < 1 {
		l.Recent = DefaultRecent
	}
	if l.StuckAfter <= 0 {
		l.StuckAfter = DefaultStuckAfter
	}
	return l
}

// Runner runs the outboxes of the namespaces this replica holds.
type Runner struct {
	tasks.Env
	Store *auditstore.Store
	// Budget says each namespace's audit budget: what is stored of it is
	// kept within.
	Budget *storedbytes.Budget
	Limits Limits

	once   sync.Once
	kind   *tasks.Kind[*outbox]
	status statuspatch.Writer
}

func (r *Runner) log() *slog.Logger { return logging.OrDiscard(r.Log) }

func (r *Runner) init() {
	r.once.Do(func() {
		r.Limits = r.Limits.WithDefaults()
		r.status = statuspatch.Writer{Client: r.Client, Recorder: r.Recorder, Action: "Deliver"}
		r.kind = &tasks.Kind[*outbox]{Metrics: r.Registry(), Name: "audit", Shard: r.Shard, List: r.list, Start: r.start,
			Interval: r.SyncInterval, Log: r.Log}
	})
}

// Start runs the outboxes until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	return r.kind.Run(ctx)
}

// Kick has the replica take its share now: for a new sink.
func (r *Runner) Kick() {
	r.init()
	r.kind.Kick()
}

// Wake has namespace's outbox, if this replica runs it, step now: for a
// sink whose spec changed.
func (r *Runner) Wake(namespace string) {
	r.init()
	r.kind.Wake(itemOf(namespace))
}

// itemOf is namespace's item: its bucket, and its task's key.
func itemOf(namespace string) string { return "audit-" + namespace }

// list is the namespaces with stored records or a sink.
func (r *Runner) list(ctx context.Context) ([]tasks.Item, error) {
	segments, err := r.Store.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var sinks v1alpha1.AuditSinkList
	if err := r.Cache.List(ctx, &sinks); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var items []tasks.Item
	add := func(ns string) {
		if !seen[ns] {
			seen[ns] = true
			items = append(items, tasks.Item{UID: itemOf(ns), Namespace: ns, Name: v1alpha1.AuditSinkName})
		}
	}
	for _, s := range sinks.Items {
		add(s.Namespace)
	}
	for _, s := range segments {
		add(s.Tenant)
	}
	return items, nil
}

func (r *Runner) start(it tasks.Item, end func()) *outbox {
	return &outbox{r: r, namespace: it.Namespace}
}

// idle is how often a namespace without a sink is looked at (to remove
// what is past its recent records), busy how often one with a sink is
// while it has records to deliver: the components store theirs every
// second.
const (
	idle = 10 * time.Second
	busy = time.Second
)
