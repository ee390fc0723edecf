package audit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// keeper keeps what it is given, or fails while failing is set, after
// keeping the first partly of them.
type keeper struct {
	mu      sync.Mutex
	kept    map[string][]Record
	failing bool
	partly  int
	// during runs once in the next Keep, as records made while a store
	// is under way.
	during func()
}

func (k *keeper) Keep(_ context.Context, ns string, records []Record) (int, error) {
	if during := k.during; during != nil {
		k.during = nil
		during()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failing {
		n := min(k.partly, len(records))
		k.kept[ns] = append(k.kept[ns], records[:n]...)
		return n, errors.New("the API server is away")
	}
	k.kept[ns] = append(k.kept[ns], records...)
	return len(records), nil
}

// TestOutboxBounds: past a namespace's bound the oldest held records are
// dropped, never another namespace's; the next store records the drop,
// naming the records lost; a store that fails holds its records again,
// within the same bounds; Close stores the chains' closing records; and
// what was kept, with the drop record, verifies with nothing missing
// that is not said.
func TestOutboxBounds(t *testing.T) {
	k := &keeper{kept: map[string][]Record{}}
	tr := &Trail{Chains: &Chains{Replica: "r"}}
	tr.Keep(k, Bounds{PerNamespace: 5, Total: 8})
	ctx := context.Background()
	write := func(ns string, n int) {
		for range n {
			tr.Record(ctx, Record{Action: "gateway.write", Namespace: ns, Result: ResultOK})
		}
	}
	write("a", 7)                                                                // 1 and 2 dropped
	write("b", 3)                                                                // within the total of 8: a is left alone
	tr.Record(ctx, Record{Action: "webui.login", Result: "invalid_credentials"}) // no namespace: logged only
	tr.store(ctx)
	if got := seqs(k.kept["a"]); !slices.Equal(got, []uint64{3, 4, 5, 6, 7, 8}) {
		t.Errorf("a kept %v", got)
	}
	if drop := k.kept["a"][5]; drop.Action != ActionDropped || drop.Count != 2 || !slices.Equal(drop.Lost, []Span{{Replica: "r", From: 1, To: 2}}) {
		t.Errorf("drop record %s", drop)
	}
	if got := seqs(k.kept["b"]); len(got) != 3 {
		t.Errorf("b kept %v", got)
	}

	k.failing = true
	write("a", 4) // 9..12
	tr.store(ctx)
	write("a", 3) // 13..15: with 9..12 held again, 9 and 10 past the bound
	k.failing = false
	tr.Close(ctx)
	if got := seqs(k.kept["a"]); !slices.Equal(got, []uint64{3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17}) {
		t.Errorf("a kept %v", got)
	}
	reports := Verify(k.kept["a"])
	if len(reports) != 1 || !reports[0].Whole() || !reports[0].Closed ||
		!slices.Equal(reports[0].Dropped, []Gap{{1, 2}, {9, 10}}) {
		t.Errorf("%+v", reports)
	}
}

// TestOutboxPartlyStored: a store that fails after keeping some of the
// records is given only the rest again: each record is kept once.
func TestOutboxPartlyStored(t *testing.T) {
	k := &keeper{kept: map[string][]Record{}, failing: true, partly: 3}
	tr := (&Trail{Chains: &Chains{Replica: "r"}}).Keep(k, Bounds{})
	ctx := context.Background()
	for range 5 {
		tr.Record(ctx, Record{Action: "gateway.write", Namespace: "a", Result: ResultOK})
	}
	tr.store(ctx) // 1..3 kept
	tr.store(ctx) // 4, 5 kept
	k.failing = false
	tr.Close(ctx)
	if got := seqs(k.kept["a"]); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("kept %v", got)
	}
}

// TestOutboxBytes: the bytes held are bounded whatever the count allows:
// records of the largest kind are dropped past it, and said so.
func TestOutboxBytes(t *testing.T) {
	k := &keeper{kept: map[string][]Record{}}
	tr := (&Trail{Chains: &Chains{Replica: "r"}}).Keep(k, Bounds{Bytes: 1 << 20})
	ctx := context.Background()
	huge := strings.Repeat("\x80", 1<<20)
	for range 100 {
		tr.Record(ctx, Record{Action: "gateway.write", Namespace: "a", RequestID: huge, Paths: slices.Repeat([]string{huge}, 100), Result: ResultOK})
	}
	if tr.out.bytes > 1<<20 || tr.out.total == 0 {
		t.Fatalf("held %d bytes in %d records, bound 1 MiB", tr.out.bytes, tr.out.total)
	}
	tr.store(ctx)
	kept := k.kept["a"]
	drop := kept[len(kept)-1]
	if drop.Action != ActionDropped || int(drop.Count)+len(kept)-1 != 100 {
		t.Errorf("kept %d, drop record %s", len(kept), drop)
	}
}

