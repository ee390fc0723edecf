// Package expectations runs the FileExpectations a worker replica holds:
// it takes its share of them through the task kit (worker/tasks), and for
// each it holds, lists the folder near and after its windows' deadlines,
// decides the windows' outcomes (worker/expect), keeps them in the
// Kubernetes API (worker/statestore) before it announces them, delivers
// them as CloudEvents (worker/deliver), records them in the audit trail
// and writes the expectation's status.
package expectations

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// Limits bound what the expectations of one replica take. Each is
// refused past, never grown.
type Limits struct {
	// MaxPerNamespace is the most expectations of one namespace that are
	// evaluated; the others are OverQuota. MaxTotal is the most in the
	// cluster, and MaxAccountTotal (below it) of web UI accounts'.
	MaxPerNamespace, MaxTotal, MaxAccountTotal int
	// Listings is the most listings in flight on the replica, and
	// ListingsPerNamespace of one namespace's expectations.
	Listings, ListingsPerNamespace int
	// ListTimeout bounds one listing.
	ListTimeout time.Duration
	// MaxEntries bounds the entries a listing reads: a larger folder is
	// DirectoryTooLarge.
	MaxEntries int
	// OutcomesKept is how many outcomes the status keeps
	// (status.lastOutcomes).
	OutcomesKept int
	// MaxPending is the most outcomes an expectation holds undelivered:
	// past it the oldest is dropped, counted and said in the status.
	MaxPending int
	// WriteEvery is the least time between two writes of an
	// expectation's status that change no condition.
	WriteEvery time.Duration
}

// DefaultLimits are the worker's flags' defaults.
func DefaultLimits() Limits {
	return Limits{MaxPerNamespace: 100, MaxTotal: 5000, MaxAccountTotal: 1000, Listings: 16, ListingsPerNamespace: 2,
		ListTimeout: time.Minute, MaxEntries: 10_000, OutcomesKept: 10, MaxPending: 100, WriteEvery: 5 * time.Second}
}

// withDefaults is l with each limit below one its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	l.MaxPerNamespace, l.MaxTotal = atLeastOne(l.MaxPerNamespace, d.MaxPerNamespace), atLeastOne(l.MaxTotal, d.MaxTotal)
	l.MaxAccountTotal = atLeastOne(l.MaxAccountTotal, d.MaxAccountTotal)
	l.Listings, l.ListingsPerNamespace = atLeastOne(l.Listings, d.Listings), atLeastOne(l.ListingsPerNamespace, d.ListingsPerNamespace)
	l.ListTimeout, l.MaxEntries = atLeastOne(l.ListTimeout, d.ListTimeout), atLeastOne(l.MaxEntries, d.MaxEntries)
	l.OutcomesKept, l.MaxPending = min(atLeastOne(l.OutcomesKept, d.OutcomesKept), maxOutcomesKept), atLeastOne(l.MaxPending, d.MaxPending)
	l.WriteEvery = atLeastOne(l.WriteEvery, d.WriteEvery)
	return l
}

// atLeastOne is v, or d when v is below one (zero, or a negative flag).
func atLeastOne[T int | time.Duration](v, d T) T {
	if v < 1 {
		return d
	}
	return v
}

// maxOutcomesKept is the CRD's bound of status.lastOutcomes.
const maxOutcomesKept = 50

// Runner runs the expectations this replica holds. Start it as a
// manager's Runnable.
type Runner struct {
	tasks.Env
	Limits Limits
	// Now is the time the windows are read on; nil is time.Now. Tests set
	// it to a clock of their own.
	Now func() time.Time

	once sync.Once
	kind *tasks.Kind[*task]
	// listings and listingsOf bound the listings in flight.
	listings   chan struct{}
	listingsOf *ratelimit.InFlight[string]
	status     statuspatch.Writer
}

func (r *Runner) log() *slog.Logger { return logging.OrDiscard(r.Log) }

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) init() { r.once.Do(r.setUp) }

func (r *Runner) setUp() {
	r.Limits = r.Limits.withDefaults()
	l := r.Limits
	r.SyncInterval = cmp.Or(r.SyncInterval, 5*time.Second)
	r.status = statuspatch.Writer{Client: r.Client, Recorder: r.Recorder, Action: "Expect"}
	r.kind = &tasks.Kind[*task]{Metrics: r.Registry(), Name: "expectation", Shard: r.Shard, States: r.States, List: r.list, Start: r.start,
		PerNamespace: l.MaxPerNamespace, Queue: r.queue,
		Totals:   tasks.Totals{All: l.MaxTotal, Strangers: l.MaxAccountTotal, IsStranger: r.Tenants.IsAccount},
		Interval: r.SyncInterval, Log: r.Log}
	r.listings = make(chan struct{}, l.Listings)
	r.listingsOf = ratelimit.NewInFlight[string](l.ListingsPerNamespace)
}

