package watch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/zipped"
)

// State is what a watch keeps across restarts and moves between replicas:
// what it reported, and the events still to deliver, in order. The worker
// stores it encoded (Encode) in the Kubernetes API.
type State struct {
	// SpecKey identifies what the listing depends on (the connection,
	// path, depth, globs): when it changes, the watch starts over.
	SpecKey string
	// Seen is what was reported, file by file; nil before the first poll.
	Seen map[string]Stat
	// Outbox is the events to deliver, oldest first.
	Outbox []Pending
	// Delivered, Failed and DeadLettered count events delivered, tries
	// failed and events sent to the dead-letter sink.
	Delivered, Failed, DeadLettered int64
	// Running is the changes whose Transfer (spec.transfer) has not
	// finished: what becomes of their files waits for it.
	Running []Running
	// Transfers counts the Transfers made, and those that finished;
	// LastTransfer names the last made.
	Started, Succeeded, TransfersFailed int64
	LastTransfer                        string
	// Unsettled is the files whose afterDelivery move or removal failed
	// (the server's session broke, say): tried again at each poll.
	Unsettled []Unsettled
}

// Unsettled is a file whose afterDelivery action is still to be done.
type Unsettled struct {
	Event
	// OK says its event was delivered (and its Transfer succeeded): it
	// goes where afterDelivery says; else to failedTo.
	OK bool
}

// Running is a change whose Transfer runs.
type Running struct {
	Event
	// ID is the change's event id, which names its Transfer.
	ID string
	// Made is when its Transfer was made.
	Made time.Time
	// Failed says its event was not delivered (dead-lettered or refused):
	// the file goes to failedTo whatever its Transfer does.
	Failed bool
}

// Pending is an event waiting to be delivered.
type Pending struct {
	Event
	// ID is the CloudEvent's id, the same on every try and after a
	// restart, so that receivers can drop repeats.
	ID string
	// Attempts counts the failed tries so far.
	Attempts int32
	// Observed is when the poll that found it ran.
	Observed time.Time
}

// stateVersion starts every encoded State; a State of another version is
// not read (the watch starts over from a snapshot). Version 1 is version 2
// without its transfers, version 2 is version 3 without the files' tags
// (an object store's), and version 3 is version 4 without its unsettled
// files: each is read, and written while a state has nothing of the next,
// so that a replica of the release before reads it during a rolling
// upgrade.
const stateVersion = 4

// ErrUnknownState is an encoded State this worker cannot read.
var ErrUnknownState = errors.New("the watch's stored state is of an unknown version")

// Encode writes s compactly: paths sorted and front-coded (each the
// length it shares with the one before, then the rest), numbers as
// varints, the whole gzipped. A folder's paths share long prefixes, so a
// file takes a few bytes.
func (s *State) Encode() ([]byte, error) {
	return zipped.Zip(func(bw *bufio.Writer) error {
		s.encode(&encoder{w: bw})
		return nil
	})
}

