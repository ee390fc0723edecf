package gateway

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: the gateway's GC defaults apply only where the environment
// sets none.
func TestTuneGC(t *testing.T) {
	gcPercent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(limit)
	})
	for _, c := range []struct {
		gogc, gomemlimit string
		percent          int
		limit            int64
	}{
		{"", "", defaultGCPercent, defaultMemoryLimit},
		{"50", "", 100, defaultMemoryLimit},
		{"", "1GiB", defaultGCPercent, math.MaxInt64},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		setenv(t, "GOGC", c.gogc)
		setenv(t, "GOMEMLIMIT", c.gomemlimit)
		tuneGC()
		if got := debug.SetGCPercent(100); got != c.percent {
			t.Errorf("GOGC=%q: GC percent %d, want %d", c.gogc, got, c.percent)
		}
		if got := debug.SetMemoryLimit(-1); got != c.limit {
			t.Errorf("GOMEMLIMIT=%q: memory limit %d, want %d", c.gomemlimit, got, c.limit)
		}
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
