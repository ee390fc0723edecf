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
// It says how many of them, from the first, are stored, whatever its
// error: those are never given to it again.
type Keeper interface {
	Keep(ctx context.Context, namespace string, records []Record) (stored int, err error)
}

// Bounds are what a replica holds of records not yet stored. The trail
// stores every StoreEvery, so PerNamespace is the most records of one
// namespace a replica stores a second; past a bound, the oldest held are
// dropped, and the next store says so in a drop record.
type Bounds struct {
	PerNamespace, Total int
	// Bytes bounds the memory the held records take (heldBytes each).
	Bytes int64
}

// Defaults of the bounds: above what one gateway replica serves of small
// writes a second. A small record held takes about 1 KB; the largest,
// about 140 KB counted (twice its line): Bytes bounds
// the whole whatever they hold.
const (
	DefaultPerNamespace       = 10000
	DefaultTotal              = 40000
	DefaultBytes        int64 = 64 << 20
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
	if b.Bytes < 1 {
		b.Bytes = DefaultBytes
	}
	return b
}

// heldBytes is what r takes held: its line, and its members, which are
// at most as long again, and the record itself.
func heldBytes(r Record) int64 { return int64(2*len(r.line)) + 256 }

// held is what a trail holds of one namespace's records: those not yet
// stored, and a run of those dropped.
type held struct {
	records []Record
	bytes   int64
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
	bytes int64
	// closed ends Run.
	closed    chan struct{}
	closeOnce sync.Once
}

// hold keeps r, linked, until the next store; past the bounds, the
// oldest records of r's namespace (r among them, if it holds no other)
// are dropped. Records of no namespace are only logged.
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
	h.bytes += heldBytes(r)
	o.total++
	o.bytes += heldBytes(r)
	o.within(h)
}

// within drops h's oldest records, counted in o's, until o is within
// the bounds.
func (o *outbox) within(h *held) {
	for len(h.records) > 0 && (len(h.records) > o.bounds.PerNamespace ||
		o.total > o.bounds.Total || o.bytes > o.bounds.Bytes) {
		r := h.records[0]
		if h.count == 0 {
			h.lost = Span{Replica: r.Replica, From: r.Seq}
		}
		h.lost.To = r.Seq
		h.count++
		h.records = slices.Delete(h.records, 0, 1)
		h.bytes -= heldBytes(r)
		o.total--
		o.bytes -= heldBytes(r)
	}
}

// take takes what is held, by namespace.
func (o *outbox) take() map[string]*held {
	o.mu.Lock()
	defer o.mu.Unlock()
	taken := o.held
	o.held, o.total, o.bytes = map[string]*held{}, 0, 0
	return taken
}

// giveBack holds again records a store failed to keep, before those held
// since, within the bounds.
func (o *outbox) giveBack(namespace string, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.held[namespace]; now != nil {
		h.records = append(h.records, now.records...)
		h.bytes += now.bytes
		o.total -= len(now.records)
		o.bytes -= now.bytes
		if now.count > 0 {
			if h.count == 0 {
				h.lost = now.lost
			}
			h.lost.To, h.count = now.lost.To, h.count+now.count
		}
	}
	o.total += len(h.records)
	o.bytes += h.bytes
	o.within(h)
	o.held[namespace] = h
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
			h.records, h.bytes, h.count, h.lost = append(h.records, drop), h.bytes+heldBytes(drop), 0, Span{}
		}
		kctx, cancel := context.WithTimeout(ctx, storeTimeout)
		stored, err := t.out.keeper.Keep(kctx, ns, h.records)
		cancel()
		if err != nil {
			if t.Log != nil {
				t.Log.Error("storing audit records", "namespace", ns, "records", len(h.records)-stored, "error", err)
			}
			for _, r := range h.records[:stored] {
				h.bytes -= heldBytes(r)
			}
			h.records = h.records[stored:]
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
	fs.Int64Var(&b.Bytes, "audit-bytes-held", DefaultBytes,
		"Bytes of memory the audit records this replica holds before it stores them take at most; past it, the oldest are dropped and a record says so.")
}