func seqs(records []Record) []uint64 {
	var out []uint64
	for _, r := range records {
		out = append(out, r.Seq)
	}
	slices.Sort(out)
	return out
}

// TestOutboxDropsDuringAFailedStore: records dropped while a store is
// under way, the store then failing and its records dropped in turn, are
// named by drop records that verify: every gap said, none backwards.
func TestOutboxDropsDuringAFailedStore(t *testing.T) {
	k := &keeper{kept: map[string][]Record{}, failing: true}
	tr := (&Trail{Chains: &Chains{Replica: "r"}}).Keep(k, Bounds{PerNamespace: 5})
	ctx := context.Background()
	write := func(n int) {
		for range n {
			tr.Record(ctx, Record{Action: "gateway.write", Namespace: "a", Result: ResultOK})
		}
	}
	write(5)                       // 1..5
	k.during = func() { write(8) } // 6..13: 6..8 dropped past the bound
	tr.store(ctx)                  // fails: 1..5 held again before 9..13, and dropped
	k.failing = false
	tr.store(ctx)
	reports := Verify(k.kept["a"])
	if len(reports) != 1 || !reports[0].Whole() || !slices.Equal(seqs(k.kept["a"]), []uint64{9, 10, 11, 12, 13, 14}) {
		t.Fatalf("kept %v: %+v", seqs(k.kept["a"]), reports)
	}
	if !slices.Equal(reports[0].Dropped, []Gap{{1, 5}, {6, 8}}) {
		t.Errorf("dropped %v, want 1 to 8", reports[0].Dropped)
	}
}

// TestOutboxTenantsApart: a namespace of large records takes at most its
// share of the bytes, and past the totals the namespace holding most gives
// way: another's few records are all kept, with no drop record.
func TestOutboxTenantsApart(t *testing.T) {
	k := &keeper{kept: map[string][]Record{}}
	tr := (&Trail{Chains: &Chains{Replica: "r"}}).Keep(k, Bounds{Bytes: 4 << 20, Total: 50})
	ctx := context.Background()
	huge := strings.Repeat("\x01", 4000)
	for i := range 200 {
		for _, ns := range []string{"a", "b", "c", "d", "e"} {
			tr.Record(ctx, Record{Action: "gateway.write", Namespace: ns, Paths: slices.Repeat([]string{huge}, MaxPaths), Result: ResultOK})
		}
		if i%20 == 0 {
			tr.Record(ctx, Record{Action: "gateway.read", Namespace: "victim", Result: ResultOK})
		}
	}
	if tr.out.bytes > 4<<20 || tr.out.total > 50 {
		t.Fatalf("held %d bytes, %d records", tr.out.bytes, tr.out.total)
	}
	tr.store(ctx)
	if got := k.kept["victim"]; len(got) != 10 || slices.ContainsFunc(got, func(r Record) bool { return r.Action == ActionDropped }) {
		t.Errorf("the victim's kept records: %v", seqs(got))
	}
	for _, ns := range []string{"a", "b", "c", "d", "e"} {
		if rep := Verify(k.kept[ns]); len(rep) != 1 || !rep[0].Whole() || len(rep[0].Dropped) == 0 {
			t.Errorf("%s: %+v", ns, rep)
		}
	}
}

// BenchmarkHeldAtBound: the heap a trail's held records take at the
// default bound of bytes, of the largest records a stranger can make,
// against what the bound counts (docs/audit.md).
func BenchmarkHeldAtBound(b *testing.B) {
	huge := strings.Repeat("\x01", 1<<20)
	paths := slices.Repeat([]string{huge}, MaxPaths)
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		tr := (&Trail{Chains: &Chains{Replica: "r"}}).Keep(&keeper{kept: map[string][]Record{}}, Bounds{})
		for range 2000 {
			tr.Record(context.Background(), Record{Action: "gateway.write", Namespace: "a", RequestID: huge, Client: huge,
				Connection: huge, Object: huge, Paths: paths, Result: huge})
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(tr.out.bytes)/(1<<20), "counted-MiB")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(tr.out.total), "records")
		runtime.KeepAlive(tr)
	}
}
