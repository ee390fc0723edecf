package storedbytes

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTenantLocks: one admission of a namespace at a time; another
// namespace's goes ahead, and a waiter whose context ends gives up.
func TestTenantLocks(t *testing.T) {
	var l tenantLocks
	ctx := context.Background()
	unlock, err := l.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.lock(ctx, "b")
	if err != nil {
		t.Fatal("another namespace waits:", err)
	}
	other()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := l.lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second admission of a held namespace: %v", err)
	}
	unlock()
	unlock() // once only
	again, err := l.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if len(l.held) != 0 {
		t.Errorf("%d locks kept with none held", len(l.held))
	}
}

// TestAccountsNeverGetMore: a web UI account's budget is the smaller of
// the two.
func TestAccountsNeverGetMore(t *testing.T) {
	for _, tc := range []struct{ perNamespace, perAccount, want int64 }{
		{64, 16, 16}, {8, 16, 8}, {0, 16, 16}, {8, 0, 8}, {0, 0, 0},
	} {
		l := Limits{PerNamespace: tc.perNamespace, PerAccount: tc.perAccount, AuditPerNamespace: tc.perNamespace, AuditPerAccount: tc.perAccount}.ForAccounts()
		if got := accountLimit(tc.perNamespace, tc.perAccount); got != tc.want || l.PerNamespace != tc.want || l.AuditPerNamespace != tc.want {
			t.Errorf("per namespace %d, per account %d: an account gets %d, want %d", tc.perNamespace, tc.perAccount, got, tc.want)
		}
	}
}
