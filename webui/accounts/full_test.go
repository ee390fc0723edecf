package accounts

import "testing"

// TestMaxAccounts: as many accounts as the total holds whole quotas of
// watches; a remainder too small for one more makes none.
func TestMaxAccounts(t *testing.T) {
	for _, tc := range []struct {
		total, quota, want int
		bounded            bool
	}{
		{1000, 10, 100, true},
		{1009, 10, 100, true},
		{9, 10, 0, true},
		{0, 10, 0, false},   // no total
		{1000, 0, 0, false}, // accounts run no watches
	} {
		s := &Store{Quota: Quota{Watches: tc.quota}, Totals: Totals{Watches: tc.total}}
		if got, bounded := s.MaxAccounts(); got != tc.want || bounded != tc.bounded {
			t.Errorf("%d watches of %d each: %d accounts (bounded %v), want %d (%v)", tc.total, tc.quota, got, bounded, tc.want, tc.bounded)
		}
	}
	// Expectations bound the accounts too: the smaller number holds.
	s := &Store{Quota: Quota{Watches: 10, Expectations: 20}, Totals: Totals{Watches: 1000, Expectations: 1000}}
	if got, bounded := s.MaxAccounts(); got != 50 || !bounded {
		t.Errorf("watches for 100 accounts, expectations for 50: %d accounts (bounded %v), want 50", got, bounded)
	}
}
