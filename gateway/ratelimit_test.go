package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestKeyLimiter(t *testing.T) {
	l := newKeyLimiter(1, 5)
	for range 5 {
		if err := l.allow("busy"); err != nil {
			t.Fatal(err)
		}
	}
	var limited *apiError
	if err := l.allow("busy"); !errors.As(err, &limited) || limited.Status != http.StatusTooManyRequests || limited.retryAfter != time.Second {
		t.Fatalf("the sixth request in a burst of five: %v", err)
	}
	if newKeyLimiter(0, 1).allow("busy") != nil {
		t.Error("a zero rate must not limit")
	}
}

// TestKeyLimiterSweep: a bucket that is full again is dropped, since a new
// one starts full; one still short of tokens is kept.
func TestKeyLimiterSweep(t *testing.T) {
	l := newKeyLimiter(1, 5)
	for i := range sweepAt {
		_ = l.allow(types.UID("key-" + strconv.Itoa(i)))
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