func (s *State) encode(w *encoder) {
	version := uint64(1)
	if len(s.Running) > 0 || s.Started != 0 || s.Succeeded != 0 || s.TransfersFailed != 0 || s.LastTransfer != "" {
		version = 2
	}
	for _, st := range s.Seen {
		if st.Tag != 0 {
			version = 3
			break
		}
	}
	if len(s.Unsettled) > 0 {
		version = 4
	}
	w.uvarint(version)
	w.string(s.SpecKey)
	if s.Seen == nil {
		w.uvarint(0)
	} else {
		w.uvarint(1)
		paths := make([]string, 0, len(s.Seen))
		for p := range s.Seen {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		w.uvarint(uint64(len(paths)))
		prev := ""
		for _, p := range paths {
			shared := commonPrefix(prev, p)
			w.uvarint(uint64(shared)) //nolint:gosec // a length, not negative
			w.string(p[shared:])
			st := s.Seen[p]
			w.varint(st.Size)
			w.varint(st.ModTime)
			if version >= 3 {
				w.uvarint(st.Tag)
			}
			prev = p
		}
	}
	w.uvarint(uint64(len(s.Outbox)))
	for _, e := range s.Outbox {
		w.event(e.Event)
		w.string(e.ID)
		w.varint(int64(e.Attempts))
		w.varint(e.Observed.UnixMilli())
	}
	w.varint(s.Delivered)
	w.varint(s.Failed)
	w.varint(s.DeadLettered)
	if version >= 2 {
		w.uvarint(uint64(len(s.Running)))
		for _, e := range s.Running {
			w.event(e.Event)
			w.string(e.ID)
			w.varint(e.Made.UnixMilli())
			w.flag(e.Failed)
		}
		w.varint(s.Started)
		w.varint(s.Succeeded)
		w.varint(s.TransfersFailed)
		w.string(s.LastTransfer)
	}
	if version >= 4 {
		w.uvarint(uint64(len(s.Unsettled)))
		for _, u := range s.Unsettled {
			w.event(u.Event)
			w.flag(u.OK)
		}
	}
}

// maxDecoded bounds what a stored State may unzip to, so that a corrupt
// or hostile one cannot take the worker's memory.
const maxDecoded = 64 << 20

// DecodeState reads what Encode wrote.
func DecodeState(b []byte) (*State, error) {
	var s *State
	var decodeErr error
	if err := zipped.Unzip(b, maxDecoded, func(raw []byte) error { s, decodeErr = decode(raw); return nil }); err != nil {
		return nil, fmt.Errorf("unzipping the watch's stored state: %w", err)
	}
	return s, decodeErr
}

func decode(raw []byte) (*State, error) {
	r := &decoder{b: raw}
	version := r.uvarint()
	if version < 1 || version > stateVersion {
		return nil, ErrUnknownState
	}
	s := &State{SpecKey: r.string()}
	if r.uvarint() == 1 {
		n := r.count()
		s.Seen = make(map[string]Stat, n)
		prev := ""
		for range n {
			// A prefix's length, not bounded by what is left to read.
			shared := r.uvarint()
			if shared > uint64(len(prev)) {
				return nil, errors.New("the watch's stored state is corrupt")
			}
			p := r.path(prev[:shared])
			st := Stat{Size: r.varint(), ModTime: r.varint()}
			if version >= 3 {
				st.Tag = r.uvarint()
			}
			s.Seen[p] = st
			prev = p
		}
	}
	n := r.count()
	s.Outbox = make([]Pending, 0, n)
	for range n {
		var e Pending
		e.Event = r.event()
		e.ID = r.string()
		e.Attempts = int32(r.varint()) //nolint:gosec // written from an int32
		e.Observed = time.UnixMilli(r.varint())
		s.Outbox = append(s.Outbox, e)
	}
	s.Delivered, s.Failed, s.DeadLettered = r.varint(), r.varint(), r.varint()
	if version >= 2 {
		for range r.count() {
			e := Running{Event: r.event(), ID: r.string()}
			e.Made = time.UnixMilli(r.varint())
			e.Failed = r.uvarint() == 1
			s.Running = append(s.Running, e)
		}
		s.Started, s.Succeeded, s.TransfersFailed = r.varint(), r.varint(), r.varint()
		s.LastTransfer = r.string()
	}
	if version >= 4 {
		for range r.count() {
			s.Unsettled = append(s.Unsettled, Unsettled{Event: r.event(), OK: r.uvarint() == 1})
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("the watch's stored state is corrupt: %w", r.err)
	}
	return s, nil
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// encoder writes a State's parts; buf spares each number an allocation.
type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) uvarint(v uint64) { _, _ = e.w.Write(binary.AppendUvarint(e.buf[:0], v)) }
func (e *encoder) varint(v int64)   { _, _ = e.w.Write(binary.AppendVarint(e.buf[:0], v)) }
func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	_, _ = e.w.WriteString(s)
}

func (e *encoder) flag(b bool) {
	if b {
		e.uvarint(1)
	} else {
		e.uvarint(0)
	}
}

func (e *encoder) event(ev Event) {
	e.string(string(ev.Type))
	e.string(ev.Path)
	e.varint(ev.Size)
	e.varint(ev.ModTime)
}

func (d *decoder) event() Event {
	var ev Event
	ev.Type = v1alpha1.WatchEvent(d.string())
	ev.Path = d.string()
	ev.Size, ev.ModTime = d.varint(), d.varint()
	return ev
}

// decoder reads a State's parts from what Encode wrote, unzipped; the
// first error stays, and what follows reads as zeros.
type decoder struct {
	b   []byte
	err error
	// joined builds a path from the one before and its rest, so that a
	// path costs one allocation.
	joined []byte
}

var errShort = errors.New("a value past the end")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length, bounded by what is left to read: every item
// takes a byte at least.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return 0
	}
	return int(n) //nolint:gosec // at most len(d.b)
}

// bytes reads a string's bytes, which stay the decoder's.
func (d *decoder) bytes() []byte {
	n := d.count()
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) string() string { return string(d.bytes()) }

// path reads a path stored as its rest after the prefix it shares.
func (d *decoder) path(prefix string) string {
	d.joined = append(append(d.joined[:0], prefix...), d.bytes()...)
	return string(d.joined)
}
