package s3dial

import (
	"context"
	"testing"
	"time"
)

// TestMemory: a namespace holds at most its share, the replica at most
// the total; what waits gets room once it is given back, and a wait ends
// with its context.
func TestMemory(t *testing.T) {
	m := NewMemory(100, 60)
	a, b := m.Of("a"), m.Of("b")
	if a.Size() != 60 {
		t.Fatalf("a namespace's size: %d", a.Size())
	}
	ctx := context.Background()
	if err := a.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := a.Acquire(short, 1); err == nil {
		t.Fatal("a namespace took more than its share")
	}
	if err := b.Acquire(ctx, 40); err != nil {
		t.Fatal(err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if err := b.Acquire(short2, 1); err == nil {
		t.Fatal("the replica held more than its total")
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, 20) }()
	a.Release(60)
	if err := <-got; err != nil {
		t.Fatalf("a wait for room that was given back: %v", err)
	}
}
