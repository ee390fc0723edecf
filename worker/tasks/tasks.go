// Package tasks is the worker's kit for a kind of work (watches,
// transfers, upload expiry): a kind lists its items, in the order they
// take places in their namespace's quota, and makes the task of an item;
// a task does one step at a time and stores what it holds when it stops.
// The kit owns the rest: holding items through Leases (worker/shard),
// the per-namespace quota, one goroutine per task running its steps,
// waking it, stopping it when its item goes to another replica or is
// deleted, and removing what deleted items left stored.
package tasks

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

// Item is one item of a kind's work, as the kind lists it.
type Item struct {
	// UID keys the item: its bucket, its stored state.
	UID             string
	Namespace, Name string
	// Idle says the item exists but needs no work (a finished transfer):
	// no task runs for it, and its state is kept until it is gone.
	Idle bool
	// Free says the item runs without taking a place in its namespace's
	// quota (a transfer whose files all ended).
	Free bool
}

// ByAge orders objects oldest first, then by name, then by UID: the order
// in which items take their namespace's places, and the totals' (one
// order across namespaces, the same on every replica).
func ByAge(a, b metav1.Object) int {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	return cmp.Or(ta.Compare(tb.Time), cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetUID(), b.GetUID()))
}

// SortedByAge is pointers to objs, oldest first (ByAge): sorted as
// pointers, since a comparison of two objects by value copies both to
// the heap (hundreds of megabytes a sync at 10,000 watches).
func SortedByAge[T any, P interface {
	*T
	metav1.Object
}](objs []T) []P {
	out := make([]P, len(objs))
	for i := range objs {
		out[i] = &objs[i]
	}
	slices.SortFunc(out, func(a, b P) int { return ByAge(a, b) })
	return out
}

// Task is the work of one item this replica holds.
type Task interface {
	// Step does what is due and says how long until more is, or that the
	// item's work ended for good.
	Step(ctx context.Context) (wait time.Duration, ended bool)
	// Stop stores what the task holds, for the replica that takes the item
	// next, when its item is given back or lost; ctx does not end with the
	// task's.
	Stop(ctx context.Context)
}

// Kind is one kind of work, as a replica runs it.
type Kind[T Task] struct {
	// Name names the items in log lines ("watch").
	Name   string
	Shard  *shard.Shard
	States *statestore.Store
	// List lists the items there are, in the order they take places in
	// their namespace's quota and in the totals (ByAge: the oldest first).
	List func(ctx context.Context) ([]Item, error)
	// PerNamespace is the most items of one namespace that run on all the
	// replicas; the others wait. Zero is no limit.
	PerNamespace int
	// Totals bound the items that run in all namespaces, and in web UI
	// accounts' (places, in totals.go).
	Totals Totals
	// Start makes the task of an item this replica took. end ends it: for
	// a task that finds its item taken by another replica.
	Start func(it Item, end func()) T
	// Queue, when set, tells each task whether it waits for a place (in its
	// namespace's quota or a total, and which): at its start and at every
	// sync.
	Queue func(t T, w Wait)
	// Interval is how often the replica takes its share anew (and renews
	// its Leases): a third of a lease duration.
	Interval time.Duration
	// Log logs what fails outside a task's status (nil: nothing).
	Log *slog.Logger
	// Metrics, when set, is given the count of the tasks this replica
	// runs (sftpgate_worker_tasks{kind=Name}) at the first Run.
	Metrics interface {
		Register(prometheus.Collector) error
	}

	once    sync.Once
	kick    chan struct{}
	mu      sync.Mutex
	running map[string]*entry[T]
	syncs   int
}

type entry[T Task] struct {
	t      T
	uid    string
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}
	// paused says the loop waits for this replica to hold the item again
	// (or for the next sync to stop the task).
	paused atomic.Bool
}

func (k *Kind[T]) init() {
	k.once.Do(func() {
		k.kick = make(chan struct{}, 1)
		k.running = map[string]*entry[T]{}
		k.Log = logging.OrDiscard(k.Log)
	})
}

// Run takes the replica's share at once, then every Interval and at once
// after Kick, until ctx ends (the shard takes nothing before the members
// settled, so that replicas started together count each other); then it
// stops every task, which store what they hold, and gives the items back
// for another replica to take at once.
func (k *Kind[T]) Run(ctx context.Context) error {
	k.init()
	if k.Metrics != nil {
		// A replica without its share of work shows as a kind it runs none
		// of while others run many.
		if err := k.Metrics.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sftpgate_worker_tasks", Help: "Items of a kind (watch, transfer, expectation, ...) this replica runs.",
			ConstLabels: prometheus.Labels{"kind": k.Name},
		}, func() float64 { return float64(k.count()) })); err != nil {
			return err
		}
	}
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		k.renew(renewCtx)
	}()
	defer func() { stopRenewing(); <-renewed }()
	tick := time.NewTicker(k.Interval)
	defer tick.Stop()
	for first := true; ; first = false {
		k.sync(ctx)
		kick := k.kick
		if first {
			kick = nil // the informers' first adds would kick at once
		}
		select {
		case <-ctx.Done():
			// No renewal may follow the membership's removal.
			stopRenewing()
			<-renewed
			k.stopAll()
			leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return k.Shard.Leave(leaveCtx)
		case <-tick.C:
		case <-kick:
		}
	}
}

