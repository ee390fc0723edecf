package accounts

import (
	"errors"
	"testing"
	"time"
)

// TestPasswordChecksAreBounded: with every slot taken, a check waits
// HashWait and gives up with ErrBusy rather than queueing without end.
func TestPasswordChecksAreBounded(t *testing.T) {
	s := &Store{Hashes: make(chan struct{}, 1), HashWait: 10 * time.Millisecond}
	ran := false
	if err := s.hashing(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("a free slot: ran %v, %v", ran, err)
	}
	s.Hashes <- struct{}{} // another check holds the only slot
	if err := s.hashing(func() error { t.Error("ran without a slot"); return nil }); !errors.Is(err, ErrBusy) {
		t.Errorf("every slot taken: %v, want ErrBusy", err)
	}
}
