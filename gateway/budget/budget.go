// Package budget bounds the memory a gateway replica holds for request
// bodies and answers in flight. Each request keeps a Ledger of what it
// holds; a hold that does not fit waits briefly for others to finish, then
// is refused, so that a burst of large requests is answered 503 rather
// than growing the process until the kernel kills it, and every tenant
// with it.
package budget

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrBusy is a hold that found no room for the whole wait.
var ErrBusy = errors.New("the gateway's memory budget is in use by other requests")

// TooLargeError is a hold larger than one hold may ever have (the budget
// less its reserve for small holds).
type TooLargeError struct{ Size, Budget int64 }

func (e *TooLargeError) Error() string {
	return "needs " + strconv.FormatInt(e.Size, 10) + " bytes, more than the gateway's memory budget allows one request, " +
		strconv.FormatInt(e.Budget, 10)
}

// Budget is the bytes one replica may hold for requests at once. Large
// holds may take all but a reserve, which only small holds (a small write's
// body, a stat's answer) may use: a tenant's burst of large reads or
// writes cannot keep others' small requests out.
type Budget struct {
	size, reserve int64
	wait          time.Duration

	mu   sync.Mutex
	held int64
	// freed is closed (and replaced) when a hold is released while holds
	// wait for room (waiting): a release no one waits for makes no new
	// channel.
	freed   chan struct{}
	waiting bool
	// parts are the bytes each namespace's object store uploads hold
	// (Parts), within half of what large holds may take.
	parts map[string]int64

	// watch, when set, hears the bytes held rounded up to a step, as they
	// change by a step or more (see Watch).
	watch          func(int64)
	step, reported int64
}

// SmallHold is the largest hold that may use the reserve.
const SmallHold = 64 << 10

// New returns a budget of size bytes, an eighth of it reserved for small
// holds; a hold waits at most wait for room.
func New(size int64, wait time.Duration) *Budget {
	return &Budget{size: size, reserve: size / 8, wait: wait, freed: make(chan struct{}), parts: map[string]int64{}}
}

// Size is the whole budget.
func (b *Budget) Size() int64 { return b.size }

// Held is the bytes held now.
func (b *Budget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// take holds n if there is room, within limit and, for a namespace's
// parts (ns set), its share; or returns a channel closed when there may
// be.
func (b *Budget) take(n, limit int64, ns string, share int64) (bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n <= limit && (ns == "" || b.parts[ns]+n <= share) {
		b.held += n
		if ns != "" {
			b.parts[ns] += n
		}
		b.report()
		return true, nil
	}
	b.waiting = true
	return false, b.freed
}

func (b *Budget) release(n int64, ns string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if ns != "" {
		if b.parts[ns] -= n; b.parts[ns] <= 0 {
			delete(b.parts, ns)
		}
	}
	b.report()
	if b.waiting {
		close(b.freed)
		b.freed, b.waiting = make(chan struct{}), false
	}
}

// Watch has fn hear the bytes held, rounded up to a multiple of step: at
// once, then whenever they rise past what it last heard, or fall a whole
// step below it (so that holds coming and going at a step's edge do not
// call it each time). fn runs with the budget locked: it must be quick
// and must not use the budget.
func (b *Budget) Watch(step int64, fn func(held int64)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watch, b.step, b.reported = fn, step, -1
	b.report()
}

func (b *Budget) report() {
	if b.watch == nil {
		return
	}
	up := (b.held + b.step - 1) / b.step * b.step
	if up > b.reported || up+b.step < b.reported {
		b.reported = up
		b.watch(up)
	}
}

// Ledger is what one request holds. A nil one holds nothing and grants
// every hold (for code run without a budget, as in tests of the commands
// alone).
type Ledger struct {
	b *Budget
	// ctx is the request's: its end stops a wait. Its Done and Err are
	// called only then (a method value kept here cost an allocation per
	// request).
	ctx  context.Context
	held int64
}

// Ledger starts a request's ledger; ctx is the request's, whose end stops
// a wait. Release it when the answer has been sent.
func (b *Budget) Ledger(ctx context.Context) Ledger {
	return Ledger{b: b, ctx: ctx}
}

// Hold takes n more bytes for the request, waiting for room if there is
// none. It returns ErrBusy when the wait ends without room, a
// *TooLargeError when n exceeds what one hold may ever have, or the
// request context's error.
func (l *Ledger) Hold(n int64) error {
	if l == nil || l.b == nil || n <= 0 {
		return nil
	}
	b := l.b
	limit := b.size
	if n > SmallHold {
		limit -= b.reserve
	}
	if n > limit {
		return &TooLargeError{Size: n, Budget: limit}
	}
	if err := b.hold(l.ctx, n, limit, "", 0); err != nil {
		return err
	}
	l.held += n
	return nil
}

// hold takes n within limit (and ns's share, for its parts), waiting at
// most the budget's wait for room, or until ctx ends.
func (b *Budget) hold(ctx context.Context, n, limit int64, ns string, share int64) error {
	var expired <-chan time.Time
	for {
		ok, freed := b.take(n, limit, ns, share)
		if ok {
			return nil
		}
		if expired == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-freed:
		case <-expired:
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Held is what the request holds.
func (l *Ledger) Held() int64 {
	if l == nil {
		return 0
	}
	return l.held
}

// Release gives back everything the request holds.
func (l *Ledger) Release() {
	if l == nil || l.b == nil || l.held == 0 {
		return
	}
	l.b.release(l.held, "")
	l.held = 0
}

// Parts is the budget as namespace ns's object store uploads hold their
// parts' buffers in it (s3fs.Memory): outside any request's ledger,
// waiting as Hold does, and at most half of what large holds may take for
// one namespace, so that one tenant's uploads leave room for another's.
func (b *Budget) Parts(ns string) Parts { return Parts{b, ns} }

// Parts holds a namespace's uploads' parts' buffers in a budget.
type Parts struct {
	b  *Budget
	ns string
}

// Acquire holds n bytes, to be given back with Release.
func (p Parts) Acquire(ctx context.Context, n int64) error {
	if n > p.Size() {
		return &TooLargeError{Size: n, Budget: p.Size()}
	}
	return p.b.hold(ctx, n, p.b.size-p.b.reserve, p.ns, p.Size())
}

// Release gives back n bytes taken with Acquire.
func (p Parts) Release(n int64) { p.b.release(n, p.ns) }

// Size is the most a namespace's parts may hold: half of what large
// holds may.
func (p Parts) Size() int64 { return (p.b.size - p.b.reserve) / 2 }

// DefaultSize is a quarter of the memory limit of the container the
// gateway runs in (cgroup v2 or v1), or 64 MiB without one. The rest of
// the limit is for what the budget does not count: the process itself,
// its sessions' buffers, and garbage between collections.
func DefaultSize() int64 {
	const fallback = 64 << 20
	limit, ok := cgroupLimit()
	if !ok {
		return fallback
	}
	return max(limit/4, 8<<20)
}

// cgroupLimit reads the memory limit of this process's cgroup.
func cgroupLimit() (int64, bool) {
	for _, file := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		raw, err := os.ReadFile(file) //nolint:gosec // one of the two paths above
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		// "max" (v2) or a page-rounded maximum (v1) means none.
		if err != nil || limit <= 0 || limit >= 1<<60 {
			return 0, false
		}
		return limit, true
	}
	return 0, false
}
