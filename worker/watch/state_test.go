package watch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
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
	if _, err := DecodeState([]byte("not gzip")); err == nil {
		t.Error("garbage decodes")
	}
}

// decodedVersion is the version an encoded state starts with.
func decodedVersion(t *testing.T, b []byte) uint64 {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	v, err := binary.ReadUvarint(bufio.NewReader(zr))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
