package ratelimit

import "testing"

func TestInFlightRefusesPastItsLimit(t *testing.T) {
	f := NewInFlight[string](2)
	for range 2 {
		if !f.Enter("a") {
			t.Fatal("refused within the limit")
		}
	}
	if f.Enter("a") {
		t.Fatal("a third request in flight was let in")
	}
	if !f.Enter("b") {
		t.Fatal("another key's request was refused")
	}
	f.Leave("a")
	if !f.Enter("a") {
		t.Fatal("refused after one left")
	}
	f.Leave("a")
	f.Leave("a")
	f.Leave("b")
	if len(f.n) != 0 {
		t.Errorf("%d entries with nothing in flight", len(f.n))
	}
}
