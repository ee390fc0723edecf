package watch

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// TestStateRoundTrip: a state of 100,000 files, deep and varied, comes
// back as it was, and compactly.
func TestStateRoundTrip(t *testing.T) {
	s := &State{SpecKey: "key", Seen: map[string]Stat{}, Delivered: 7, Failed: 2, DeadLettered: 1}
	for i := range 100_000 {
		p := fmt.Sprintf("partner-%02d/%04d/invoice-%07d-%x.csv", i%37, i/100, i, i*2654435761)
		s.Seen[p] = Stat{Size: int64(i) * 1031, ModTime: 1_700_000_000 + int64(i)}
	}
	s.Outbox = []Pending{{Event: Event{Type: v1alpha1.WatchCreated, File: File{Path: "a/b.csv", Size: 3, ModTime: 9}}, ID: "id-1", Attempts: 2,
		Observed: time.UnixMilli(1_700_000_000_123)}}
	s.Running = []Running{{Event: Event{Type: v1alpha1.WatchModified, File: File{Path: "c.pgp", Size: 5, ModTime: 8}}, ID: "id-0",
		Made: time.UnixMilli(1_700_000_000_456), Failed: true}}
	s.Started, s.Succeeded, s.TransfersFailed, s.LastTransfer = 4, 2, 1, "w-id-0"
	b, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100,000 files encode to %d bytes", len(b))
	got, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Error("the state does not come back as it was")
	}
	if (&State{}).Seen != nil {
		t.Fatal()
	}
	empty, _ := (&State{SpecKey: "k"}).Encode()
	if got, err := DecodeState(empty); err != nil || got.Seen != nil {
		t.Errorf("a state before the first poll: %v, %v", got, err)
	}
	// Without transfers, version 1, which the release before reads.
	if b, _ := (&State{SpecKey: "k", Delivered: 3}).Encode(); decodedVersion(t, b) != 1 {
		t.Error("a state without transfers is not written as version 1")
	}
	if decodedVersion(t, b) != 2 {
		t.Error("a state with transfers is not written as version 2")
	}
	// With an object store's tags, version 3, and the tags come back.
	tagged := &State{SpecKey: "k", Seen: map[string]Stat{"a.csv": {Size: 1, ModTime: 2, Tag: 1 << 63}, "b.csv": {Size: 3, ModTime: 4}}}
	b, _ = tagged.Encode()
	if got, err := DecodeState(b); decodedVersion(t, b) != 3 || err != nil || !reflect.DeepEqual(got.Seen, tagged.Seen) {
		t.Errorf("a state with tags: version %d, %v, %v", decodedVersion(t, b), got, err)
	}
	// With files whose afterDelivery is still to be done, version 4, and
	// they come back.
	unsettled := &State{SpecKey: "k", Unsettled: []Unsettled{{Event: Event{Type: v1alpha1.WatchCreated, File: File{Path: "a.csv", Size: 1, ModTime: 2}}, OK: true},
		{Event: Event{Type: v1alpha1.WatchModified, File: File{Path: "b.csv", Size: 3, ModTime: 4}}}}}
	b, _ = unsettled.Encode()
	if got, err := DecodeState(b); decodedVersion(t, b) != 4 || err != nil || !reflect.DeepEqual(got.Unsettled, unsettled.Unsettled) {
		t.Errorf("a state with unsettled files: version %d, %v, %v", decodedVersion(t, b), got, err)
	}
	if _, err := DecodeState([]byte("not gzip")); err == nil {
		t.Error("garbage decodes")
	}
}

// TestStateAcrossReleases: a state the release before wrote (gzip's
// best compression, testdata/state-v3.gz) reads back, and this release
// writes the same bytes before gzip, which that release reads, so that a
// rolling upgrade or a rollback keeps the states.
func TestStateAcrossReleases(t *testing.T) {
	s := &State{SpecKey: "sftpconnection/box:/incoming:2:*.csv", Seen: map[string]Stat{}, Delivered: 100, Failed: 3, DeadLettered: 1}
	for i := range 100 {
		p := fmt.Sprintf("incoming/partner-%02d/%04d/invoice-%07d.csv", i%7, i/10, i)
		s.Seen[p] = Stat{Size: 1024 + int64(i*7919)%65536, ModTime: 1_700_000_000 + int64(i)*61, Tag: uint64(i) * 0x9e3779b97f4a7c15}
	}
	s.Outbox = []Pending{{Event: Event{Type: v1alpha1.WatchCreated, File: File{Path: "incoming/partner-00/0000/invoice-0000000.csv", Size: 1024,
		ModTime: 1_700_000_000}}, ID: "0192b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b", Attempts: 2, Observed: time.UnixMilli(1_700_000_000_123)}}
	s.Running = []Running{{Event: Event{Type: v1alpha1.WatchModified, File: File{Path: "incoming/x.pgp", Size: 5, ModTime: 8}}, ID: "id-0",
		Made: time.UnixMilli(1_700_000_000_456), Failed: true}}
	s.Started, s.Succeeded, s.TransfersFailed, s.LastTransfer = 4, 2, 1, "w-id-0"
	before, err := os.ReadFile("testdata/state-v3.gz")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeState(before); err != nil || !reflect.DeepEqual(got, s) {
		t.Errorf("the release before's state reads as %+v, %v", got, err)
	}
	now, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gunzip(t, now), gunzip(t, before)) {
		t.Error("this release writes a state otherwise than the release before, which would not read it")
	}
	t.Logf("%d bytes stored, %d by the release before", len(now), len(before))
	raw := gunzip(t, before)
	for i := range len(raw) {
		if _, err := decode(raw[:i]); err == nil {
			t.Fatalf("the state cut at %d of %d bytes reads", i, len(raw))
		}
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// decodedVersion is the version an encoded state starts with.
func decodedVersion(t *testing.T, b []byte) uint64 {
	t.Helper()
	v, n := binary.Uvarint(gunzip(t, b))
	if n <= 0 {
		t.Fatal("no version")
	}
	return v
}

// typicalState is a watch's state after it reported files files of a
// partner's folders, with an event waiting.
func typicalState(files int) *State {
	s := &State{SpecKey: "sftpconnection/box:/incoming:2:*.csv", Seen: make(map[string]Stat, files), Delivered: int64(files)}
	for i := range files {
		p := fmt.Sprintf("incoming/partner-%02d/%04d/invoice-%07d.csv", i%7, i/100, i)
		s.Seen[p] = Stat{Size: 1024 + int64(i*7919)%65536, ModTime: 1_700_000_000 + int64(i)*61}
	}
	s.Outbox = []Pending{{Event: Event{Type: v1alpha1.WatchCreated, File: File{Path: "incoming/partner-00/0000/invoice-0000000.csv", Size: 1024,
		ModTime: 1_700_000_000}}, ID: "0192b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b", Observed: time.UnixMilli(1_700_000_000_123)}}
	return s
}

// BenchmarkState: what a save (Encode) and a load (DecodeState) of a
// typical state allocate, and the bytes stored, which count against the
// tenant's budget.
func BenchmarkState(b *testing.B) {
	for _, files := range []int{1, 100, 10_000} {
		s := typicalState(files)
		blob, err := s.Encode()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Encode/files=%d", files), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Encode(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(blob)), "stored-bytes")
		})
		b.Run(fmt.Sprintf("Decode/files=%d", files), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeState(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
