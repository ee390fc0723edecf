package budget

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestHoldsRefuseRatherThanGrow(t *testing.T) {
	const large = SmallHold + 1
	b := New(8*large, 10*time.Millisecond) // a reserve of one large hold
	first := b.Ledger(context.Background())
	for range 7 {
		if err := first.Hold(large); err != nil {
			t.Fatal(err)
		}
	}
	second := b.Ledger(context.Background())
	if err := second.Hold(large); !errors.Is(err, ErrBusy) {
		t.Fatalf("a large hold past the budget less its reserve: %v, want ErrBusy", err)
	}
	if b.Held() != 7*large {
		t.Errorf("held %d, want %d: a refused hold takes nothing", b.Held(), 7*large)
	}
	// The reserve is for small holds: the large ones cannot keep them out.
	for range large / SmallHold {
		if err := second.Hold(SmallHold); err != nil {
			t.Fatalf("a small hold within the reserve: %v", err)
		}
	}
	if err := second.Hold(SmallHold); !errors.Is(err, ErrBusy) {
		t.Fatalf("a small hold past the whole budget: %v, want ErrBusy", err)
	}
	var tooLarge *TooLargeError
	if err := second.Hold(7*large + 1); !errors.As(err, &tooLarge) {
		t.Fatalf("a hold larger than one may have: %v", err)
	}
	first.Release()
	second.Release()
	if b.Held() != 0 {
		t.Errorf("held %d after every release", b.Held())
	}
}

func TestAHoldWaitsForARelease(t *testing.T) {
	b := New(100, time.Minute)
	first := b.Ledger(context.Background())
	if err := first.Hold(100); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		second := b.Ledger(context.Background())
		done <- second.Hold(50)
		second.Release()
	}()
	first.Release()
	if err := <-done; err != nil {
		t.Fatalf("a hold waiting for a release: %v", err)
	}
}

func TestAHoldEndsWithItsRequest(t *testing.T) {
	b := New(100, time.Minute)
	first := b.Ledger(context.Background())
	if err := first.Hold(100); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		second := b.Ledger(ctx)
		done <- second.Hold(1)
	}()
	cancel() // the client went away
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the wait of a request that ended: %v", err)
	}
}

func TestNoBudget(t *testing.T) {
	var l *Ledger
	if err := l.Hold(1 << 40); err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestWatch: the watcher hears the bytes held rounded up to its step, on
// every rise past what it heard, and on a fall of more than a step, not on
// each hold at a step's edge.
func TestWatch(t *testing.T) {
	b := New(100, time.Millisecond)
	var heard []int64
	b.Watch(10, func(held int64) { heard = append(heard, held) })
	first, second := b.Ledger(context.Background()), b.Ledger(context.Background())
	hold := func(l *Ledger, n int64) {
		t.Helper()
		if err := l.Hold(n); err != nil {
			t.Fatal(err)
		}
	}
	hold(&first, 5)  // 5: 10
	hold(&first, 5)  // 10: still 10
	hold(&second, 1) // 11: 20
	first.Release()  // 1: 10, a step below 20: not heard
	hold(&first, 30) // 31: 40
	first.Release()  // 1: 10, three steps below 40
	second.Release() // 0: a step below 10: not heard
	want := []int64{0, 10, 20, 40, 10}
	if !slices.Equal(heard, want) {
		t.Errorf("heard %v, want %v", heard, want)
	}
}

// TestPartsShareByNamespace: a namespace's store uploads hold at most
// half of what large holds may, so another's still find room; a hold
// larger than the share is refused at once.
func TestPartsShareByNamespace(t *testing.T) {
	const large = SmallHold + 1
	b := New(8*large, 10*time.Millisecond) // large holds: 7; a share: 3
	greedy, other := b.Parts("greedy"), b.Parts("other")
	ctx := context.Background()
	if err := greedy.Acquire(ctx, 3*large); err != nil {
		t.Fatal(err)
	}
	if err := greedy.Acquire(ctx, large); !errors.Is(err, ErrBusy) {
		t.Fatalf("past the namespace's share: %v, want ErrBusy", err)
	}
	if err := other.Acquire(ctx, 3*large); err != nil {
		t.Fatalf("another namespace within its share: %v", err)
	}
	var tooLarge *TooLargeError
	if err := other.Acquire(ctx, 4*large); !errors.As(err, &tooLarge) {
		t.Fatalf("a hold larger than a share: %v", err)
	}
	greedy.Release(3 * large)
	other.Release(3 * large)
	if b.Held() != 0 || len(b.parts) != 0 {
		t.Errorf("held %d, parts %v after every release", b.Held(), b.parts)
	}
}
