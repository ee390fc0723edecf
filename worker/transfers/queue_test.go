package transfers

import (
	"context"
	"testing"
)

// TestQueueTake: take hands out only a ready file that fits, never waits,
// and counts it in flight, so that the queue ends only once it ended.
func TestQueueTake(t *testing.T) {
	q := newQueue()
	q.ready = []int{0, 1, 2}
	even := func(i int) bool { return i%2 == 0 }
	if i, ok := q.take(even); !ok || i != 0 {
		t.Fatalf("take = %d, %v; want 0", i, ok)
	}
	if i, ok := q.take(even); !ok || i != 2 {
		t.Fatalf("take = %d, %v; want 2", i, ok)
	}
	if i, ok := q.take(even); ok {
		t.Fatalf("take = %d with none fitting ready", i)
	}
	if i, ok := q.next(context.Background()); !ok || i != 1 {
		t.Fatalf("next = %d, %v; want 1", i, ok)
	}
	ended := make(chan bool)
	go func() { _, ok := q.next(context.Background()); ended <- ok }()
	for _, i := range []int{0, 2, 1} {
		q.end(i, nil)
	}
	if <-ended {
		t.Fatal("next handed out a file after every file ended")
	}
}
