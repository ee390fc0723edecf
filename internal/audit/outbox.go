package audit

import (
	"context"
	"flag"
	"slices"
	"sync"
	"time"
)

// Keeper stores records of a namespace, in order, in the outbox the
// namespace's records are delivered and shown from (package auditstore).
type Keeper interface {
	Keep(ctx context.Context, namespace string, records []Record) error
}

// Bounds are what a replica holds of records not yet stored. The trail
// stores every StoreEvery, so PerNamespace is the most records of one
// namespace a replica stores a second; past a bound, the oldest held are
// dropped, and the next store says so in a drop record.
type Bounds struct {
	PerNamespace, Total int
}

// Defaults of the bounds: above what one gateway replica serves of small
// writes a second; a record held takes about 800 bytes (its members and
// its line), so a replica holds at most about 32 MB of them.
const (
	DefaultPerNamespace = 10000
	DefaultTotal        = 40000
)

// StoreEvery is how often a trail stores what it holds: what a replica's
// crash can lose is the records of its last StoreEvery (and of a store
// under way).
const StoreEvery = time.Second

// WithDefaults is b with each zero bound its default.
func (b Bounds) WithDefaults() Bounds {
	if b.PerNamespace < 1 {
		b.PerNamespace = DefaultPerNamespace
	}
	if b.Total < 1 {
		b.Total = DefaultTotal
	}
	return b
}

// held is what a trail holds of one namespace's records: those not yet
// stored, and a run of those dropped.
type held struct {
	records []Record
	lost    Span
	count   int64
}

// outbox is a trail's records not yet stored.
type outbox struct {
	keeper Keeper
	bounds Bounds

	mu    sync.Mutex
	held  map[string]*held
	total int
	// closed ends Run.
	closed    chan struct{}
	closeOnce sync.Once
}

// hold keeps r, linked, until the next store; past the bounds, the
// oldest record of r's namespace (or, if it holds none, r) is dropped.
// Records of no namespace are only logged.
func (o *outbox) hold(r Record) {
	if r.Namespace == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.held[r.Namespace]
	if h == nil {
		h = &held{}
		o.held[r.Namespace] = h
	}
	h.records = append(h.records, r)
	o.total++
	if len(h.records) > o.bounds.PerNamespace || o.total > o.bounds.Total {
		h.drop(1)
		o.total--
	}
}

// drop drops the n oldest held, noting them as lost.
func (h *held) drop(n int) {
	for _, r := range h.records[:n] {
		if h.count == 0 {
			h.lost = Span{Replica: r.Replica, From: r.Seq}
		}
		h.lost.To = r.Seq
		h.count++
	}
	h.records = slices.Delete(h.records, 0, n)
}

// take takes what is held, by namespace.
func (o *outbox) take() map[string]*held {
	o.mu.Lock()
	defer o.mu.Unlock()
	taken := o.held
	o.held, o.total = map[string]*held{}, 0
	return taken
}

// giveBack holds again records a store failed to keep, before those held
// since, within the bounds.
func (o *outbox) giveBack(namespace string, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.held[namespace]
	if now != nil {
		h.records = append(h.records, now.records...)
		o.total -= len(now.records)
		if now.count > 0 {
			if h.count == 0 {
				h.lost = now.lost
			}
			h.lost.To, h.count = now.lost.To, h.count+now.count
		}
	}
	over := max(len(h.records)-o.bounds.PerNamespace, o.total+len(h.records)-o.bounds.Total, 0)
	h.drop(min(over, len(h.records)))
	o.held[namespace] = h
	o.total += len(h.records)
}

// storeTimeout bounds one store of a namespace's records.
const storeTimeout = 10 * time.Second

// Run stores what the trail holds every StoreEvery until ctx ends or
// Close is called (which stores the rest). Without a Keeper it returns
// at once.
func (t *Trail) Run(ctx context.Context) {
	if t == nil || t.out == nil {
		return
	}
	tick := time.NewTicker(StoreEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.out.closed:
			return
		case <-tick.C:
			t.store(ctx)
		}
	}
}

// store stores what is held, each namespace's records in one Keep; a
// drop since the last store is recorded first. What a store fails to
// keep is held again for the next.
func (t *Trail) store(ctx context.Context) {
	t.storing.Lock()
	defer t.storing.Unlock()
	for ns, h := range t.out.take() {
		if h.count > 0 {
			drop := t.Chains.Link(Record{Action: ActionDropped, Actor: Actor{Kind: ActorSftpgate}, Namespace: ns,
				Count: h.count, Lost: []Span{h.lost}, Result: ResultOK})
			t.log(ctx, drop)
			h.records, h.count, h.lost = append(h.records, drop), 0, Span{}
		}
		kctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := t.out.keeper.Keep(kctx, ns, h.records)
		cancel()
		if err != nil {
			if t.Log != nil {
				t.Log.Error("storing audit records", "namespace", ns, "records", len(h.records), "error", err)
			}
			t.out.giveBack(ns, h)
		}
	}
}

// RegisterFlags binds b's flags to fs: the same in every component.
func RegisterFlags(fs *flag.FlagSet, b *Bounds) {
	fs.IntVar(&b.PerNamespace, "audit-records-per-namespace", DefaultPerNamespace,
		"Audit records of one namespace this replica stores a second at most; past it, the oldest are dropped and a record says so.")
	fs.IntVar(&b.Total, "audit-records-held", DefaultTotal,
		"Audit records of all namespaces this replica holds before it stores them (every second) at most; past it, the oldest are dropped and a record says so.")
}
