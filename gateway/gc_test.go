package gateway

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/gateway/budget"
)

// TestTuneGC: the gateway's GC defaults apply only where the environment
// sets none, and its soft memory limit follows what the budget holds.
func TestTuneGC(t *testing.T) {
	gcPercent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(limit)
	})
	const held = memoryLimitStep + 1
	for _, c := range []struct {
		gogc, gomemlimit string
		percent          int
		// limit is the soft limit at first, and while the budget holds
		// held bytes.
		limit, limitHolding int64
	}{
		{"", "", defaultGCPercent, baseMemoryLimit, baseMemoryLimit + 2*memoryLimitStep},
		{"50", "", 100, baseMemoryLimit, baseMemoryLimit + 2*memoryLimitStep},
		{"", "1GiB", defaultGCPercent, math.MaxInt64, math.MaxInt64},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		setenv(t, "GOGC", c.gogc)
		setenv(t, "GOMEMLIMIT", c.gomemlimit)
		s := &Server{memory: budget.New(64<<20, time.Millisecond)}
		s.tuneGC()
		if got := debug.SetGCPercent(100); got != c.percent {
			t.Errorf("GOGC=%q: GC percent %d, want %d", c.gogc, got, c.percent)
		}
		if got := debug.SetMemoryLimit(-1); got != c.limit {
			t.Errorf("GOMEMLIMIT=%q: memory limit %d, want %d", c.gomemlimit, got, c.limit)
		}
		l := s.memory.Ledger(context.Background())
		if err := l.Hold(held); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != c.limitHolding {
			t.Errorf("GOMEMLIMIT=%q, holding %d: memory limit %d, want %d", c.gomemlimit, held, got, c.limitHolding)
		}
		l.Release()
	}
}

// setenv sets key to value for the test, or unsets it when value is empty.
func setenv(t *testing.T, key, value string) {
	t.Setenv(key, value) // restores the old value after the test
	if value == "" {
		if err := os.Unsetenv(key); err != nil {
			t.Fatal(err)
		}
	}
}
