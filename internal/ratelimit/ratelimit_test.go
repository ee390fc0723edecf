package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

func TestKeyed(t *testing.T) {
	l := New[string](1, 5)
	for range 5 {
		if ok, _ := l.Allow("busy"); !ok {
			t.Fatal("a request within the burst was refused")
		}
	}
	if ok, retry := l.Allow("busy"); ok || retry <= 0 || retry > time.Second {
		t.Fatalf("the sixth request in a burst of five: %v, retry after %v", ok, retry)
	}
	if ok, _ := l.Allow("other"); !ok {
		t.Error("one key's limit held up another")
	}
	if ok, _ := New[string](0, 1).Allow("busy"); !ok {
		t.Error("a zero rate must not limit")
	}
}

// TestReserve: reservations past the burst are spaced by the rate, and
// each keeps its place.
func TestReserve(t *testing.T) {
	l := New[string](10, 2)
	var waits []time.Duration
	for range 4 {
		wait, ok := l.Reserve("ns")
		if !ok {
			t.Fatal("no room")
		}
		waits = append(waits, wait)
	}
	if waits[0] != 0 || waits[1] != 0 || waits[2] <= 0 || waits[3] <= waits[2] {
		t.Errorf("waits %v: want two at once, then one each tenth of a second", waits)
	}
}

// TestSweep: a bucket that is full again is dropped, since a new one
// starts full; one still short of tokens is kept.
func TestSweep(t *testing.T) {
	l := New[string](1, 5)
	for i := range sweepAt {
		_, _ = l.Allow("key-" + strconv.Itoa(i))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(time.Now())
	if len(l.buckets) != sweepAt {
		t.Fatalf("%d buckets kept, want all %d: none is full yet", len(l.buckets), sweepAt)
	}
	l.sweep(time.Now().Add(time.Minute))
	if len(l.buckets) != 0 {
		t.Errorf("%d buckets kept after they refilled", len(l.buckets))
	}
}

// TestMaxKeys: past its bound, a limiter refuses new keys rather than
// grow, and takes them again once old buckets have refilled.
func TestMaxKeys(t *testing.T) {
	l := New[string](1, 5).WithMaxKeys(3)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range 3 {
		if b := l.bucket("key-"+strconv.Itoa(i), now); b == nil {
			t.Fatalf("key %d refused below the bound", i)
		} else {
			b.AllowN(now, 1) // still refilling
		}
	}
	if l.bucket("key-0", now) == nil {
		t.Error("a key that has a bucket was refused")
	}
	if l.bucket("new", now) != nil || len(l.buckets) != 3 {
		t.Errorf("a fourth key got a bucket: %d held", len(l.buckets))
	}
	if l.bucket("new", now.Add(time.Minute)) == nil {
		t.Error("a new key was refused after the others refilled")
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", 200 * time.Millisecond: "1", 1200 * time.Millisecond: "2", 3 * time.Second: "3"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %s, want %s", d, got, want)
		}
	}
}
