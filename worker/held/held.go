// Package held keeps the items of one kind (watches, transfers) that a
// worker replica holds: it takes the replica's share through
// worker/shard, runs a task for each item it took, stops the tasks of
// items given back or lost, and removes the state and Lease that deleted
// items left behind.
package held

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/worker/shard"
	"github.com/sftpgate/sftpgate/worker/statestore"
)

// Items are the items of one kind this replica holds, each run by a task
// of type T.
type Items[T any] struct {
	Shard  *shard.Shard
	States *statestore.Store
	// Kind names the items in log lines, such as "watch".
	Kind string
	// Log is where they log; nil logs nothing.
	Log *slog.Logger

	mu      sync.Mutex
	running map[string]*task[T]
	syncs   int
}

func (h *Items[T]) log() *slog.Logger { return logging.OrDiscard(h.Log) }

type task[T any] struct {
	t      T
	cancel context.CancelFunc
	done   chan struct{}
}

// Run calls sync every interval, and at once when kick has a value (nil:
// never), until ctx ends; then it stops every task, which store what they
// hold, and gives the items back for another replica to take at once.
func (h *Items[T]) Run(ctx context.Context, interval time.Duration, kick <-chan struct{}, sync func(context.Context)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		sync(ctx)
		select {
		case <-ctx.Done():
			h.StopAll()
			leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return h.Shard.Leave(leaveCtx)
		case <-tick.C:
		case <-kick:
		}
	}
}

// sweepEvery is how many syncs apart the sweep runs: about a minute.
const sweepEvery = 12

// Start makes the task of a newly held item: its value, and the function
// that runs it until ctx ends (storing what it holds before it returns).
// cancel ends that ctx, for a task that finds it lost its item.
type Start[T any] func(uid string, cancel context.CancelFunc) (T, func(ctx context.Context))

// Sync takes the replica's share of items (uids, in the order the share
// prefers), starts the tasks of those it took and stops those of the ones
// it gave back or lost. exists says which items' objects exist, finished
// or not: the state of one given back that no longer exists is removed.
// It returns the tasks of the items it holds.
func (h *Items[T]) Sync(ctx context.Context, items []string, exists map[string]bool, start Start[T]) map[string]T {
	if h.syncs%sweepEvery == 0 {
		h.sweep(ctx, exists)
	}
	h.syncs++
	keep, drop, err := h.Shard.Sync(ctx, items)
	if err != nil {
		h.log().Error("taking a share of the items", "kind", h.Kind, "error", err)
	}
	for _, uid := range drop {
		h.Stop(uid)
		if !exists[uid] {
			if err := h.States.Delete(ctx, uid); err != nil {
				h.log().Error("removing a deleted item's state", "kind", h.Kind, "uid", uid, "error", err)
			}
		}
		if err := h.Shard.Release(ctx, uid); err != nil {
			h.log().Error("giving an item back", "kind", h.Kind, "uid", uid, "error", err)
		}
	}
	h.mu.Lock()
	var lost []string
	for uid, t := range h.running {
		switch {
		case keep == nil && err != nil:
			// The sync failed (the API server did not answer): a task
			// stops only once its hold lapsed, not on one failed call.
			if !h.Shard.Holds(uid) {
				lost = append(lost, uid)
			}
		case !slices.Contains(keep, uid):
			lost = append(lost, uid)
		default:
			select {
			case <-t.done:
				// It ended while the item is still held (it found its
				// state taken meanwhile, say): a new task starts below.
				lost = append(lost, uid)
			default:
			}
		}
	}
	h.mu.Unlock()
	for _, uid := range lost {
		h.Stop(uid)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running == nil {
		h.running = map[string]*task[T]{}
	}
	held := make(map[string]T, len(keep))
	for _, uid := range keep {
		if running := h.running[uid]; running != nil {
			held[uid] = running.t
			continue
		}
		tctx, cancel := context.WithCancel(ctx)
		t, run := start(uid, cancel)
		entry := &task[T]{t: t, cancel: cancel, done: make(chan struct{})}
		h.running[uid] = entry
		held[uid] = t
		go func() {
			defer close(entry.done)
			run(tctx)
		}()
	}
	return held
}

// sweep removes the states and Leases of items deleted while no live
// replica held them.
func (h *Items[T]) sweep(ctx context.Context, exists map[string]bool) {
	keys, err := h.States.Keys(ctx)
	if err != nil {
		h.log().Error("listing the items' states", "kind", h.Kind, "error", err)
		return
	}
	orphans, err := h.Shard.Orphans(ctx, exists, keys)
	if err != nil {
		h.log().Error("finding what deleted items left", "kind", h.Kind, "error", err)
		return
	}
	for _, uid := range orphans {
		// The state first: a Lease left is found again by the next sweep.
		if err := h.States.Delete(ctx, uid); err != nil {
			h.log().Error("removing a deleted item's state", "kind", h.Kind, "uid", uid, "error", err)
			continue
		}
		if err := h.Shard.Remove(ctx, uid); err != nil {
			h.log().Error("removing a deleted item's Lease", "kind", h.Kind, "uid", uid, "error", err)
		}
	}
}

// Get is uid's task, if this replica runs it.
func (h *Items[T]) Get(uid string) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.running[uid]; t != nil {
		return t.t, true
	}
	var zero T
	return zero, false
}

// Each calls fn with each task, under the lock: fn must be quick.
func (h *Items[T]) Each(fn func(T)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.running {
		fn(t.t)
	}
}

// Stop stops uid's task, if it runs, and waits for it to store what it
// holds.
func (h *Items[T]) Stop(uid string) {
	h.mu.Lock()
	t := h.running[uid]
	delete(h.running, uid)
	h.mu.Unlock()
	if t != nil {
		t.cancel()
		<-t.done
	}
}

// StopAll stops every task, for the replica's end.
func (h *Items[T]) StopAll() {
	h.mu.Lock()
	uids := make([]string, 0, len(h.running))
	for uid := range h.running {
		uids = append(uids, uid)
	}
	h.mu.Unlock()
	for _, uid := range uids {
		h.Stop(uid)
	}
}