// Start runs the replica's share of the expectations until ctx ends;
// then it stops them, stores what they hold and gives their Leases back.
func (r *Runner) Start(ctx context.Context) error {
	r.init()
	if err := r.Metrics.Register(collector{r}); err != nil {
		return err
	}
	return r.kind.Run(ctx)
}

// Wake has the task of uid look at it again now, as when its spec
// changed.
func (r *Runner) Wake(uid types.UID) {
	r.init()
	r.kind.Wake(string(uid))
}

// list is the expectations, a namespace's oldest first.
func (r *Runner) list(ctx context.Context) ([]tasks.Item, error) {
	var list v1alpha1.FileExpectationList
	if err := r.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	es := tasks.SortedByAge(list.Items)
	items := make([]tasks.Item, len(es))
	for i, e := range es {
		items[i] = tasks.Item{UID: string(e.UID), Namespace: e.Namespace, Name: e.Name}
	}
	return items, nil
}

func (r *Runner) start(it tasks.Item, _ func()) *task {
	return &task{r: r, uid: types.UID(it.UID), key: client.ObjectKey{Namespace: it.Namespace, Name: it.Name}}
}

// queue tells t whether it waits for a place; told anything new, it
// looks at once.
func (r *Runner) queue(t *task, w tasks.Wait) {
	if t.place.Set(w) != w {
		r.kind.Wake(string(t.uid))
	}
}

// overQuota says why an expectation waits for a place.
func (r *Runner) overQuota(w tasks.Wait) string {
	if w == tasks.InNamespace {
		return fmt.Sprintf("the namespace has more than %d expectations; only its oldest are evaluated", r.Limits.MaxPerNamespace)
	}
	return r.kind.Totals.Why(w, "expectations")
}

// enterListing waits for a listing slot of the replica's and one of ns's
// share, until ctx ends; false when ns has its share in flight.
func (r *Runner) enterListing(ctx context.Context, ns string) (leave func(), ok bool) {
	if !r.listingsOf.Enter(ns) {
		return nil, false
	}
	select {
	case r.listings <- struct{}{}:
		return func() { <-r.listings; r.listingsOf.Leave(ns) }, true
	case <-ctx.Done():
		r.listingsOf.Leave(ns)
		return nil, false
	}
}

// The metrics of the expectations this replica holds, by namespace and
// name: each is another replica's after a move, so a query takes the
// latest of each (max by).
var (
	lastOutcomeDesc = prometheus.NewDesc("sftpgate_expectation_last_outcome",
		"1 for the last outcome decided of an expectation's windows, 0 for the others.", []string{"namespace", "expectation", "outcome"}, nil)
	lastMetDesc = prometheus.NewDesc("sftpgate_expectation_last_met_timestamp_seconds",
		"When a window of the expectation was last Met.", []string{"namespace", "expectation"}, nil)
	missedDesc = prometheus.NewDesc("sftpgate_expectation_missed_total",
		"Windows of the expectation missed since it was made.", []string{"namespace", "expectation"}, nil)
	deadlineDesc = prometheus.NewDesc("sftpgate_expectation_next_deadline_timestamp_seconds",
		"The expectation's next deadline still ahead.", []string{"namespace", "expectation"}, nil)
	undecidedDesc = prometheus.NewDesc("sftpgate_expectation_undecided_deadline_timestamp_seconds",
		"A deadline passed whose window has no outcome yet: the folder has not been listed since.", []string{"namespace", "expectation"}, nil)
)

// collector reads the metrics off the tasks at each scrape: a task this
// replica gave up leaves no series behind.
type collector struct{ r *Runner }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lastOutcomeDesc, lastMetDesc, missedDesc, deadlineDesc, undecidedDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.r.kind.Each(func(t *task) {
		m := t.metrics.Load()
		if m == nil {
			return
		}
		ns, name := t.key.Namespace, t.key.Name
		if m.last != "" {
			for _, o := range []v1alpha1.ExpectationOutcome{v1alpha1.OutcomeMet, v1alpha1.OutcomeMissed, v1alpha1.OutcomeLate, v1alpha1.OutcomeNotProcessed} {
				v := 0.0
				if o == m.last {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(lastOutcomeDesc, prometheus.GaugeValue, v, ns, name, string(o))
			}
		}
		if !m.lastMet.IsZero() {
			ch <- prometheus.MustNewConstMetric(lastMetDesc, prometheus.GaugeValue, float64(m.lastMet.Unix()), ns, name)
		}
		ch <- prometheus.MustNewConstMetric(missedDesc, prometheus.CounterValue, float64(m.missed), ns, name)
		if !m.deadline.IsZero() {
			ch <- prometheus.MustNewConstMetric(deadlineDesc, prometheus.GaugeValue, float64(m.deadline.Unix()), ns, name)
		}
		if !m.undecided.IsZero() {
			ch <- prometheus.MustNewConstMetric(undecidedDesc, prometheus.GaugeValue, float64(m.undecided.Unix()), ns, name)
		}
	})
}

// outcomeName is an outcome as an audit action and event type word.
func outcomeName(o v1alpha1.ExpectationOutcome) string { return strings.ToLower(string(o)) }
