package transfers

import (
	"context"
	"sync"
	"time"
)

// queue hands a transfer's waiting files to its copies: first each in
// turn, then those that failed once their next try is due.
type queue struct {
	mu       sync.Mutex
	ready    []int
	later    map[int]time.Time
	inFlight int
	// changed is closed (and replaced) when a file ends, for the copies
	// waiting for a retry or for the end.
	changed chan struct{}
}

func newQueue() *queue {
	return &queue{later: map[int]time.Time{}, changed: make(chan struct{})}
}

// next is the next file to copy; false when every file ended, or ctx did.
func (q *queue) next(ctx context.Context) (int, bool) {
	for {
		q.mu.Lock()
		if len(q.ready) > 0 {
			i := q.ready[0]
			q.ready = q.ready[1:]
			q.inFlight++
			q.mu.Unlock()
			return i, true
		}
		now := time.Now()
		var first time.Time
		for i, at := range q.later {
			if !at.After(now) {
				delete(q.later, i)
				q.inFlight++
				q.mu.Unlock()
				return i, true
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
		if len(q.later) == 0 && q.inFlight == 0 {
			q.mu.Unlock()
			return 0, false
		}
		changed := q.changed
		q.mu.Unlock()
		wait := time.Hour
		if !first.IsZero() {
			wait = time.Until(first)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, false
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// take is the first ready file that fits, without waiting; false when
// none is ready now.
func (q *queue) take(fits func(int) bool) (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, i := range q.ready {
		if fits(i) {
			q.ready = append(q.ready[:k], q.ready[k+1:]...)
			q.inFlight++
			return i, true
		}
	}
	return 0, false
}

// end says file i's try ended; retryAt, when the file is tried again.
func (q *queue) end(i int, retryAt *time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight--
	if retryAt != nil {
		q.later[i] = *retryAt
	}
	close(q.changed)
	q.changed = make(chan struct{})
}