// renew renews the replica's membership every Interval until ctx ends,
// whatever the syncs are doing.
func (k *Kind[T]) renew(ctx context.Context) {
	tick := time.NewTicker(k.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := k.Shard.Renew(ctx); err != nil {
				k.Log.Error("renewing the replica's membership", "kind", k.Name, "error", err)
			}
		}
	}
}

// Kick has the replica take its share now rather than at the next tick:
// for a new item.
func (k *Kind[T]) Kick() {
	k.init()
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// Wake has uid's task, if this replica runs it, step now.
func (k *Kind[T]) Wake(uid string) {
	k.init()
	k.mu.Lock()
	e := k.running[uid]
	k.mu.Unlock()
	if e != nil {
		e.nudge()
	}
}

// nudge has e's task step now (if it may).
func (e *entry[T]) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Each calls fn with each task, under the kit's lock: fn must be quick.
func (k *Kind[T]) Each(fn func(T)) {
	k.init()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.running {
		fn(e.t)
	}
}

// sweepEvery is how many syncs apart the sweep runs: about a minute.
const sweepEvery = 12

// sync takes the replica's share of the items, starts the tasks of those
// it took and stops those of the ones it gave back, lost or that are gone.
func (k *Kind[T]) sync(ctx context.Context) {
	defer recovery.Log(k.Log, "dividing the "+k.Name+"s")
	items, err := k.List(ctx)
	if err != nil {
		k.Log.Error("listing the items", "kind", k.Name, "error", err)
		return
	}
	exists := map[string]bool{}
	byUID := map[string]Item{}
	work := make([]string, 0, len(items))
	for _, it := range items {
		exists[it.UID] = true
		if it.Idle {
			continue
		}
		byUID[it.UID] = it
		work = append(work, it.UID)
	}
	waits := k.places(ctx, items)
	if k.syncs%sweepEvery == 0 {
		k.sweep(ctx, exists, work)
	}
	k.syncs++
	keep, drop, err := k.Shard.Sync(ctx, work)
	switch {
	case errors.Is(err, shard.ErrNotMember):
		// Said when it matters: not before the replica's first renewal.
		if n := k.count(); n > 0 {
			k.Log.Warn("the replica's membership lapsed: its tasks stop until it renews", "kind", k.Name, "tasks", n)
		}
	case err != nil:
		k.Log.Error("taking a share of the items", "kind", k.Name, "error", err)
	}
	k.stop(drop...)
	for _, uid := range drop {
		if !exists[uid] && k.States != nil {
			if err := k.States.Delete(ctx, uid); err != nil {
				k.Log.Error("removing a deleted item's state", "kind", k.Name, "uid", uid, "error", err)
			}
		}
	}
	k.stopLost(keep, err)
	if err := k.Shard.Settle(ctx); err != nil {
		k.Log.Error("giving items back", "kind", k.Name, "error", err)
	}
	k.mu.Lock()
	var fresh []string
	held := make([]*entry[T], 0, len(keep))
	for _, uid := range keep {
		if e := k.running[uid]; e != nil {
			held = append(held, e)
		} else {
			fresh = append(fresh, uid)
		}
	}
	paused := make([]*entry[T], 0)
	for _, e := range k.running {
		if e.paused.Load() {
			paused = append(paused, e)
		}
	}
	k.mu.Unlock()
	// Outside the lock: a task told it no longer waits may be woken.
	if k.Queue != nil {
		for _, e := range held {
			k.Queue(e.t, waits[e.uid])
		}
	}
	for _, uid := range fresh {
		k.start(ctx, byUID[uid], waits[uid])
	}
	// Tasks that found their item not held between two syncs (a renewal
	// late, not yet lapsed) go on where they were, if it is this
	// replica's still.
	for _, e := range paused {
		if k.Shard.Holds(e.uid) {
			e.nudge()
		}
	}
}

// stopLost stops the tasks of items this replica no longer holds (given
// back, taken by another, or gone), or whose task ended while it still
// holds the item (a new one starts). After a failed sync (keep nil) a task
// stops once its hold lapsed, not on one call the API server did not
// answer: another replica may take the item as soon as the lease ends,
// and a step under way (a transfer's whole copy) must not go on beside
// its. Between a lapse and that sync, no task steps (holds).
func (k *Kind[T]) stopLost(keep []string, syncErr error) {
	if keep == nil && syncErr != nil {
		k.mu.Lock()
		var lapsed []string
		for uid := range k.running {
			if !k.Shard.Holds(uid) {
				lapsed = append(lapsed, uid)
			}
		}
		k.mu.Unlock()
		k.stop(lapsed...)
		return
	}
	kept := make(map[string]bool, len(keep))
	for _, uid := range keep {
		kept[uid] = true
	}
	k.mu.Lock()
	var lost []string
	for uid, e := range k.running {
		if !kept[uid] {
			lost = append(lost, uid)
			continue
		}
		select {
		case <-e.done:
			lost = append(lost, uid)
		default:
		}
	}
	k.mu.Unlock()
	k.stop(lost...)
}

// start makes it's task, tells it whether it waits for a place, and only
// then runs its steps: a queued item never steps as if it ran.
func (k *Kind[T]) start(ctx context.Context, it Item, w Wait) {
	tctx, cancel := context.WithCancel(ctx)
	e := &entry[T]{uid: it.UID, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.t = k.Start(it, cancel)
	if k.Queue != nil {
		k.Queue(e.t, w)
	}
	k.mu.Lock()
	k.running[it.UID] = e
	k.mu.Unlock()
	go k.loop(tctx, e)
}

// loop runs e's steps, while this replica holds its item, until its work
// ended or ctx did: then the task stores what it holds.
func (k *Kind[T]) loop(ctx context.Context, e *entry[T]) {
	defer close(e.done)
	for {
		// Paused, it waits for a wake (or its end) with no timer.
		var timer *time.Timer
		var due <-chan time.Time
		if k.holds(e) {
			wait, ended := k.step(ctx, e.t)
			if ended {
				return
			}
			timer = time.NewTimer(wait)
			due = timer.C
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			e.t.Stop(context.WithoutCancel(ctx))
			return
		case <-e.wake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// holds says whether e's task may step: while this replica holds its
// item. If not (its membership lapsed), the task pauses, writing nothing,
// until a sync finds the item held again and wakes it, or finds it
// another's and stops it.
func (k *Kind[T]) holds(e *entry[T]) bool {
	if k.Shard.Holds(e.uid) {
		e.paused.Store(false)
		return true
	}
	e.paused.Store(true)
	// Held again since: a sync that looked before it paused wakes nothing.
	if k.Shard.Holds(e.uid) {
		e.paused.Store(false)
		return true
	}
	return false
}

// count is how many tasks run.
func (k *Kind[T]) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.running)
}

// failedStepWait is how long a task whose step panicked waits for the
// next.
const failedStepWait = 10 * time.Second

// step runs one step; a panic in it fails that step only.
func (k *Kind[T]) step(ctx context.Context, t T) (wait time.Duration, ended bool) {
	wait = failedStepWait
	defer recovery.Log(k.Log, "a "+k.Name)
	return t.Step(ctx)
}

// stop stops the tasks of uids that run, all at once, and waits until
// each stored what it holds: one after another, a replica giving back
// thousands of items would hold their buckets for the sum of their
// stores.
func (k *Kind[T]) stop(uids ...string) {
	k.mu.Lock()
	stopping := make([]*entry[T], 0, len(uids))
	for _, uid := range uids {
		if e := k.running[uid]; e != nil {
			delete(k.running, uid)
			e.cancel()
			stopping = append(stopping, e)
		}
	}
	k.mu.Unlock()
	for _, e := range stopping {
		<-e.done
	}
}

func (k *Kind[T]) stopAll() {
	k.mu.Lock()
	uids := make([]string, 0, len(k.running))
	for uid := range k.running {
		uids = append(uids, uid)
	}
	k.mu.Unlock()
	k.stop(uids...)
}

// sweep removes the states of items deleted while no live replica held
// them, and the Leases no replica needs.
func (k *Kind[T]) sweep(ctx context.Context, exists map[string]bool, work []string) {
	busy := map[string]bool{}
	for _, uid := range work {
		busy[k.Shard.Bucket(uid)] = true
	}
	if err := k.Shard.Tidy(ctx, busy); err != nil {
		k.Log.Error("removing Leases no replica needs", "kind", k.Name, "error", err)
	}
	if k.States == nil {
		return
	}
	keys, err := k.States.Keys(ctx)
	if err != nil {
		k.Log.Error("listing the items' states", "kind", k.Name, "error", err)
		return
	}
	orphans, err := k.Shard.Orphans(ctx, exists, keys)
	if err != nil {
		k.Log.Error("finding what deleted items left", "kind", k.Name, "error", err)
		return
	}
	for _, uid := range orphans {
		if err := k.States.Delete(ctx, uid); err != nil {
			k.Log.Error("removing a deleted item's state", "kind", k.Name, "uid", uid, "error", err)
		}
	}
}
