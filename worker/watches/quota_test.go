package watches

import "testing"

// TestCheckTotals: zero is no bound; strangers stay below a bound on all.
func TestCheckTotals(t *testing.T) {
	for _, c := range []struct {
		all, strangers int
		ok             bool
	}{
		{DefaultMaxWatchesTotal, DefaultMaxAccountWatchesTotal, true},
		{0, 0, true},
		{0, 500, true},
		{3000, 3000, false},
		{3000, 0, false},
		{-1, 0, false},
	} {
		err := Limits{MaxWatchesTotal: c.all, MaxAccountWatchesTotal: c.strangers}.CheckTotals()
		if (err == nil) != c.ok {
			t.Errorf("totals %d, %d: %v, want ok %v", c.all, c.strangers, err, c.ok)
		}
	}
}
