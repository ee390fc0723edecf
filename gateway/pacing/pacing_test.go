package pacing

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestChunksYieldToSmallRequests: while small requests are answered, a
// chunk's time over the share must pass before the next chunk; at no other
// time.
func TestChunksYieldToSmallRequests(t *testing.T) {
	p := New(0.2, time.Hour, nil)
	now := time.Since(p.epoch)
	p.charge(now, 10*time.Millisecond)
	if d := p.wait(now); d != 0 {
		t.Errorf("no small request answered: waits %v, want none", d)
	}
	p.SmallDone()
	now = time.Since(p.epoch)
	p.charge(now, 10*time.Millisecond)
	if d := p.wait(now); d < 40*time.Millisecond {
		t.Errorf("a 10ms chunk at a share of 0.2: the next waits %v, want at least 40ms", d)
	}
	// However long a chunk was, it is charged at most maxCharge.
	p = New(0.2, time.Hour, nil)
	p.SmallDone()
	now = time.Since(p.epoch)
	p.charge(now, time.Hour)
	if d, want := p.wait(now), 4*maxCharge; d != want {
		t.Errorf("a chunk of an hour: the next waits %v, want %v", d, want)
	}
	// A share of 1 is no pacing.
	p = New(1, time.Hour, nil)
	p.SmallDone()
	if p.contended(time.Since(p.epoch)) {
		t.Error("a share of 1 paces")
	}
}

// TestAWaitEndsWithItsRequest: a chunk waiting for its turn stops when
// its request's client goes away.
func TestAWaitEndsWithItsRequest(t *testing.T) {
	p := New(0.001, time.Hour, nil)
	p.SmallDone()
	p.charge(time.Since(p.epoch), maxCharge) // a wait of about 50s
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := p.Stream(ctx)
	if err := s.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with the request gone: %v, want context.Canceled", err)
	}
}

// TestChunks: paced writes and reads move at most a Chunk at once; an
// unpaced stream passes them through whole.
func TestChunks(t *testing.T) {
	s := New(0.5, time.Hour, nil).Stream(context.Background())
	var sizes []int
	w := s.Writer(writerFunc(func(b []byte) (int, error) {
		sizes = append(sizes, len(b))
		return len(b), nil
	}))
	if n, err := w.Write(make([]byte, 2*Chunk+100)); err != nil || n != 2*Chunk+100 {
		t.Fatalf("wrote %d: %v", n, err)
	}
	if want := []int{Chunk, Chunk, 100}; !slices.Equal(sizes, want) {
		t.Errorf("writes of %v, want %v", sizes, want)
	}
	r := s.Reader(bytes.NewReader(make([]byte, 3*Chunk)), 100)
	for _, want := range []int{100, Chunk, Chunk} {
		if n, err := r.Read(make([]byte, 2*Chunk)); err != nil || n != want {
			t.Errorf("read %d: %v, want %d", n, err, want)
		}
	}
	var unpaced *Stream
	if w := (&bytes.Buffer{}); unpaced.Writer(w) != w {
		t.Error("a nil stream's writer is not the writer itself")
	}
	if err := unpaced.Next(); err != nil {
		t.Error(err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
