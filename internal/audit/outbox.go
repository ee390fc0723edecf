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

// perNamespaceBytes is the share of b.Bytes one namespace's records may
// take: one tenant's large records never leave the others no room.
func (b Bounds) perNamespaceBytes() int64 { return b.Bytes / 4 }

// held is what a trail holds of one namespace's records: those not yet
// stored, in the order of their Seq, and the runs of those dropped.
type held struct {
	records []Record
	bytes   int64
	lost    []Span
}

// dropOldest drops h's n oldest records, noting them as lost, and says
// how many bytes they took.
func (h *held) dropOldest(n int) (bytes int64) {
	for _, r := range h.records[:n] {
		bytes += heldBytes(r)
		if k := len(h.lost); k > 0 && h.lost[k-1].Replica == r.Replica && h.lost[k-1].To+1 == r.Seq {
			h.lost[k-1].To = r.Seq
		} else {
			h.lost = append(h.lost, Span{Replica: r.Replica, From: r.Seq, To: r.Seq})
		}
	}
	h.records = slices.Delete(h.records, 0, n)
	h.bytes -= bytes
	return bytes
}

// excess is how many of h's oldest records must go for it to hold at most
// count records of at most bytes.
func (h *held) excess(count int, bytes int64) int {
	n, b := 0, h.bytes
	for n < len(h.records) && (len(h.records)-n > count || b > bytes) {
		b -= heldBytes(h.records[n])
		n++
	}
	return n
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

// hold keeps r, linked, until the next store, within the bounds.
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
	h.bytes += heldBytes(r)
	o.total++
	o.bytes += heldBytes(r)
	o.within(h)
}

// within drops the oldest held records until o is within its bounds: h's
// past its namespace's own, then, past the totals, those of whichever
// namespace holds the most bytes, so that no tenant's records push out
// another's smaller share.
func (o *outbox) within(h *held) {
	if n := h.excess(o.bounds.PerNamespace, o.bounds.perNamespaceBytes()); n > 0 {
		o.dropFrom(h, n)
	}
	for o.total > o.bounds.Total || o.bytes > o.bounds.Bytes {
		var largest *held
		for _, x := range o.held {
			if largest == nil || x.bytes > largest.bytes {
				largest = x
			}
		}
		if largest == nil || len(largest.records) == 0 {
			return
		}
		overCount, overBytes := max(o.total-o.bounds.Total, 0), max(o.bytes-o.bounds.Bytes, 0)
		o.dropFrom(largest, max(largest.excess(len(largest.records)-overCount, largest.bytes-overBytes), 1))
	}
}

func (o *outbox) dropFrom(h *held, n int) {
	o.bytes -= h.dropOldest(n)
	o.total -= n
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
// since (of later Seqs), within the bounds.
func (o *outbox) giveBack(namespace string, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.held[namespace]; now != nil {
		h.records = append(h.records, now.records...)
		h.bytes += now.bytes
		h.lost = append(h.lost, now.lost...)
		o.total -= len(now.records)
		o.bytes -= now.bytes
	}
	o.held[namespace] = h
	o.total += len(h.records)
	o.bytes += h.bytes
	o.within(h)
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

// store stores what is held, each namespace's records in one Keep, after
// drop records naming what was dropped since the last store. What a store
// fails to keep is held again for the next.
func (t *Trail) store(ctx context.Context) {
	t.storing.Lock()
	defer t.storing.Unlock()
	// Taking and linking the drop records is one step of the chains: no
	// record comes between, so what is stored is a run of its chain.
	t.linking.Lock()
	taken := t.out.take()
	var drops []Record
	for ns, h := range taken {
		for _, drop := range DropRecords(ns, h.lost) {
			if t.Dropped != nil {
				t.Dropped.Add(float64(drop.Count))
			}
			drop = t.Chains.Link(drop)
			h.records, h.bytes = append(h.records, drop), h.bytes+heldBytes(drop)
			drops = append(drops, drop)
		}
		h.lost = nil
	}
	t.linking.Unlock()
	for _, drop := range drops {
		t.log(ctx, drop)
	}
	for ns, h := range taken {
		if len(h.records) == 0 {
			continue
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

// DropRecords are the drop records (not linked) saying that the records
// of lost, of namespace, were dropped: at most MaxLost spans each.
func DropRecords(namespace string, lost []Span) []Record {
	var out []Record
	for part := range slices.Chunk(lost, MaxLost) {
		var count int64
		for _, s := range part {
			count += int64(s.To - s.From + 1) //nolint:gosec // a span is of one chain, far below 2^63 records
		}
		out = append(out, Record{Action: ActionDropped, Actor: Actor{Kind: ActorSftpgate}, Namespace: namespace,
			Count: count, Lost: part, Result: ResultOK})
	}
	return out
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
